#!/usr/bin/env bash
# #18: decode throughput of the same topology in one process (4 devices) and in two loopback
# worker processes of 2 devices each, alternating runs, medians of N (default 3). Prints one
# line per run and the medians; the ratio is the multi-process cost (target >= 0.9x). Also
# the median of the per-run ratios: the two runs of a pair go back to back, so it is the
# figure this VM's drift moves least (its speed changes by 20-30 % within minutes).
#   [MUFLOW=PATH] bench/multiproc_decode.sh [N]   (from the repository root, after a release build)
set -euo pipefail
n="${1:-3}"
muflow="${MUFLOW:-build/release/tools/muflow}"  # MUFLOW=PATH: another build (before/after)
one=bench/topologies/decode-synthetic-4cpu.toml
two=bench/topologies/decode-synthetic-2x2workers.toml
tps() { grep -m1 'output throughput' | awk '{print $3}'; }
a=(); b=(); q=()
for i in $(seq "$n"); do
  x=$("$muflow" run "$one" --no-trace --quiet 2>/dev/null | tps)
  y=$("$muflow" run "$two" --spawn-workers --no-trace --quiet 2>/dev/null | tps)
  r=$(awk -v a="$x" -v b="$y" 'BEGIN {printf "%.3f", b/a}')
  echo "run $i: one process ${x} tok/s, 2 workers x 2 devices ${y} tok/s, ratio ${r}"
  a+=("$x"); b+=("$y"); q+=("$r")
done
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
ma=$(median "${a[@]}"); mb=$(median "${b[@]}")
echo "median: one process ${ma} tok/s, 2 workers ${mb} tok/s, ratio $(awk -v a="$ma" -v b="$mb" 'BEGIN {printf "%.2f", b/a}')"
echo "median of the per-run ratios: $(median "${q[@]}")"
