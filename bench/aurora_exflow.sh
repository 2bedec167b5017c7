#!/usr/bin/env bash
# Aurora §4 and ExFlow §IV (seeds 002 and 003):
#  1. Aurora: all-to-all time of each transmission order next to its lower bound b_max, on
#     the real per-rank Switch-8 BookCorpus traffic (muflow plan: each of the 6 blocks of one
#     iteration, 8 GPUs behind a 100 Gb/s big switch) and end to end in the sim (muflow bench:
#     the time spent in all-to-alls of one 8 × 5,100-token prefill).
#  2. ExFlow: paths of kjv-mixtral-tiny recorded on KJV text (Genesis = planning set, Exodus =
#     held out), planned on 1 node × 4 devices (2 experts per device and block) and 2 × 2;
#     cross-device hops of round robin vs the heuristic vs the GLPK MILP; then the same
#     model in the sim (4 × A100-80GB in 2 nodes, the recorded paths replayed) under sync and
#     exflow, round-robin and affinity placement: throughput, time in all-to-alls and rows
#     off-device (exflow also sends every new K/V row to the other devices). Inter-node links
#     are ib-100g: ExFlow §V-A's dual-rail HDR200 per 4-GPU node = 100 Gb/s per GPU (#19
#     item 4). Neither ExFlow nor Aurora publishes host or step overheads, so none are set;
#     Aurora §8.1 assumes none (100 Gb/s big switch, no link latency, no host cost).
#  3. Aurora §6: two Switch-8 models (60% of each one's tokens to its experts 0 and 1) served
#     together on 8 A100s: expert i with expert i vs the bottleneck-matched pairing from
#     `muflow plan --colocate`.
# Needs the `bible` command (Debian's bible-kjv, installed by tools/install-deps.sh).
# Usage: bench/aurora_exflow.sh [MUFLOW_BINARY] [OUT_DIR]   (about a minute on 2 cores)
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
muflow="${1:-$here/build/release/tools/muflow}"
out="${2:-$here/out/aurora_exflow}"
mkdir -p "$out"
aurora="$here/topologies/sim-aurora-switch8-8gpu-100g.toml"
traffic="$here/../shared/data/routing/switch-base-per-rank-bookcorpus.csv"

echo "== Aurora §4: dispatch all-to-all per block, real per-rank traffic (ms; paper: up to 1.38x over SJF)"
for it in 0 1; do
  "$muflow" plan "$aurora" --traffic "$traffic" --iteration "$it" | tee "$out/aurora_plan_it$it.txt"
done
echo "== Aurora §4 end to end in the sim (a2a_s = time in all-to-alls, a2a_bound_s = sum of b_max)"
"$muflow" bench "$aurora" \
  --sweep network.a2a_order=row_major,random,sjf,aurora_unsplit,aurora_chunked,aurora \
  --csv "$out/aurora_bench.csv"

echo "== ExFlow §IV: affinity placement on paths recorded from kjv-mixtral-tiny"
command -v bible >/dev/null || { echo "no 'bible' command: run tools/install-deps.sh" >&2; exit 1; }
model="$(cd "$here/../shared/data/models/kjv-mixtral-tiny" && pwd)"
# Verse text without its reference, verses longer than 20 characters, the first 400.
verses() { bible -f "$1" | sed 's/^[^ ]* //' | awk 'length($0) > 20 && n < 400 { print; n++ }'; }
verses gen1:1-gen50:26 > "$out/genesis.txt"
verses ex1:1-ex40:38 > "$out/exodus.txt"
for part in genesis exodus; do
  for nodes in 1 2; do
    cat > "$out/$part-$nodes.toml" <<TOML
wiring = "sync"
backend = "cpu"
[[cluster.devices]]
name = "cpu0"
node = "node0"
[[cluster.devices]]
name = "cpu1"
node = "node0"
[[cluster.devices]]
name = "cpu2"
node = "node$((nodes - 1))"
[[cluster.devices]]
name = "cpu3"
node = "node$((nodes - 1))"
[model]
path = "$model"
[scheduler]
max_batch_requests = 64
max_prefill_tokens = 4096
[workload]
kind = "prompts"
file = "$part.txt"
max_new_tokens = 16
[sampling]
temperature = 0.0
stop_at_eos = false
TOML
  done
  "$muflow" run "$out/$part-1.toml" --no-trace --quiet --record-routing "$out/$part-routing.csv" > /dev/null
done
for nodes in 1 2; do
  echo "-- $nodes node(s) x $((4 / nodes)) devices"
  "$muflow" plan "$out/genesis-$nodes.toml" --routing "$out/genesis-routing.csv" \
    --evaluate "$out/exodus-routing.csv" --time-limit 30 | tee "$out/exflow_plan_${nodes}node.txt"
done

echo "== ExFlow in the sim: kjv-mixtral-tiny dims, Genesis paths replayed, 4 x A100-80GB in 2 nodes"
for wiring in sync exflow; do
  for placement in round-robin affinity; do
    {
      cat <<TOML
wiring = "$wiring"
backend = "sim"
[[cluster.devices]]
kind = "A100-80GB"
node = "node0"
[[cluster.devices]]
kind = "A100-80GB"
node = "node0"
[[cluster.devices]]
kind = "A100-80GB"
node = "node1"
[[cluster.devices]]
kind = "A100-80GB"
node = "node1"
[model]
path = "$model"
[placement]
experts = "$placement"
TOML
      [ "$placement" = affinity ] && echo "paths = \"genesis-routing.csv\""
      cat <<TOML
[router]
kind = "recorded"
file = "genesis-routing.csv"
[network]
a2a_order = "aurora"
activation_bytes = 4
inter_node = "ib-100g"
[scheduler]
max_batch_requests = 64
max_prefill_tokens = 4096
[workload]
kind = "prompts"
file = "genesis.txt"
max_new_tokens = 16
[sampling]
stop_at_eos = false
TOML
    } > "$out/sim-$wiring-$placement.toml"
    echo "-- $wiring, $placement"
    "$muflow" run "$out/sim-$wiring-$placement.toml" --no-trace --quiet |
      grep -E "output throughput|inter-token|time in all-to-all|rows off-device"
  done
done

echo "== Aurora §6: two skewed Switch-8 models colocated on 8 x A100-80GB"
for seed in 1 2; do
  cat > "$out/colocate-$seed.toml" <<TOML
wiring = "sync"
backend = "sim"
[cluster]
num_devices = 8
kind = "A100-80GB"
[model]
preset = "switch-base-8"
dtype = "bf16"
[router]
kind = "harmoeny-skew"
skew = 0.6
skew_mode = "share"
hot_experts = 2
seed = $seed
[workload]
kind = "poisson"
num_requests = 64
rate = 1000000.0
input = [512, 512]
output = [8, 8]
seed = 1
[scheduler]
max_prefill_tokens = 8192
[sampling]
stop_at_eos = false
TOML
done
a="$out/colocate-1.toml"
b="$out/colocate-2.toml"
"$muflow" plan "$a" --colocate "$b" | tee "$out/colocate_plan.txt" | sed -n '/colocating/,$p'
matched="$(sed -n 's/.*experts = \[\(.*\)\]$/\1/p' "$out/colocate_plan.txt")"
sed "s/^\[router\]/[placement]\nexperts = [$matched]\n[router]/" "$b" > "$out/colocate-2-matched.toml"
for x in "$a" "$b"; do
  echo "-- alone: $(basename "$x")"
  "$muflow" run "$x" --no-trace --quiet | grep -E "duration|output throughput|time to first"
done
echo "-- together, expert i with expert i"
"$muflow" run "$a" --colocate "$b" --no-trace --quiet | grep -E "==|duration|output throughput|time to first"
echo "-- together, bottleneck-matched"
"$muflow" run "$a" --colocate "$out/colocate-2-matched.toml" --no-trace --quiet |
  grep -E "==|duration|output throughput|time to first"
