#!/usr/bin/env bash
# usage: tools/dynamodb-local/start.sh PORT [DIR]
#
# Starts Amazon DynamoDB Local 1.25.1 in the background on port PORT, in memory, or persisted in
# DIR (-dbPath) when given, with -sharedDb (one database whatever the clients' credentials and
# region, as dynalite) and telemetry off. The jar comes from the npm package
# amplify-dynamodb-simulator@2.9.30 (emulator/DynamoDBLocal.jar and emulator/DynamoDBLocal_lib),
# pinned in package-lock.json without the package's Node.js dependencies (only the jar is used)
# and installed with `npm ci` first when node_modules is missing or stale (under a lock, so
# parallel callers are safe). Needs Java 11 or later (`java` on PATH, or $JAVA_HOME/bin/java).
#
# DynamoDB Local has no bind-address option: it listens on every interface. Address it at
# http://127.0.0.1:PORT only (what this script prints), on a machine where PORT is not reachable
# from outside.
#
# Waits until the server answers HTTP (up to 90 s; a first start takes about 7 s on 2 cores),
# then prints its endpoint URL on stdout and returns 0. JVM options come from
# $DYNAMODB_LOCAL_JAVA_OPTS (default -Xmx512m -XX:+UseSerialGC; about 200 MB resident when idle).
#
# The pid goes to $DYNAMODB_LOCAL_PIDFILE, default tools/dynamodb-local/.run/dynamodb-local-PORT.pid;
# the server log to the same name with .log. Stop it with tools/dynamodb-local/stop.sh PORT (same
# pid file rule).
# Exit codes: 2 usage, 3 install failed, 4 server did not come up or PORT already answers (log
# tail on stderr), 5 no java.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../lib/launch.sh"

launch_args dynamodb-local "${DYNAMODB_LOCAL_PIDFILE:-}" "$0 PORT [DIR]" "$@"
dir="$(launch_data_dir "${2:-}")"
java="${JAVA_HOME:+$JAVA_HOME/bin/}java"
if ! command -v "$java" >/dev/null; then
  echo "DynamoDB Local needs Java 11 or later: $java not found (Debian: apt-get install openjdk-17-jre-headless)" >&2
  exit 5
fi
launch_npm_ci "$here" --ignore-scripts
emulator="$here/node_modules/amplify-dynamodb-simulator/emulator"
if [[ ! -f "$emulator/DynamoDBLocal.jar" ]]; then
  echo "$emulator/DynamoDBLocal.jar is missing after npm ci" >&2
  exit 3
fi

store=(-inMemory)
[[ -z "$dir" ]] || store=(-dbPath "$dir")
read -r -a jopts <<<"${DYNAMODB_LOCAL_JAVA_OPTS:--Xmx512m -XX:+UseSerialGC}"

# After a failed start (e.g. its port taken) the JVM lives on with nothing listening.
launch_fatal='^Exception in thread "main"'
cd "$here/.run" # takes the files the server writes besides -dbPath (dynamodb-local-metadata.json)
launch_serve "DynamoDB Local" "http://127.0.0.1:$port" "$pidfile" "${pidfile%.pid}.log" 90 \
  "$java" "${jopts[@]}" -Djava.library.path="$emulator/DynamoDBLocal_lib" -jar "$emulator/DynamoDBLocal.jar" \
  "${store[@]}" -sharedDb -disableTelemetry -port "$port"
