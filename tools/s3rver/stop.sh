#!/usr/bin/env bash
# usage: tools/s3rver/stop.sh PORT
#
# Stops the s3rver started by start.sh PORT: sends SIGTERM to the pid in its pid file
# ($S3RVER_PIDFILE, default tools/s3rver/.run/s3rver-PORT.pid), waits up to 5 s, then SIGKILL.
# Removes the pid file, and the temporary data directory start.sh made when it was given no DIR.
# Returns 0 when nothing was running.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../lib/launch.sh"

launch_args s3rver "${S3RVER_PIDFILE:-}" "$0 PORT" "$@"
launch_stop "$pidfile" 5
tmpdir_file="${pidfile%.pid}.tmpdir"
if [[ -f "$tmpdir_file" ]]; then
  tmp="$(cat "$tmpdir_file")"
  [[ "$tmp" == */s3rver-* && -d "$tmp" ]] && rm -rf "$tmp"
  rm -f "$tmpdir_file"
fi
