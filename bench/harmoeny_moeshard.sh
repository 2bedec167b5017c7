#!/usr/bin/env bash
# HarMoEny §5.3 and MoEShard §4.2–4.3 in the sim (seeds 000 and 001):
#  1. HarMoEny time breakdown (topologies/sim-harmoeny-switch128-8xv100-rebalance.toml):
#     sync, rebalancing without prefetch, with prefetch; Algorithm 2 and the code variant;
#     synthetic skew (90% to 10 experts) and the real Switch-128 BookCorpus routing trace.
#  2. MoEShard (topologies/sim-moeshard-switch128-4xa100.toml): per-layer latency at batch
#     250 × 120 per GPU with the real routing trace (§4.2) and with α = 0.6 skew (§4.3), then
#     TTFT for batch 10–450 per GPU under the skew.
# Columns: moe_layer_ms = dispatch barrier to combine barrier; moe_idle_pct = mean idle of the
# expert devices at the combine barrier; ttft = the whole forward pass (prefill only).
# Usage: bench/harmoeny_moeshard.sh [MUFLOW_BINARY] [OUT_DIR]   (about a minute on 2 cores)
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
muflow="${1:-$here/build/release/tools/muflow}"
out="${2:-$here/out/rebalance}"
mkdir -p "$out"
harmoeny="$here/topologies/sim-harmoeny-switch128-8xv100-rebalance.toml"
moeshard="$here/topologies/sim-moeshard-switch128-4xa100.toml"

echo "== HarMoEny §5.3, 90% of tokens to 10 experts (paper: 289 → 149.5 → 136.6 ms per layer)"
"$muflow" bench "$harmoeny" --wirings sync,harmoeny --sweep harmoeny.rebalance=paper,code \
  --sweep harmoeny.prefetch=false,true --csv "$out/harmoeny_5_3_skew.csv"
echo "== HarMoEny §5.3 setup on the real Switch-128 BookCorpus routing trace"
"$muflow" bench "$harmoeny" --wirings sync,harmoeny --sweep router.kind=replay-npy \
  --sweep harmoeny.prefetch=false,true --csv "$out/harmoeny_5_3_trace.csv"

echo "== MoEShard §4.2 (real routing trace) and §4.3 skew at batch 250 (paper §4.2: 4.25×)"
"$muflow" bench "$moeshard" --wirings sync,moeshard \
  --sweep router.kind=replay-npy,moeshard-multinomial --csv "$out/moeshard_4_2.csv"
for b in 10 100 250 450; do
  echo "== MoEShard §4.3 batch $b per GPU, α = 0.6 (paper: slower at 10, ~6.2× at 450)"
  "$muflow" bench "$moeshard" --wirings sync,moeshard \
    --sweep workload.num_requests=$((4 * b)) --sweep scheduler.max_batch_requests="$b" \
    --sweep scheduler.max_prefill_tokens=$((120 * b)) --csv "$out/moeshard_4_3_batch$b.csv"
done
