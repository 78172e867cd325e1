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
# Exit codes: 2 usage, 3 install failed, 4 server did not come up or PORT already answers (log
# tail printed on stderr).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../lib/launch.sh"

launch_args dynalite "${DYNALITE_PIDFILE:-}" "$0 PORT [DIR]" "$@"
dir="$(launch_data_dir "${2:-}")"
launch_npm_ci "$here"

cd "$here"
launch_serve dynalite "http://127.0.0.1:$port" "$pidfile" "${pidfile%.pid}.log" 30 node start.js "$port" ${dir:+"$dir"}
