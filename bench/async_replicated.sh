#!/usr/bin/env bash
# async vs async-replicated (#14: AsyncMoE's barrier-free pipeline plus HarMoEny's replicas of
# hot experts) on the AsyncMoE §5.1 topology (Mixtral-8x7B dims, MQA, top-1, 4 attention + 4
# expert A100-80GB, Poisson 300 req/s, medium lengths) under three skewed routers: the paper's
# exponential fit, and HarMoEny's skew 0.5 and 0.9 towards 2 hot experts.
# Usage: bench/async_replicated.sh [MUFLOW_BINARY] [OUT_DIR]   (about 3 minutes on 2 cores)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
muflow="${1:-$here/../build/release/tools/muflow}"
out="${2:-$here/out/async_replicated}"
topo="$here/../topologies/sim-asyncmoe-mixtral-mqa-8xa100-80gb.toml"
mkdir -p "$out"
routers=("router.kind=exponential" "router.kind=harmoeny-skew router.skew=0.5 router.hot_experts=2"
         "router.kind=harmoeny-skew router.skew=0.9 router.hot_experts=2")
for r in "${routers[@]}"; do
  sweeps=()
  for kv in $r; do sweeps+=(--sweep "$kv"); done
  name=$(echo "$r" | sed 's/[ =.]/_/g')
  echo "== $r"
  "$muflow" bench "$topo" --wirings async "${sweeps[@]}" --csv "$out/$name-async.csv"
  "$muflow" bench "$topo" --wirings async-replicated "${sweeps[@]}" \
    --sweep placement.replicas=1,2,4 --csv "$out/$name-replicated.csv"
done
