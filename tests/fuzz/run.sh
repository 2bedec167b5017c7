#!/usr/bin/env bash
# Runs every fuzz_<parser> of a MUFLOW_FUZZ build for SECONDS each on a scratch copy of its
# seed corpus (corpus/<parser>/; the checked-in seeds are never modified), one per core at once.
# Prints per target the executions, seconds and corpus size; exits 1 when any target found a
# crash, a leak, a timeout or an out-of-memory input (the input is kept as
# $WORK/<parser>/crash-*, ... and the log next to it), 2 on a usage error.
#
#   tests/fuzz/run.sh SECONDS [PARSER...]
#   env: MUFLOW_FUZZ_BUILD (default build/asan: the asan and fuzz presets share it), MUFLOW_FUZZ_WORK (default $MUFLOW_FUZZ_BUILD/fuzz-work),
#        MUFLOW_FUZZ_ARGS (extra libFuzzer flags, e.g. "-jobs=2 -workers=2"),
#        MUFLOW_FUZZ_PARALLEL (targets run at once; default the core count, so a run of all
#        targets takes SECONDS x targets / cores)
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
if [[ $# -lt 1 || ! "$1" =~ ^[0-9]+$ || "$1" -lt 1 ]]; then
  echo "usage: $0 SECONDS [PARSER...]   (runs each fuzz_<parser> for SECONDS)" >&2
  exit 2
fi
seconds="$1"
shift
build="${MUFLOW_FUZZ_BUILD:-$root/build/asan}"
work="${MUFLOW_FUZZ_WORK:-$build/fuzz-work}"
parsers=()
for p in "$@"; do  # each once: two runs of one target would share its work folder
  [[ " ${parsers[*]} " == *" $p "* ]] || parsers+=("$p")
done
if [[ ${#parsers[@]} -eq 0 ]]; then
  for d in "$here"/corpus/*/; do parsers+=("$(basename "$d")"); done
fi

# ASan: report leaks; UBSan: stop at the first report with a stack (the build also has
# -fno-sanitize-recover=undefined).
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

# One target: writes its result line to $work/<parser>/result.txt ("ok" or "FAILED ...").
fuzz_one() {
  local p="$1" exe="$build/tests/fuzz/fuzz_$1" dir="$work/$1"
  rm -rf "$dir"
  mkdir -p "$dir/corpus"
  if [[ ! -x "$exe" ]]; then
    printf '%-24s %12s %8s %8s  %s\n' "fuzz_$p" - - - \
      "FAILED (not built: cmake --preset fuzz && cmake --build --preset fuzz)" > "$dir/result.txt"
    return
  fi
  cp "$here/corpus/$p/"* "$dir/corpus/"
  local dict=()
  [[ -f "$here/$p.dict" ]] && dict=(-dict="$here/$p.dict")
  local start end rc execs size result
  start=$(date +%s.%N)
  # -rss_limit_mb/-malloc_limit_mb: an input that makes a parser allocate more than 2 GiB is a
  # finding (sizes must be checked against the input before allocating).
  (cd "$dir" && "$exe" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -malloc_limit_mb=2048 -max_len=65536 -print_final_stats=1 -artifact_prefix="$dir/" \
      "${dict[@]}" ${MUFLOW_FUZZ_ARGS:-} corpus > "$dir/log.txt" 2>&1)
  rc=$?
  end=$(date +%s.%N)
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$dir/log.txt" | tail -1 | grep -o '[0-9]*$')
  size=$(ls "$dir/corpus" | wc -l)
  result=ok
  if [[ $rc -ne 0 ]] || ls "$dir"/crash-* "$dir"/leak-* "$dir"/timeout-* "$dir"/oom-* >/dev/null 2>&1; then
    result="FAILED (rc $rc; see $dir/log.txt)"
  fi
  printf '%-24s %12s %8.1f %8s  %s\n' "fuzz_$p" "${execs:-?}" \
    "$(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }')" "$size" "$result" > "$dir/result.txt"
}

# Targets run side by side, MUFLOW_FUZZ_PARALLEL at a time (default: one per core); each is one
# single-threaded process, so each gets about the executions it would get alone.
parallel="${MUFLOW_FUZZ_PARALLEL:-$(nproc)}"
[[ "$parallel" =~ ^[1-9][0-9]*$ ]] || { echo "$0: MUFLOW_FUZZ_PARALLEL must be a positive integer" >&2; exit 2; }
running=0
for p in "${parsers[@]}"; do
  if [[ $running -ge $parallel ]]; then
    wait -n
    running=$((running - 1))
  fi
  fuzz_one "$p" &
  running=$((running + 1))
done
wait

failed=()
printf '%-24s %12s %8s %8s  %s\n' target executions seconds corpus result
for p in "${parsers[@]}"; do
  cat "$work/$p/result.txt"
  grep -q '  ok$' "$work/$p/result.txt" || failed+=("$p")
done
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "fuzzing found problems in: ${failed[*]}" >&2
  for p in "${failed[@]}"; do
    [[ -f "$work/$p/log.txt" ]] && grep -m5 -E 'ERROR|SUMMARY|runtime error|Assertion|==[0-9]+==' "$work/$p/log.txt" >&2
  done
  exit 1
fi
