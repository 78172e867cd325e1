#!/usr/bin/env bash
# usage: tools/kinesis-local/start.sh PORT
#
# Starts kinesis-local (a Kinesis Data Streams-compatible server: a JavaScript build of
# kinesis-mock, npm kinesis-local@0.6.2 pinned in package-lock.json) in the background on
# http://127.0.0.1:PORT, in memory. Its HTTPS port (which it always opens) is another free loopback
# port. Installs the pinned package with `npm ci` first when node_modules is missing or stale
# (under a lock, so parallel callers are safe). Waits until the server answers HTTP (up to 60 s),
# then prints its endpoint URL on stdout and returns 0.
#
# kinesis-local binds 0.0.0.0 and has no host option: force-loopback.js (preloaded with node -r)
# moves every listen onto 127.0.0.1. It must run from its package folder (it reads server.json,
# its TLS certificate, from the working directory). Stream creation, deletion, splits, merges and
# shard count updates take 0 ms (the server's default is 500 ms each); up to $KINESIS_LOCAL_SHARD_LIMIT
# open shards (default 1000; the server's own default is 50).
#
# The pid goes to $KINESIS_LOCAL_PIDFILE, default tools/kinesis-local/.run/kinesis-local-PORT.pid;
# the server log to the same name with .log. Stop it with tools/kinesis-local/stop.sh PORT (same
# pid file rule).
# Exit codes: 2 usage, 3 install failed, 4 server did not come up or PORT already answers (log
# tail printed on stderr).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../lib/launch.sh"
launch_args kinesis-local "${KINESIS_LOCAL_PIDFILE:-}" "$0 PORT" "$@"
launch_npm_ci "$here"
tls_port="$(launch_free_port)"
while [[ "$tls_port" == "$port" ]]; do tls_port="$(launch_free_port)"; done
cd "$here/node_modules/kinesis-local"
export KINESIS_MOCK_PLAIN_PORT="$port" KINESIS_MOCK_TLS_PORT="$tls_port"
export CREATE_STREAM_DURATION=0ms DELETE_STREAM_DURATION=0ms SPLIT_SHARD_DURATION=0ms \
  MERGE_SHARDS_DURATION=0ms UPDATE_SHARD_COUNT_DURATION=0ms UPDATE_STREAM_MODE_DURATION=0ms \
  REGISTER_STREAM_CONSUMER_DURATION=0ms DEREGISTER_STREAM_CONSUMER_DURATION=0ms \
  START_STREAM_ENCRYPTION_DURATION=0ms STOP_STREAM_ENCRYPTION_DURATION=0ms
export SHARD_LIMIT="${KINESIS_LOCAL_SHARD_LIMIT:-1000}" LOG_LEVEL="${KINESIS_LOCAL_LOG_LEVEL:-WARN}"
export SHOULD_PERSIST_DATA=false
launch_serve kinesis-local "http://127.0.0.1:$port" "$pidfile" "${pidfile%.pid}.log" 60 \
  node -r "$here/force-loopback.js" main.js
