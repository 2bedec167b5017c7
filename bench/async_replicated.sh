#!/usr/bin/env bash
# async vs async-replicated (#14: AsyncMoE's barrier-free pipeline plus HarMoEny's replicas of
# hot experts) on the AsyncMoE §5.1 topology (Mixtral-8x7B dims, MQA, top-1, 4 attention + 4
# expert A100-80GB, Poisson 300 req/s, medium lengths) under three skewed routers: the paper's
# exponential fit, and HarMoEny's skew with 50% and 90% of the tokens to 2 hot experts
# (skew_mode "share": with 8 experts HarMoEny's "code" formula sends every token to the 2 hot
# ones for any skew >= 0.25).
# Usage: bench/async_replicated.sh [MUFLOW_BINARY] [OUT_DIR]   (about 3 minutes on 2 cores)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
muflow="${1:-$here/../build/release/tools/muflow}"
out="${2:-$here/out/async_replicated}"
topo="$here/../topologies/sim-asyncmoe-mixtral-mqa-8xa100-80gb.toml"
mkdir -p "$out"
routers=("router.kind=exponential"
         "router.kind=harmoeny-skew router.skew_mode=share router.skew=0.5 router.hot_experts=2"
         "router.kind=harmoeny-skew router.skew_mode=share router.skew=0.9 router.hot_experts=2")
for r in "${routers[@]}"; do
  sweeps=()
  for kv in $r; do sweeps+=(--sweep "$kv"); done
  name=$(echo "$r" | sed 's/[ =.]/_/g')
  echo "== $r"
  "$muflow" bench "$topo" --wirings async "${sweeps[@]}" --csv "$out/$name-async.csv"
  "$muflow" bench "$topo" --wirings async-replicated "${sweeps[@]}" \
    --sweep placement.replicas=1,2,4 --csv "$out/$name-replicated.csv"
done
