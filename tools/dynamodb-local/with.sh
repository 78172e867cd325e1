#!/usr/bin/env bash
# usage: tools/dynamodb-local/with.sh CMD [ARGS...]
#
# Runs CMD with PROJHOST_DYNAMODB_ENDPOINT set to a DynamoDB Local: the one at
# $PROJHOST_DYNAMODB_LOCAL_ENDPOINT when set (CI starts it), else one that start.sh starts on a
# free port for CMD and stop.sh stops when CMD ends. Returns CMD's exit status. Without Java it
# says so on stderr and returns 0 without running CMD, unless CI=true (then it fails with 5).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../lib/launch.sh"
if [[ $# -eq 0 ]]; then
  echo "usage: $0 CMD [ARGS...]" >&2
  exit 2
fi

# run ENDPOINT: runs CMD against ENDPOINT and says how long it took.
run() {
  echo "== DynamoDB Local at $1: $cmd" >&2
  local rc=0 start=$SECONDS
  PROJHOST_DYNAMODB_ENDPOINT="$1" "${argv[@]}" || rc=$?
  echo "== against DynamoDB Local: $cmd: exit $rc after $((SECONDS - start)) s" >&2
  return "$rc"
}
cmd="$*"
argv=("$@")

if [[ -n "${PROJHOST_DYNAMODB_LOCAL_ENDPOINT:-}" ]]; then
  run "$PROJHOST_DYNAMODB_LOCAL_ENDPOINT"
  exit
fi

run="$(mktemp -d)"
export DYNAMODB_LOCAL_PIDFILE="$run/dynamodb-local.pid"
trap '"$here/stop.sh" "${port:-0}"; rm -rf "$run"' EXIT
for attempt in 1 2 3; do # the free port may be taken before the server binds it
  port="$(launch_free_port)"
  rc=0
  endpoint="$("$here/start.sh" "$port")" || rc=$?
  if [[ $rc -eq 0 ]]; then
    break
  fi
  if [[ $rc -eq 5 && "${CI:-}" != true ]]; then
    echo "== no Java: skipping what needs DynamoDB Local ($*); set PROJHOST_DYNAMODB_LOCAL_ENDPOINT to use a running one" >&2
    exit 0
  fi
  if [[ $rc -ne 4 || $attempt -eq 3 ]]; then
    exit "$rc"
  fi
done
run "$endpoint"
