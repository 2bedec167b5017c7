#!/usr/bin/env bash
# Sim vs measured (issue #19 item 3): for each wiring, calibrates the sim on this machine
# with bench/topologies/predict-synthetic-2cpu.toml in that wiring (`muflow calibrate`: the
# in-run host times describe the wiring's own stage runs, e.g. HarMoEny's several experts per
# run), runs the topology on the cpu backend (once recording its routing, then REPEATS timed
# runs without) and the same topology in the sim (backend "sim", device kind "cpu", the
# measured kernels, the recorded routing, in-process links), and prints predicted vs measured
# output throughput, TTFT and ITL (means) as a Markdown table. Each run's log is kept in $OUT
# as it finishes, and a wiring's row is written to $OUT/prediction.csv once its second
# calibration and sim runs are done.
#
# The machine's speed moves while a round runs: on the 2-core VMs a wiring's two calibrations
# two minutes apart saw its traced runs' inter-token latency differ by up to 24 %, and slow
# spells of tens of seconds come and go; near saturation TTFT magnifies either two to three
# times. So the timed runs go wiring after wiring in turns (a slow spell takes one run of
# several wirings, not most of one wiring's), and by default each wiring is calibrated twice,
# before all timed runs and after them: the prediction is the mean of the two calibrations'
# predictions (each the median over SEEDS). The table gives the TTFT each calibration alone
# predicts, so a move of the machine's speed shows as their gap.
#
# With BACKEND=cuda (issue #20 item 4) the same on a GPU: `muflow calibrate --backend cuda`,
# the topology on the cuda backend (default bench/topologies/predict-synthetic-1gpu.toml), and
# the sim with the GPU's kind (the CSV's `# kind=`, e.g. H200) twice: with the measured
# kernels and without them (the kind's datasheet roofline), so the table shows what the
# calibration buys.
#
# Usage: bench/sim_prediction.sh [WIRINGS...]   (default: sync async harmoeny moeshard exflow)
# Env: MUFLOW (the binary, default build/release/tools/muflow), OUT (default out/prediction),
#      BACKEND (cpu or cuda; default cpu), TOPOLOGY (default
#      bench/topologies/predict-synthetic-2cpu.toml, or -1gpu.toml with BACKEND=cuda), REPEATS
#      (real runs per wiring, median kept, and the lowest and highest throughput shown beside
#      it: under `policy = "fifo"` async's runs on the 2-core VM fall into two regimes, ~375
#      and ~440 tok/s; its default defragging scheduler keeps them within ~8 %; default 5),
#      SEEDS (the sim's `[cost] spread_seed`s: one sim run each, the median kept and the lowest
#      and highest throughput shown, since the calibrated run spread makes a prediction a
#      distribution as the real runs are; default "1 2 3 4 5"; "0" predicts with mean run times),
#      CALIBRATE_AFTER (1: calibrate again after the timed runs, as above; 0: before them only,
#      as the rounds of bench/README.md up to stop 52 did, whose timed runs were not
#      interleaved either; default 1).
set -euo pipefail
cd "$(dirname "$0")/.."
MUFLOW="${MUFLOW:-build/release/tools/muflow}"
OUT="${OUT:-out/prediction}"
BACKEND="${BACKEND:-cpu}"
case "$BACKEND" in
  cpu) TOPOLOGY="${TOPOLOGY:-bench/topologies/predict-synthetic-2cpu.toml}" ;;
  cuda) TOPOLOGY="${TOPOLOGY:-bench/topologies/predict-synthetic-1gpu.toml}" ;;
  *) echo "sim_prediction.sh: BACKEND must be cpu or cuda" >&2; exit 2 ;;
esac
REPEATS="${REPEATS:-5}"
if ! [[ "$REPEATS" =~ ^[1-9][0-9]*$ ]]; then
  echo "sim_prediction.sh: REPEATS must be a positive integer; got '$REPEATS'" >&2
  exit 2
fi
CALIBRATE_AFTER="${CALIBRATE_AFTER:-1}"
case "$CALIBRATE_AFTER" in
  0|1) ;;
  *) echo "sim_prediction.sh: CALIBRATE_AFTER must be 0 or 1; got '$CALIBRATE_AFTER'" >&2; exit 2 ;;
esac
read -r -a SEEDS <<< "${SEEDS:-1 2 3 4 5}"
for seed in "${SEEDS[@]}"; do
  [[ "$seed" =~ ^[0-9]+$ ]] || { echo "sim_prediction.sh: SEEDS must be non-negative integers; got '$seed'" >&2; exit 2; }
done
[ ${#SEEDS[@]} -gt 0 ] || { echo "sim_prediction.sh: SEEDS is empty" >&2; exit 2; }
WIRINGS=("$@")
[ ${#WIRINGS[@]} -gt 0 ] || WIRINGS=(sync async harmoeny moeshard exflow)
[ -x "$MUFLOW" ] || { echo "sim_prediction.sh: $MUFLOW not built" >&2; exit 1; }
mkdir -p "$OUT"

fail() {  # fail LOG: a run failed; say which, with the end of its log, and stop
  echo "sim_prediction.sh: a run failed; the end of $1:" >&2
  tail -5 "$1" >&2
  exit 1
}
metrics() {  # metrics LOG -> "tok/s ttft_ms itl_ms"
  awk '/output throughput/ {t=$3} /time to first token/ {f=$6} /inter-token latency/ {i=$4}
       END {print t, f, i}' "$1"
}
median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR + 1) / 2)]}'; }
# summarize "tok/s ttft itl"... -> "median_tok/s median_ttft median_itl lowest_tok/s highest_tok/s"
summarize() {
  local t
  t="$(printf '%s\n' "$@")"
  echo "$(awk '{print $1}' <<< "$t" | median) $(awk '{print $2}' <<< "$t" | median)" \
    "$(awk '{print $3}' <<< "$t" | median) $(awk '{print $1}' <<< "$t" | sort -g | head -1)" \
    "$(awk '{print $1}' <<< "$t" | sort -g | tail -1)"
}

# predict NAME KERNELS: the sim ($sim with [cost] kernels = KERNELS) once per seed; writes
# one "tok/s ttft itl" line per seed to $OUT/$w-sim-NAME.txt.
predict() {
  local seed
  : > "$OUT/$w-sim-$1.txt"
  for seed in "${SEEDS[@]}"; do
    sed -e "s|^kernels = .*|kernels = \"$2\"\nspread_seed = $seed|" "$sim" > "$OUT/$w-sim-$1-$seed.toml"
    "$MUFLOW" run "$OUT/$w-sim-$1-$seed.toml" --no-trace --quiet > "$OUT/$w-sim-$1-$seed.log" 2>&1 ||
      fail "$OUT/$w-sim-$1-$seed.log"
    metrics "$OUT/$w-sim-$1-$seed.log" >> "$OUT/$w-sim-$1.txt"
  done
}

echo "wiring,measured_tok_s,predicted_tok_s,measured_ttft_ms,predicted_ttft_ms,measured_itl_ms,predicted_itl_ms,roofline_tok_s,roofline_ttft_ms,roofline_itl_ms,measured_tok_s_min,measured_tok_s_max,predicted_tok_s_min,predicted_tok_s_max,predicted_ttft_ms_before,predicted_ttft_ms_after" > "$OUT/prediction.csv"
# Every wiring's first calibration and routing record, then the timed runs wiring after wiring
# in turns (a slow spell of the VM, tens of seconds, then takes one run of several wirings
# rather than most runs of one), then each wiring's second calibration and its predictions.
for w in "${WIRINGS[@]}"; do
  cpu="$OUT/$w-$BACKEND.toml"; routing="$(realpath -m "$OUT/$w-routing.csv")"
  sed -e "s/^wiring = .*/wiring = \"$w\"/" "$TOPOLOGY" > "$cpu"
  "$MUFLOW" calibrate "$cpu" --backend "$BACKEND" -o "$(realpath -m "$OUT/$w-$BACKEND-kernels.csv")" --repeats 9
  # The routing the sim replays, from a run of its own: recording costs the measured runs
  # host time (every token's choices per block, inside the attention runs: 4-6 % of TTFT on
  # the 2-core VM, bench/README.md stop 50) that the sim is not asked to predict. Decoding is
  # deterministic (greedy, or sampling keyed by seed, request and position) and the wiring
  # never changes a token, so the timed runs route every token the same way.
  "$MUFLOW" run "$cpu" --no-trace --quiet --record-routing "$routing" > "$OUT/$w-cpu-routing.log" 2>&1 ||
    fail "$OUT/$w-cpu-routing.log"
done
for r in $(seq "$REPEATS"); do
  for w in "${WIRINGS[@]}"; do
    "$MUFLOW" run "$OUT/$w-$BACKEND.toml" --no-trace --quiet > "$OUT/$w-cpu-$r.log" 2>&1 ||
      fail "$OUT/$w-cpu-$r.log"
  done
done
for w in "${WIRINGS[@]}"; do
  cpu="$OUT/$w-$BACKEND.toml"; sim="$OUT/$w-sim.toml"; routing="$(realpath -m "$OUT/$w-routing.csv")"
  KERNELS="$(realpath -m "$OUT/$w-$BACKEND-kernels.csv")"
  KERNELS_AFTER="$(realpath -m "$OUT/$w-$BACKEND-kernels-after.csv")"
  KIND="$(sed -n 's/^# kind=\([^ ]*\).*/\1/p' "$KERNELS" | head -1)"
  rows=()
  for r in $(seq "$REPEATS"); do rows+=("$(metrics "$OUT/$w-cpu-$r.log")"); done
  read -r m_tok m_ttft m_itl m_tok_min m_tok_max <<< "$(summarize "${rows[@]}")"
  if [ "$CALIBRATE_AFTER" = 1 ]; then
    "$MUFLOW" calibrate "$cpu" --backend "$BACKEND" -o "$KERNELS_AFTER" --repeats 9
  fi
  sed -e 's/^backend = "\(cpu\|cuda\)"/backend = "sim"/' -e '/^threads_per_device/d' \
      -e "s/^kind = \"\(cpu\|cuda\)\"/kind = \"$KIND\"/" "$cpu" > "$sim"
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
  predict before "$KERNELS"
  mapfile -t before < "$OUT/$w-sim-before.txt"
  after=()
  if [ "$CALIBRATE_AFTER" = 1 ]; then
    predict after "$KERNELS_AFTER"
    mapfile -t after < "$OUT/$w-sim-after.txt"
  fi
  # Each calibration's medians over the seeds; the prediction is their mean (the measurement
  # lies between the two calibrations in time), the lowest and highest over both.
  read -r p_tok p_ttft p_itl _ _ <<< "$(summarize "${before[@]}")"
  p_ttft_before="$p_ttft"; p_ttft_after=""
  if [ "$CALIBRATE_AFTER" = 1 ]; then
    read -r a_tok a_ttft a_itl _ _ <<< "$(summarize "${after[@]}")"
    p_ttft_after="$a_ttft"
    read -r p_tok p_ttft p_itl <<< "$(awk -v a="$p_tok $p_ttft $p_itl" -v b="$a_tok $a_ttft $a_itl" \
      'BEGIN {split(a, x, " "); split(b, y, " "); print (x[1] + y[1]) / 2, (x[2] + y[2]) / 2, (x[3] + y[3]) / 2}')"
  fi
  read -r _ _ _ p_tok_min p_tok_max <<< "$(summarize "${before[@]}" "${after[@]}")"
  # Without calibration: the kind's roofline (the same routing and links, no [cost] table).
  r_tok=""; r_ttft=""; r_itl=""
  if [ "$BACKEND" = cuda ]; then
    sed -e '/^\[cost\]/,$d' "$sim" > "$OUT/$w-roofline.toml"
    "$MUFLOW" run "$OUT/$w-roofline.toml" --no-trace --quiet > "$OUT/$w-roofline.log" 2>&1
    read -r r_tok r_ttft r_itl <<< "$(metrics "$OUT/$w-roofline.log")"
  fi
  echo "$w,$m_tok,$p_tok,$m_ttft,$p_ttft,$m_itl,$p_itl,$r_tok,$r_ttft,$r_itl,$m_tok_min,$m_tok_max,$p_tok_min,$p_tok_max,$p_ttft_before,$p_ttft_after" >> "$OUT/prediction.csv"
done

echo "| wiring | tok/s measured (lowest–highest) | predicted (lowest–highest) | ratio | TTFT ms measured | predicted (before / after) | ratio | ITL ms measured | predicted | ratio |"
echo "|---|---|---|---|---|---|---|---|---|---|"
tail -n +2 "$OUT/prediction.csv" | awk -F, '{
  split_ttft = $16 == "" ? "" : sprintf(" (%.0f / %.0f)", $15, $16)
  printf "| %s | %.1f (%.0f–%.0f) | %.1f (%.0f–%.0f) | %.2f | %.2f | %.2f%s | %.2f | %.2f | %.2f | %.2f |\n",
    $1, $2, $11, $12, $3, $13, $14, $3 / $2, $4, $5, split_ttft, $5 / $4, $6, $7, $7 / $6}'
if [ "$BACKEND" = cuda ]; then
  echo
  echo "Without calibration ($KIND roofline):"
  echo "| wiring | tok/s predicted | ratio | TTFT ms predicted | ratio | ITL ms predicted | ratio |"
  echo "|---|---|---|---|---|---|---|"
  tail -n +2 "$OUT/prediction.csv" | awk -F, '{printf "| %s | %.1f | %.2f | %.2f | %.2f | %.2f | %.2f |\n",
    $1, $8, $8 / $2, $9, $9 / $4, $10, $10 / $6}'
fi
