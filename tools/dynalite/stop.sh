#!/usr/bin/env bash
# usage: tools/dynalite/stop.sh PORT
#
# Stops the dynalite started by start.sh PORT: sends SIGTERM to the pid in its pid file
# ($DYNALITE_PIDFILE, default tools/dynalite/.run/dynalite-PORT.pid), waits up to 5 s, then
# SIGKILL. Removes the pid file. Returns 0 when nothing was running.
set -euo pipefail

port="${1:-}"
if [[ ! "$port" =~ ^[0-9]+$ ]]; then
  echo "usage: $0 PORT" >&2
  exit 2
fi
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
pidfile="${DYNALITE_PIDFILE:-$here/.run/dynalite-$port.pid}"
[[ -f "$pidfile" ]] || exit 0
pid="$(cat "$pidfile")"
if [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null; then
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 50); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -9 "$pid" 2>/dev/null || true
fi
rm -f "$pidfile"
