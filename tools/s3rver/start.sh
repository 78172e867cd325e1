#!/usr/bin/env bash
# usage: tools/s3rver/start.sh PORT [DIR]
#
# Starts s3rver (an S3-compatible server, npm s3rver@3.7.1 pinned in package-lock.json) in the
# background on http://127.0.0.1:PORT (loopback only: --address 127.0.0.1), keeping buckets and
# objects as files in DIR when given, else in a fresh temporary directory (removed by stop.sh).
# Access keys "S3RVER" (s3rver's own) and "local" (local-keys.js: the dummy credentials of
# internal/awsconfig) are accepted, with any well-formed signature (--allow-mismatched-signatures);
# path-style addressing only (--no-vhost-buckets). Installs the pinned packages with `npm ci` first when node_modules is
# missing or stale (under a lock, so parallel callers are safe). Waits until the server answers
# HTTP (up to 30 s), then prints its endpoint URL on stdout and returns 0.
#
# The pid goes to $S3RVER_PIDFILE, default tools/s3rver/.run/s3rver-PORT.pid; the server log to
# the same name with .log. Stop it with tools/s3rver/stop.sh PORT (same pid file rule).
# Exit codes: 2 usage, 3 install failed, 4 server did not come up or PORT already answers (log
# tail printed on stderr).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../lib/launch.sh"

launch_args s3rver "${S3RVER_PIDFILE:-}" "$0 PORT [DIR]" "$@"
dir="$(launch_data_dir "${2:-}")"
launch_npm_ci "$here"
if [[ -z "$dir" ]]; then
  # A temporary directory, named for stop.sh once the server is up (removed at once otherwise).
  dir="$(mktemp -d "${TMPDIR:-/tmp}/s3rver-$port-XXXXXX")"
  trap 'if [[ $? == 0 ]]; then echo "$dir" >"${pidfile%.pid}.tmpdir"; else rm -rf "$dir"; fi' EXIT
fi

cd "$here"
launch_serve s3rver "http://127.0.0.1:$port" "$pidfile" "${pidfile%.pid}.log" 30 \
  node -r "$here/local-keys.js" node_modules/s3rver/bin/s3rver.js --address 127.0.0.1 --port "$port" --directory "$dir" \
  --silent --allow-mismatched-signatures --no-vhost-buckets
