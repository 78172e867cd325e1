#!/usr/bin/env bash
# usage: tools/dynamodb-local/stop.sh PORT
#
# Stops the DynamoDB Local started by start.sh PORT: sends SIGTERM to the pid in its pid file
# ($DYNAMODB_LOCAL_PIDFILE, default tools/dynamodb-local/.run/dynamodb-local-PORT.pid), waits up
# to 10 s, then SIGKILL. Removes the pid file. Returns 0 when nothing was running.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../lib/launch.sh"

launch_args dynamodb-local "${DYNAMODB_LOCAL_PIDFILE:-}" "$0 PORT" "$@"
launch_stop "$pidfile" 10
