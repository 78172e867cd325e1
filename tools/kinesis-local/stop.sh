#!/usr/bin/env bash
# usage: tools/kinesis-local/stop.sh PORT
#
# Stops the kinesis-local started by start.sh PORT: sends SIGTERM to the pid in its pid file
# ($KINESIS_LOCAL_PIDFILE, default tools/kinesis-local/.run/kinesis-local-PORT.pid), waits up to
# 5 s, then SIGKILL. Removes the pid file. Returns 0 when nothing was running.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../lib/launch.sh"
launch_args kinesis-local "${KINESIS_LOCAL_PIDFILE:-}" "$0 PORT" "$@"
launch_stop "$pidfile" 5
