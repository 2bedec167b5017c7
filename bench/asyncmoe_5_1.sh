#!/usr/bin/env bash
# AsyncMoE §5.1 and §5.3 in the sim (seed 004; topology
# topologies/sim-asyncmoe-mixtral-mqa-8xa100-80gb.toml, merge = "wave"): sync EP over 8
# A100-80GB vs async 4 attention + 4 expert GPUs.
#   1. §5.1: the paper's three workloads at top-1/top-2 at a saturating Poisson rate (the
#      throughput column is then the achievable throughput of a 1-second burst).
#   2. Closed loop at a fixed concurrency C (C requests at t = 0, 100 prompt + 150 output
#      tokens each): async/sync against the cost model's bound (bench/README.md).
#   3. §5.3: the device scheduling policies at ~80% of async's saturated throughput; the
#      in_req/s and done_req/s columns are the second half of the arrivals (Fig. 12); then
#      the defrag lookahead K at top-1 and top-2.
#   4. §5.1 medium with §5.4's published attention step on both wirings.
# Usage: bench/asyncmoe_5_1.sh [MUFLOW_BINARY] [OUT_DIR]   (about 11 minutes on 2 cores)
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
muflow="${1:-$here/build/release/tools/muflow}"
out="${2:-$here/out/asyncmoe}"
topo="$here/topologies/sim-asyncmoe-mixtral-mqa-8xa100-80gb.toml"
requests="${REQUESTS:-1000}"
mkdir -p "$out"
declare -A input=([short]=30:70 [medium]=50:150 [reasonable]=100:300)
declare -A output=([short]=70:130 [medium]=50:250 [reasonable]=100:500)
for w in short medium reasonable; do
  echo "== §5.1 $w (saturating rate 1000 req/s, $requests requests)"
  "$muflow" bench "$topo" --wirings sync,async --sweep model.topk=1,2 \
    --sweep workload.input="${input[$w]}" --sweep workload.output="${output[$w]}" \
    --sweep workload.rate=1000 --sweep workload.num_requests="$requests" \
    --csv "$out/5_1_$w.csv"
done
echo "== §5.1 medium, async with per-request release (merge = request) for comparison"
"$muflow" bench "$topo" --wirings async --sweep model.topk=1,2 --sweep scheduler.merge=request \
  --sweep workload.rate=1000 --sweep workload.num_requests="$requests" \
  --csv "$out/5_1_medium_request.csv"
echo "== closed loop: C concurrent requests (100 prompt + 150 output tokens)"
"$muflow" bench "$topo" --wirings sync,async --sweep model.topk=1,2 \
  --sweep workload.num_requests="${CONCURRENCY:-256,1024,4096}" --sweep workload.rate=1e6 \
  --sweep workload.input=100:100 --sweep workload.output=150:150 --csv "$out/closed_loop.csv"
# §5.3: medium workload; RATE_TOP1 / RATE_TOP2 = ~80% of async's saturated request rate.
policy_requests="${POLICY_REQUESTS:-1500}"
echo "== §5.3 policies, medium workload, top-1 at ${RATE_TOP1:-110} req/s"
"$muflow" bench "$topo" --wirings async --sweep scheduler.policy=most-tokens,flfs,defrag \
  --sweep model.topk=1 --sweep workload.rate="${RATE_TOP1:-110}" \
  --sweep workload.num_requests="$policy_requests" --csv "$out/5_3_top1.csv"
echo "== §5.3 policies, medium workload, top-2 at ${RATE_TOP2:-80,100} req/s"
"$muflow" bench "$topo" --wirings async --sweep scheduler.policy=most-tokens,flfs,defrag \
  --sweep model.topk=2 --sweep workload.rate="${RATE_TOP2:-80,100}" \
  --sweep workload.num_requests="$policy_requests" --csv "$out/5_3_top2.csv"
# The defragging scheduler's lookahead K (DisagMoE main: 3, its later branches: 7; K = 0 is
# most-tokens-first), δ at its default 0.8.
echo "== §5.3 defrag lookahead K, medium workload, top-1 at ${RATE_TOP1:-110} req/s"
"$muflow" bench "$topo" --wirings async --sweep scheduler.policy=defrag \
  --sweep scheduler.defrag_lookahead=0,1,2,3,4,7 --sweep model.topk=1 \
  --sweep workload.rate="${RATE_TOP1:-110}" --sweep workload.num_requests="$policy_requests" \
  --csv "$out/5_3_defrag_k.csv"
echo "== §5.3 defrag lookahead K, medium workload, top-2 at ${RATE_TOP2_K:-100} req/s"
"$muflow" bench "$topo" --wirings async --sweep scheduler.policy=defrag \
  --sweep scheduler.defrag_lookahead=0,1,2,3,4,7 --sweep model.topk=2 \
  --sweep workload.rate="${RATE_TOP2_K:-100}" --sweep workload.num_requests="$policy_requests" \
  --csv "$out/5_3_defrag_k_top2.csv"
# §5.4's published attention step (2.7 ms, of which the cost model gives its kernels ≈ 0.1
# ms at this batch) on both wirings: the "after" column of bench/README.md's AsyncMoE
# headline row ("Seed headlines with published overheads").
echo "== §5.1 medium, top-1, with and without §5.4's attention step (cost.attention_overhead_us)"
"$muflow" bench "$topo" --wirings sync,async --sweep model.topk=1 \
  --sweep workload.input=50:150 --sweep workload.output=50:250 --sweep workload.rate=1000 \
  --sweep workload.num_requests="$requests" --sweep cost.attention_overhead_us=0,2600 \
  --csv "$out/5_4_attention_step.csv"
