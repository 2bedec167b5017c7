#!/usr/bin/env bash
# Sim vs measured (issue #19 item 3): calibrates the sim on this machine (`muflow calibrate`),
# then for each wiring runs bench/topologies/predict-synthetic-2cpu.toml on the cpu backend
# (recording its routing) and the same topology in the sim (backend "sim", device kind "cpu",
# the measured kernels, the recorded routing, in-process links), and prints predicted vs
# measured output throughput, TTFT and ITL (means) as a Markdown table. Rows are written to
# $OUT/prediction.csv as each wiring finishes.
#
# Usage: bench/sim_prediction.sh [WIRINGS...]   (default: sync async harmoeny moeshard exflow)
# Env: MUFLOW (the binary, default build/release/tools/muflow), OUT (default out/prediction),
#      TOPOLOGY (default bench/topologies/predict-synthetic-2cpu.toml), REPEATS (cpu runs per
#      wiring, median kept; default 3).
set -euo pipefail
cd "$(dirname "$0")/.."
MUFLOW="${MUFLOW:-build/release/tools/muflow}"
OUT="${OUT:-out/prediction}"
TOPOLOGY="${TOPOLOGY:-bench/topologies/predict-synthetic-2cpu.toml}"
REPEATS="${REPEATS:-3}"
WIRINGS=("$@")
[ ${#WIRINGS[@]} -gt 0 ] || WIRINGS=(sync async harmoeny moeshard exflow)
[ -x "$MUFLOW" ] || { echo "sim_prediction.sh: $MUFLOW not built" >&2; exit 1; }
mkdir -p "$OUT"
KERNELS="$(realpath -m "$OUT/cpu-kernels.csv")"
"$MUFLOW" calibrate "$TOPOLOGY" -o "$KERNELS" --repeats 9

metrics() {  # metrics LOG -> "tok/s ttft_ms itl_ms"
  awk '/output throughput/ {t=$3} /time to first token/ {f=$6} /inter-token latency/ {i=$4}
       END {print t, f, i}' "$1"
}
median3() { sort -g | awk '{v[NR]=$1} END {print v[int((NR + 1) / 2)]}'; }

echo "wiring,measured_tok_s,predicted_tok_s,measured_ttft_ms,predicted_ttft_ms,measured_itl_ms,predicted_itl_ms" > "$OUT/prediction.csv"
for w in "${WIRINGS[@]}"; do
  cpu="$OUT/$w-cpu.toml"; sim="$OUT/$w-sim.toml"; routing="$(realpath -m "$OUT/$w-routing.csv")"
  sed -e "s/^wiring = .*/wiring = \"$w\"/" "$TOPOLOGY" > "$cpu"
  rows=()
  for r in $(seq "$REPEATS"); do
    "$MUFLOW" run "$cpu" --no-trace --quiet --record-routing "$routing" > "$OUT/$w-cpu-$r.log" 2>&1
    rows+=("$(metrics "$OUT/$w-cpu-$r.log")")
  done
  m_tok=$(printf '%s\n' "${rows[@]}" | awk '{print $1}' | median3)
  m_ttft=$(printf '%s\n' "${rows[@]}" | awk '{print $2}' | median3)
  m_itl=$(printf '%s\n' "${rows[@]}" | awk '{print $3}' | median3)
  sed -e 's/^backend = "cpu"/backend = "sim"/' -e '/^threads_per_device/d' "$cpu" > "$sim"
  cat >> "$sim" << TOML

[router]
kind = "recorded"
file = "$routing"

[network]
intra_node = "in-process"
inter_node = "in-process"
activation_bytes = 4

[cost]
kernels = "$KERNELS"
TOML
  "$MUFLOW" run "$sim" --no-trace --quiet > "$OUT/$w-sim.log" 2>&1
  read -r p_tok p_ttft p_itl <<< "$(metrics "$OUT/$w-sim.log")"
  echo "$w,$m_tok,$p_tok,$m_ttft,$p_ttft,$m_itl,$p_itl" >> "$OUT/prediction.csv"
done

echo "| wiring | tok/s measured | predicted | ratio | TTFT ms measured | predicted | ratio | ITL ms measured | predicted | ratio |"
echo "|---|---|---|---|---|---|---|---|---|---|"
tail -n +2 "$OUT/prediction.csv" | awk -F, '{printf "| %s | %.1f | %.1f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n",
  $1, $2, $3, $3 / $2, $4, $5, $5 / $4, $6, $7, $7 / $6}'
