#!/usr/bin/env bash
# Behaviour-preserving refactors: runs sim topologies with two muflow builds and compares the
# Chrome traces and per-request outputs byte for byte (sha256). The sim is deterministic, so
# any difference is a change of behaviour. Copies each topology into OUT_DIR with its relative
# paths made absolute; moeshard runs MoEShard's topology under wiring = "moeshard".
# Usage: bench/trace_identity.sh OLD_MUFLOW NEW_MUFLOW [OUT_DIR]   (about a minute)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
topos="$(cd "$here/../topologies" && pwd)"
old="$1"; new="$2"; out="${3:-$here/out/trace_identity}"
mkdir -p "$out"
copy() {  # copy SRC NAME [WIRING]: relative "../" paths made absolute, wiring optionally set
  sed -e "s#\"\\.\\./#\"$topos/../#g" "$topos/$1" > "$out/$2.toml"
  if [ -n "${3:-}" ]; then sed -i "s/^wiring = \".*\"/wiring = \"$3\"/" "$out/$2.toml"; fi
}
copy sim-harmoeny-switch128-8xv100.toml sync-skew
copy sim-harmoeny-switch128-8xv100-rebalance.toml harmoeny
copy sim-asyncmoe-mixtral-mqa-8xa100-80gb.toml async
copy sim-aurora-switch8-8gpu-100g.toml aurora
copy sim-moeshard-switch128-4xa100.toml moeshard moeshard
copy sim-exflow-kjv-4xa100.toml exflow
status=0
for t in sync-skew harmoeny async aurora moeshard exflow; do
  for side in old new; do
    bin=$old; [ "$side" = new ] && bin=$new
    "$bin" run "$out/$t.toml" --trace "$out/$t.$side.trace.json" \
      --outputs "$out/$t.$side.outputs.jsonl" --quiet > /dev/null
  done
  for kind in trace.json outputs.jsonl; do
    a=$(sha256sum < "$out/$t.old.$kind" | cut -c1-16); b=$(sha256sum < "$out/$t.new.$kind" | cut -c1-16)
    if [ "$a" = "$b" ]; then echo "$t $kind identical $a"; else echo "$t $kind DIFFERS $a $b"; status=1; fi
  done
done
exit $status
