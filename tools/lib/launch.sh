# Shared by the local server launchers (tools/dynalite, tools/dynamodb-local, tools/kinesis-local, tools/s3rver): source it from a
# start.sh or stop.sh running under `set -euo pipefail` that has set here= to its folder. Exit codes: 2 usage, 3 install failed,
# 4 server did not come up or its port is taken.

# launch_args NAME PIDFILE USAGE PORT: checks PORT (else prints USAGE and exits 2) and sets the
# globals port=PORT and pidfile=PIDFILE, or $here/.run/NAME-PORT.pid when PIDFILE is empty.
launch_args() {
  if [[ ! "${4:-}" =~ ^[0-9]+$ ]]; then
    echo "usage: $3" >&2
    exit 2
  fi
  port="$4"
  pidfile="${2:-$here/.run/$1-$port.pid}"
}

# launch_free_port: prints a TCP port that nothing listens on at 127.0.0.1 right now (another
# process may still take it before the server binds it: retry the start on exit code 4).
launch_free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null && return
  local p
  while :; do
    p=$((20000 + RANDOM % 30000))
    (: </dev/tcp/127.0.0.1/"$p") 2>/dev/null || { echo "$p"; return; }
  done
}

# launch_data_dir [DIR]: prints nothing without DIR, else creates DIR and prints its absolute path
# (the server runs in another working directory).
launch_data_dir() {
  [[ -n "${1:-}" ]] || return 0
  mkdir -p "$1"
  (cd "$1" && pwd)
}

# launch_npm_ci DIR [NPM-CI-ARGS...]: runs npm ci in DIR when DIR/node_modules is missing or
# older than DIR/package-lock.json, under a lock (DIR/.run/install.lock) so that parallel
# callers install once. npm's output goes to stderr. Exits 3 when npm ci fails.
launch_npm_ci() {
  local dir="$1"
  shift
  mkdir -p "$dir/.run"
  (
    flock 9
    if [[ ! -f "$dir/node_modules/.package-lock.json" || "$dir/package-lock.json" -nt "$dir/node_modules/.package-lock.json" ]]; then
      (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error "$@") >&2 || exit 3
    fi
  ) 9>"$dir/.run/install.lock"
}

# launch_serve NAME URL PIDFILE LOGFILE SECONDS CMD...: starts CMD in the background (output to
# LOGFILE, pid to PIDFILE) and waits up to SECONDS until URL answers HTTP (any status: an
# unsigned request gets an error, which means up); then prints URL and exits 0. Exits 4, with
# the log's tail on stderr, when the server exits, logs a line matching the extended regexp
# $launch_fatal (when set: for servers that stay alive after a failed start), or does not answer
# in time (it is killed then), or when URL already answers before the start (another server
# would pass the check).
launch_serve() {
  local name="$1" url="$2" pidfile="$3" logfile="$4" seconds="$5"
  shift 5
  if curl -s -o /dev/null -m 2 -X POST "$url/" 2>/dev/null; then
    echo "$url already answers HTTP: not starting $name there" >&2
    exit 4
  fi
  nohup "$@" >"$logfile" 2>&1 </dev/null &
  local pid=$!
  echo "$pid" >"$pidfile"
  local i
  for ((i = 0; i < seconds * 10; i++)); do
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "$name exited during startup; log $logfile:" >&2
      tail -n 20 "$logfile" >&2 || true
      rm -f "$pidfile"
      exit 4
    fi
    if [[ -n "${launch_fatal:-}" ]] && grep -Eqs "$launch_fatal" "$logfile"; then
      echo "$name failed to start; log $logfile:" >&2
      tail -n 20 "$logfile" >&2 || true
      launch_stop "$pidfile" 5
      exit 4
    fi
    if curl -s -o /dev/null -m 2 -X POST "$url/" 2>/dev/null; then
      echo "$url"
      exit 0
    fi
    sleep 0.1
  done
  echo "$name did not answer on $url within $seconds s; log $logfile:" >&2
  tail -n 20 "$logfile" >&2 || true
  kill "$pid" 2>/dev/null || true
  rm -f "$pidfile"
  exit 4
}

# launch_stop PIDFILE SECONDS: sends SIGTERM to the pid in PIDFILE, waits up to SECONDS for it
# to end, then sends SIGKILL; removes PIDFILE. Nothing to do when PIDFILE is missing.
launch_stop() {
  local pidfile="$1" seconds="$2"
  [[ -f "$pidfile" ]] || return 0
  local pid i
  pid="$(cat "$pidfile")"
  if [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    for ((i = 0; i < seconds * 10; i++)); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$pidfile"
}
