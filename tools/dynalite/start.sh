#!/usr/bin/env bash
# usage: tools/dynalite/start.sh PORT [DIR]
#
# Starts dynalite (a DynamoDB-compatible server, npm dynalite@4.0.0 pinned in package-lock.json)
# in the background on http://127.0.0.1:PORT, in memory, or persisted in DIR (LevelDB) when given.
# Installs the pinned packages with `npm ci` first when node_modules is missing or stale (under a
# lock, so parallel callers are safe). Waits until the server answers HTTP (up to 30 s), then
# prints its endpoint URL on stdout and returns 0.
#
# The pid goes to $DYNALITE_PIDFILE, default tools/dynalite/.run/dynalite-PORT.pid; the server
# log to the same name with .log. Stop it with tools/dynalite/stop.sh PORT (same pid file rule).
# Exit codes: 2 usage, 3 install failed, 4 server did not come up (log tail printed on stderr).
set -euo pipefail

port="${1:-}"
dir="${2:-}"
if [[ ! "$port" =~ ^[0-9]+$ ]]; then
  echo "usage: $0 PORT [DIR]" >&2
  exit 2
fi
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
run="$here/.run"
mkdir -p "$run"
pidfile="${DYNALITE_PIDFILE:-$run/dynalite-$port.pid}"
logfile="${pidfile%.pid}.log"

# Install once; flock serialises concurrent test packages starting their own servers.
(
  flock 9
  if [[ ! -f "$here/node_modules/.package-lock.json" || "$here/package-lock.json" -nt "$here/node_modules/.package-lock.json" ]]; then
    (cd "$here" && npm ci --no-audit --no-fund --loglevel=error) >&2 || exit 3
  fi
) 9>"$run/install.lock"

if [[ -n "$dir" ]]; then
  mkdir -p "$dir"
  dir="$(cd "$dir" && pwd)"
fi

cd "$here"
nohup node start.js "$port" ${dir:+"$dir"} >"$logfile" 2>&1 </dev/null &
pid=$!
echo "$pid" >"$pidfile"

url="http://127.0.0.1:$port"
for _ in $(seq 1 300); do
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "dynalite exited during startup; log $logfile:" >&2
    tail -n 20 "$logfile" >&2 || true
    rm -f "$pidfile"
    exit 4
  fi
  # dynalite answers any HTTP request (an unsigned POST gets a 400 JSON error); any status means up.
  if curl -s -o /dev/null -X POST "$url/" 2>/dev/null; then
    echo "$url"
    exit 0
  fi
  sleep 0.1
done
echo "dynalite did not answer on $url within 30 s; log $logfile:" >&2
tail -n 20 "$logfile" >&2 || true
kill "$pid" 2>/dev/null || true
rm -f "$pidfile"
exit 4
