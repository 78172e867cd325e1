#!/usr/bin/env bash
# usage: tools/dynalite/stop.sh PORT
#
# Stops the dynalite started by start.sh PORT: sends SIGTERM to the pid in its pid file
# ($DYNALITE_PIDFILE, default tools/dynalite/.run/dynalite-PORT.pid), waits up to 5 s, then
# SIGKILL. Removes the pid file. Returns 0 when nothing was running.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../lib/launch.sh"

launch_args dynalite "${DYNALITE_PIDFILE:-}" "$0 PORT" "$@"
launch_stop "$pidfile" 5
