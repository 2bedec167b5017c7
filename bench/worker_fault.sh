#!/usr/bin/env bash
# #18 item 5: the cost of a dead worker. Starts two loopback `muflow worker` processes, runs
# bench/topologies/decode-synthetic-2x2workers.toml on them once fault-free, then again with
# `kill -9` of worker 1 KILL_AFTER seconds (default 1.0) after it set up that run, and prints:
#   - kill -9 to detection (the driver's "was lost" log line's timestamp minus the kill's),
#   - detection to the first token after recovery (muflow run's "recovered:" line),
#   - their sum: kill -9 to the first token after recovery (target < 2 s),
#   - both runs' output throughput, and whether every request's tokens are identical.
#   bench/worker_fault.sh [KILL_AFTER]   (from the repository root, after a release build)
set -euo pipefail
kill_after="${1:-1.0}"
muflow="$PWD/build/release/tools/muflow"
base=bench/topologies/decode-synthetic-2x2workers.toml
work="$(mktemp -d)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [[ -n "${KEEP_WORK:-}" ]] && echo "kept $work" || rm -rf "$work"
}
trap cleanup EXIT
export MUFLOW_CLUSTER_TOKEN="$(openssl rand -hex 32)"

# Two workers on free ports; each prints "listening on HOST:PORT (pid N)" on stdout.
addresses=()
for i in 1 2; do
  "$muflow" worker --listen 127.0.0.1:0 > "$work/w$i.out" 2> "$work/w$i.err" &
  pids+=($!)
  for _ in $(seq 100); do
    grep -q 'listening on' "$work/w$i.out" 2>/dev/null && break
    sleep 0.1
  done
  addresses+=("$(grep -o 'listening on [0-9.]*:[0-9]*' "$work/w$i.out" | awk '{print $3}')")
done
awk -v a="${addresses[0]}" -v b="${addresses[1]}" '
  /^address = "127.0.0.1:0"/ { n++; print "address = \"" (n == 1 ? a : b) "\""; next } { print }' \
  "$base" > "$work/topology.toml"

run() {  # run NAME: the topology on the workers; outputs, stdout and stderr in $work
  "$muflow" run "$work/topology.toml" --no-trace --quiet --outputs "$work/$1.jsonl" \
    > "$work/$1.out" 2> "$work/$1.err"
}
tps() { grep -m1 'output throughput' "$work/$1.out" | awk '{print $3}'; }

run healthy
hosted_before=$(grep -c 'hosts devices' "$work/w1.err" || true)
run faulted &
driver=$!
# KILL_AFTER counts from the moment worker 1 has set up the faulted run (its log line).
for _ in $(seq 600); do
  [[ $(grep -c 'hosts devices' "$work/w1.err" || true) -gt $hosted_before ]] && break
  sleep 0.05
done
sleep "$kill_after"
kill -9 "${pids[0]}"
killed=$(date +%s.%N)
wait "$driver" || true  # a failed run is reported below (no "recovered:" line)

recovered=$(grep -m1 '^recovered:' "$work/faulted.out" || true)
if [[ -z "$recovered" ]]; then
  echo "$0: no recovery in the faulted run (it finished before the kill, or failed: see below);" \
    "lower KILL_AFTER or raise the workload" >&2
  tail -3 "$work/faulted.err" >&2
  exit 1
fi
detected=$(grep -h 'was lost' "$work/faulted.out" "$work/faulted.err" | head -1 |
  sed -E 's/^\[([0-9-]+ [0-9:.]+)\].*/\1/' || true)
if [[ -z "$detected" ]]; then
  echo "$0: the driver's \"was lost\" log line is missing from the faulted run's output" >&2
  exit 1
fi
detected_s=$(date -d "$detected" +%s.%N)
after_ms=$(echo "$recovered" | grep -o '([0-9.]* ms after detection)' | grep -o '[0-9.]*')
same=$(python3 - "$work/healthy.jsonl" "$work/faulted.jsonl" <<'EOF'
import json, sys
def load(p):
    return {r["request_id"]: r["output_ids"] for r in map(json.loads, open(p))}
a, b = load(sys.argv[1]), load(sys.argv[2])
print("identical" if a == b and len(a) > 0 else f"DIFFERENT ({len(a)} vs {len(b)} requests)")
EOF
)
awk -v k="$killed" -v d="$detected_s" -v f="$after_ms" -v h="$(tps healthy)" \
    -v x="$(tps faulted)" -v s="$same" 'BEGIN {
  det = 1000 * (d - k)
  printf "kill -9 -> detection: %.0f ms\n", det
  printf "detection -> first token after recovery: %.0f ms\n", f
  printf "kill -9 -> first token after recovery: %.0f ms\n", det + f
  printf "output throughput: fault-free %s tok/s, with the kill %s tok/s; outputs %s\n", h, x, s
}'
echo "$recovered"
