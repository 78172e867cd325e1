#!/usr/bin/env bash
# usage: tools/leasescale/run.sh [SHARDS...]      (default: 100 300 1000)
#
# Item 7 of issue 8, "a worker must never lose leases to its own bookkeeping", measured: for each
# shard count, one worker projects flights-20k (20,000 events, partition key origin) from a fresh
# local journal of that many shards with the flightdelays AssemblyScript handler on the embedded
# store, `projhost run --until-caught-up --trace`, and this prints one line per count:
#
#   shards=1000 seconds=3.4 lost=0 acquired=1000 events=20000
#
# seconds is the wall time of the run (lease takes, shard opens, projection, final commits and
# releases); lost counts the trace's lease lost events (projection.LeaseLost), acquired its
# lease acquired ones. Exits 1 when any run lost a lease or did not project every event.
#
# BIN (default bin/projhost, built with `make build` when missing), HANDLER (default
# build/wasm/flightdelays-as.wasm, built with `make wasm` when missing) and EVENTS (default
# plugins/examples/flightdelays/data/flights-20k.json) override the inputs; the journal and
# stores go to a temporary directory, removed at the end (KEEP=1 keeps it and prints it).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
bin="${BIN:-bin/projhost}"
handler="${HANDLER:-build/wasm/flightdelays-as.wasm}"
events="${EVENTS:-plugins/examples/flightdelays/data/flights-20k.json}"
[[ -x "$bin" ]] || make -s build >&2
[[ -f "$handler" ]] || make -s wasm >&2
tmp="$(mktemp -d)"
if [[ -z "${KEEP:-}" ]]; then trap 'rm -rf "$tmp"' EXIT; else echo "keeping $tmp" >&2; fi
status=0
for n in "${@:-100 300 1000}"; do
  for shards in $n; do
    d="$tmp/s$shards"
    "$bin" journal create --data "$d" --shards "$shards" >/dev/null
    want=$("$bin" journal append --data "$d" --key-field origin "$events" 2>&1 | grep -o 'appended [0-9]*' | grep -o '[0-9]*')
    start=$(date +%s%N)
    "$bin" run --data "$d" --name leasescale --handler "$handler" --until-caught-up \
      --trace "$d/trace.jsonl" 2>"$d/run.log" || { echo "shards=$shards: run failed, see $d/run.log" >&2; status=1; }
    end=$(date +%s%N)
    lost=$(grep -c '"kind":"lost"' "$d/trace.jsonl" || true)
    acquired=$(grep -c '"kind":"acquired"' "$d/trace.jsonl" || true)
    handled=$(grep '"event":"batch"' "$d/trace.jsonl" | grep -o '"events":[0-9]*' | awk -F: '{s+=$2} END {print s+0}')
    printf 'shards=%s seconds=%s lost=%s acquired=%s events=%s\n' "$shards" \
      "$(awk -v ns=$((end - start)) 'BEGIN {printf "%.1f", ns / 1e9}')" "$lost" "$acquired" "$handled"
    if [[ "$lost" != 0 || "$handled" -lt "$want" ]]; then status=1; fi
  done
done
exit $status
