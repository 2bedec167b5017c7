#!/usr/bin/env bash
# muflow vs llama.cpp on the same weights, CPU: prefill 512 and decode at 1/8/32 sequences, f32
# and bf16, 1 and 2 threads. See bench/llamacpp_side_by_side.md for what each number means.
#
# Usage: LLAMA_CPP_DIR=/path/to/llama.cpp bench/llamacpp_side_by_side.sh
# Environment (all optional but LLAMA_CPP_DIR):
#   LLAMA_CPP_DIR    llama.cpp source tree (convert_hf_to_gguf.py, include/llama.h)
#   LLAMA_CPP_BUILD  its CMake build dir (default $LLAMA_CPP_DIR/build): bin/llama-bench, libllama
#   MUFLOW           muflow binary (default build/release/tools/muflow)
#   WORK             models, GGUF files, topologies, logs, CSV (default /tmp/muflow-llamacpp-sbs)
#   REPEATS          rounds per row, muflow and llama.cpp alternately; medians reported (3)
#   ROWS             subset of "prefill512 decode1 decode8 decode32"
#   DTYPES           subset of "f32 bf16";  THREADS: subset of "1 2"
#   LLAMA_KV         llama.cpp KV cache type: f32 (default, as muflow) or f16 (llama.cpp's default)
#   STOCK            1 (default): also time llama.cpp's own tools (llama-bench, llama-batched-bench)
#   MUFLOW_THREADS   auto (default) | key ([cluster] threads_per_device = T) | devices (num_devices = T)
#   MUFLOW_GEMM      muflow's [model] gemm: auto (default) | fixed-order | onednn-tiles (with
#                    MUFLOW_THREADS=devices: the engine before #16's kernel, for "before" rows)
#   LLAMA_CPP_COMMIT the llama.cpp commit to print, where LLAMA_CPP_DIR is not a git checkout
#   PYTHON           python for the converter (default: the first of python3, /usr/bin/python3
#                    that imports numpy and torch)
# The GGUF files are reused when they exist (delete $WORK/gguf to convert again).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/.." && pwd)"
die() { echo "llamacpp_side_by_side: $*" >&2; exit 1; }
log() { echo "[$(date +%H:%M:%S)] $*" >&2; }

LLAMA_CPP_DIR="${LLAMA_CPP_DIR:-}"
[ -n "$LLAMA_CPP_DIR" ] || die "set LLAMA_CPP_DIR to a llama.cpp source tree (see bench/llamacpp_side_by_side.md)"
[ -f "$LLAMA_CPP_DIR/convert_hf_to_gguf.py" ] || die "no convert_hf_to_gguf.py in LLAMA_CPP_DIR=$LLAMA_CPP_DIR"
[ -f "$LLAMA_CPP_DIR/include/llama.h" ] || die "no include/llama.h in LLAMA_CPP_DIR=$LLAMA_CPP_DIR"
LLAMA_CPP_BUILD="${LLAMA_CPP_BUILD:-$LLAMA_CPP_DIR/build}"
MUFLOW="${MUFLOW:-$repo/build/release/tools/muflow}"
WORK="${WORK:-/tmp/muflow-llamacpp-sbs}"
REPEATS="${REPEATS:-3}"
ROWS="${ROWS:-prefill512 decode1 decode8 decode32}"
DTYPES="${DTYPES:-f32 bf16}"
THREADS="${THREADS:-1 2}"
LLAMA_KV="${LLAMA_KV:-f32}"
STOCK="${STOCK:-1}"
MUFLOW_THREADS="${MUFLOW_THREADS:-auto}"
PROMPT=32 GEN=64 PREFILL=512   # decode rows: 32 prompt tokens, 64 generated; prefill row: 512

[ -x "$MUFLOW" ] || die "muflow binary not found at $MUFLOW (build it, or set MUFLOW)"
BIN="$LLAMA_CPP_BUILD/bin"
for t in llama-bench llama-batched-bench; do
  [ -x "$BIN/$t" ] || die "$BIN/$t missing: build llama.cpp first (cmake --build $LLAMA_CPP_BUILD --target llama-bench llama-batched-bench)"
done
LIBDIR="$(dirname "$(find "$LLAMA_CPP_BUILD" -name 'libllama.so*' -print -quit)")"
[ -n "$LIBDIR" ] && [ "$LIBDIR" != . ] || die "no libllama.so under $LLAMA_CPP_BUILD (build with BUILD_SHARED_LIBS=ON, the default)"
CXX="${CXX:-c++}"; command -v "$CXX" > /dev/null || die "no C++ compiler ($CXX)"
case "$LLAMA_KV" in f32|f16) ;; *) die "LLAMA_KV must be f32 or f16";; esac

mkdir -p "$WORK"/{models,gguf,topo,logs,bin,py}
CSV="$WORK/results.csv"
llama_commit="${LLAMA_CPP_COMMIT:-$([ -e "$LLAMA_CPP_DIR/.git" ] && git -C "$LLAMA_CPP_DIR" rev-parse --short=12 HEAD 2> /dev/null || echo "unknown (set LLAMA_CPP_COMMIT)")}"
muflow_commit="$(git -C "$repo" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"
[ -f "$CSV" ] || echo "time,row,dtype,threads,round,engine,tok_per_s,detail" > "$CSV"
log "llama.cpp $llama_commit ($LLAMA_CPP_DIR), muflow $muflow_commit, work dir $WORK, CSV $CSV"

# --- 1. the weights: a synthetic Mixtral-style model written by muflow (same dims as
# bench/topologies/decode-synthetic-1cpu.toml) --------------------------------------------------
for dt in $DTYPES; do
  m="$WORK/models/synth-$dt"
  if [ ! -f "$m/config.json" ]; then
    log "make-model $dt"
    "$MUFLOW" make-model --out "$m" --type mixtral --vocab 4096 --hidden 1024 --layers 4 \
      --heads 16 --kv-heads 4 --head-dim 64 --experts 8 --topk 2 --ffn 2048 --seed 1 --dtype "$dt" >&2
  fi
done

# --- 2. GGUF with llama.cpp's own converter ----------------------------------------------------
pick_python() {
  for p in ${PYTHON:-} python3 /usr/bin/python3; do
    if command -v "$p" > /dev/null && "$p" -c 'import numpy, torch' 2> /dev/null; then echo "$p"; return; fi
  done
}
write_converter_wrapper() {
  # The synthetic model has no tokenizer: run convert_hf_to_gguf.py unchanged except that the
  # vocabulary step writes the converter's own "no vocab" entry (llama.cpp then has vocab_size
  # dummy tokens; token ids are all the benchmark uses).
  cat > "$WORK/py/convert_novocab.py" << 'EOF'
import sys
src = sys.argv[1]
sys.argv = [src + "/convert_hf_to_gguf.py"] + sys.argv[2:]
sys.path.insert(0, src)
import torch
for _n in ("float8_e4m3fn", "float8_e5m2"):  # torch < 2.1 (Debian 12's 1.13): names only
    if not hasattr(torch, _n):
        setattr(torch, _n, torch.uint8)
import convert_hf_to_gguf as c
try:  # llama.cpp from mid-2026 on: the model classes live in the conversion/ package
    from conversion.llama import LlamaModel
except ImportError:  # older llama.cpp: in convert_hf_to_gguf.py itself
    LlamaModel = c.LlamaModel
LlamaModel.set_vocab = lambda self: self._set_vocab_none()
c.main()
EOF
  # Only where `pip install safetensors` is impossible: a read-only stand-in for safe_open.
  mkdir -p "$WORK/py/shim/safetensors"
  cat > "$WORK/py/shim/safetensors/__init__.py" << 'EOF'
import json, struct
import numpy as np
import torch
_NP = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "BF16": np.int16,
       "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8}
class _Slice:
    def __init__(self, f, info): self.f, self.info = f, info
    def get_dtype(self): return self.info["dtype"]
    def get_shape(self): return list(self.info["shape"])
    def __getitem__(self, idx): return self.f._tensor(self.info)[idx]
class _File:
    def __init__(self, path):
        self.path = str(path)
        with open(self.path, "rb") as fh:
            n = struct.unpack("<Q", fh.read(8))[0]
            self.header = json.loads(fh.read(n))
        self.base = 8 + n
        self.meta = self.header.pop("__metadata__", None)
    def __enter__(self): return self
    def __exit__(self, *a): return False
    def keys(self): return list(self.header.keys())
    def metadata(self): return self.meta
    def _tensor(self, info):
        b, e = info["data_offsets"]
        dt = np.dtype(_NP[info["dtype"]])
        a = np.fromfile(self.path, dtype=dt, count=(e - b) // dt.itemsize, offset=self.base + b)
        t = torch.from_numpy(a.reshape(info["shape"]))
        return t.view(torch.bfloat16) if info["dtype"] == "BF16" else t
    def get_slice(self, name): return _Slice(self, self.header[name])
    def get_tensor(self, name): return self._tensor(self.header[name])
def safe_open(path, framework="pt", device="cpu"):
    return _File(path)
EOF
  # Only where `pip install transformers` is impossible: the converter (mid-2026 on) imports
  # AutoConfig at start-up and, when it fails, reads config.json itself, which is all a
  # synthetic folder needs.
  mkdir -p "$WORK/py/shim-transformers/transformers"
  cat > "$WORK/py/shim-transformers/transformers/__init__.py" << 'EOF'
class AutoConfig:
    @staticmethod
    def from_pretrained(*args, **kwargs):
        raise OSError("transformers is not installed: the converter falls back to config.json")
EOF
}
for dt in $DTYPES; do
  g="$WORK/gguf/synth-$dt.gguf"
  [ -f "$g" ] && continue
  py="$(pick_python)"; [ -n "$py" ] || die "no python with numpy and torch for convert_hf_to_gguf.py (pip install -r $LLAMA_CPP_DIR/requirements/requirements-convert_hf_to_gguf.txt, or set PYTHON)"
  write_converter_wrapper
  pp=""; "$py" -c 'import safetensors' 2> /dev/null || { pp="$WORK/py/shim"; log "python package safetensors missing: using the read-only stand-in in $pp"; }
  "$py" -c 'import transformers' 2> /dev/null || {
    pp="$WORK/py/shim-transformers${pp:+:$pp}"; log "python package transformers missing: the converter reads config.json (stand-in in $WORK/py/shim-transformers)"; }
  log "convert_hf_to_gguf.py --outtype $dt -> $g"
  PYTHONPATH="$pp${PYTHONPATH:+:$PYTHONPATH}" "$py" "$WORK/py/convert_novocab.py" "$LLAMA_CPP_DIR" \
    "$WORK/models/synth-$dt" --outtype "$dt" --outfile "$g.part" > "$WORK/logs/convert-$dt.log" 2>&1 \
    || die "conversion failed, see $WORK/logs/convert-$dt.log"
  mv "$g.part" "$g"
done

# --- 3. the llama.cpp decode driver: llama-batched-bench's loop (prefill every sequence, then
# one llama_decode of one token per sequence per step), but each sequence gets its own random
# prompt and continues with the argmax of its own logits, as muflow's workload does.
# llama-batched-bench feeds token 0 to every sequence: identical rows pick the same 2 experts,
# which flatters batched MoE decode (the STOCK column shows it). -------------------------------
drv="$WORK/bin/sbs_decode"
if [ ! -x "$drv" ] || [ "$LLAMA_CPP_DIR/include/llama.h" -nt "$drv" ]; then
  clear_call='llama_kv_cache_clear(ctx)'
  if grep -q 'llama_memory_clear' "$LLAMA_CPP_DIR/include/llama.h"; then clear_call='llama_memory_clear(llama_get_memory(ctx), true)'
  elif grep -q 'llama_kv_self_clear' "$LLAMA_CPP_DIR/include/llama.h"; then clear_call='llama_kv_self_clear(ctx)'; fi
  cat > "$WORK/bin/sbs_decode.cpp" << EOF
#include "llama.h"
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>
// sbs_decode MODEL THREADS NPP NTG NPL KV_F32: prints {"t_pp","speed_pp","t_tg","speed_tg"}
int main(int argc, char** argv) {
  if (argc != 7) { fprintf(stderr, "usage: sbs_decode MODEL THREADS NPP NTG NPL KV_F32\n"); return 2; }
  const int th = atoi(argv[2]), pp = atoi(argv[3]), tg = atoi(argv[4]), pl = atoi(argv[5]);
  llama_log_set([](ggml_log_level, const char*, void*) {}, nullptr);
  llama_backend_init();
  llama_model* m = llama_model_load_from_file(argv[1], llama_model_default_params());
  if (!m) { fprintf(stderr, "cannot load %s\n", argv[1]); return 1; }
  auto cp = llama_context_default_params();
  cp.n_ctx = pl * (pp + tg) + 16; cp.n_batch = 2048; cp.n_ubatch = 512; cp.n_seq_max = pl;
  cp.n_threads = th; cp.n_threads_batch = th;
  if (atoi(argv[6])) { cp.type_k = GGML_TYPE_F32; cp.type_v = GGML_TYPE_F32; }
  llama_context* ctx = llama_init_from_model(m, cp);
  if (!ctx) { fprintf(stderr, "cannot create context\n"); return 1; }
  const int nv = llama_vocab_n_tokens(llama_model_get_vocab(m));
  llama_batch b = llama_batch_init(pl * pp > pl ? pl * pp : pl, 0, 1);
  auto add = [&](llama_token t, int pos, int seq, bool lg) {
    const int i = b.n_tokens++; b.token[i] = t; b.pos[i] = pos; b.n_seq_id[i] = 1; b.seq_id[i][0] = seq; b.logits[i] = lg; };
  auto argmax = [&](int i) { const float* l = llama_get_logits_ith(ctx, i); int a = 0;
    for (int k = 1; k < nv; ++k) if (l[k] > l[a]) a = k; return a; };
  std::mt19937 rng(1);
  b.n_tokens = 0;  // warm-up, as llama-batched-bench: 16 tokens, then an empty cache
  for (int i = 0; i < 16; ++i) add(3 + rng() % (nv - 3), i, 0, false);
  if (llama_decode(ctx, b)) return 1;
  $clear_call;
  b.n_tokens = 0;
  for (int j = 0; j < pl; ++j) for (int i = 0; i < pp; ++i) add(3 + rng() % (nv - 3), i, j, i == pp - 1);
  const auto t0 = std::chrono::steady_clock::now();
  if (llama_decode(ctx, b)) return 1;
  std::vector<llama_token> next(pl);
  for (int j = 0; j < pl; ++j) next[j] = argmax((j + 1) * pp - 1);
  const auto t1 = std::chrono::steady_clock::now();
  for (int s = 0; s < tg; ++s) {
    b.n_tokens = 0;
    for (int j = 0; j < pl; ++j) add(next[j], pp + s, j, true);
    if (llama_decode(ctx, b)) return 1;
    for (int j = 0; j < pl; ++j) next[j] = argmax(j);
  }
  const auto t2 = std::chrono::steady_clock::now();
  const double tpp = std::chrono::duration<double>(t1 - t0).count();
  const double ttg = std::chrono::duration<double>(t2 - t1).count();
  printf("{\"t_pp\": %f, \"speed_pp\": %f, \"t_tg\": %f, \"speed_tg\": %f}\n", tpp, pl * pp / tpp, ttg,
         tg > 0 ? pl * tg / ttg : 0.0);
  llama_batch_free(b); llama_free(ctx); llama_model_free(m);
  return 0;
}
EOF
  log "building $drv against $LLAMA_CPP_DIR/include and $LIBDIR"
  "$CXX" -O2 -std=c++17 "$WORK/bin/sbs_decode.cpp" -I"$LLAMA_CPP_DIR/include" -I"$LLAMA_CPP_DIR/ggml/include" \
    -L"$LIBDIR" -lllama -Wl,-rpath,"$LIBDIR" -o "$drv" || die "could not build $drv against this llama.cpp"
fi

# --- 4. muflow topologies ----------------------------------------------------------------------
threads_mode="$MUFLOW_THREADS"
MUFLOW_HAS_TPD=0  # whether this muflow knows [cluster] threads_per_device (its own strings)
grep -aq 'threads_per_device' "$MUFLOW" && MUFLOW_HAS_TPD=1
topo() {  # topo FILE DTYPE THREADS NUM_REQUESTS INPUT OUTPUT
  local devices=1 tpd="threads_per_device = $3"
  if [ "$threads_mode" = devices ]; then
    devices=$3
    # One thread per device, as muflow before threads_per_device; a muflow with the key would
    # otherwise give each device hardware threads / devices.
    tpd="# threads: num_devices = $3 (one thread each)"
    [ "${MUFLOW_HAS_TPD:-0}" = 1 ] && tpd="threads_per_device = 1"
  fi
  cat > "$1" << EOF
# written by bench/llamacpp_side_by_side.sh
wiring = "sync"
backend = "cpu"
[cluster]
num_devices = $devices
kind = "cpu"
$tpd
[model]
path = "$WORK/models/synth-$2"
gemm = "${MUFLOW_GEMM:-auto}"
[scheduler]
max_batch_requests = $4
max_prefill_tokens = $(( $4 * $5 > 1024 ? $4 * $5 : 1024 ))
[workload]
kind = "poisson"
num_requests = $4
rate = 1000000.0
input = [$5, $5]
output = [$6, $6]
seed = 1
[sampling]
temperature = 0.0
stop_at_eos = false
EOF
}
# One short run per (dtype, threads) without --quiet: checks the [cluster] key and records the
# compute path muflow reports (e.g. "bf16 weights, GEMMs in bf16 ..., 2 thread(s) per device").
# Sets probe_path; not run in a subshell, so that threads_mode sticks.
probe() {  # probe DTYPE THREADS
  local f="$WORK/topo/probe-$1-t$2.toml" lf="$WORK/logs/probe-$1-t$2.log"
  topo "$f" "$1" "$2" 1 8 2
  if ! "$MUFLOW" run "$f" --no-trace > "$lf" 2>&1; then
    if [ "$threads_mode" = auto ] && grep -q threads_per_device "$lf"; then
      log "this muflow has no [cluster] threads_per_device: using num_devices = THREADS instead"
      threads_mode=devices; probe "$@"; return
    fi
    cat "$lf" >&2; die "muflow run failed on $f"
  fi
  [ "$threads_mode" = auto ] && threads_mode=key
  probe_path="$(grep -m1 -E 'weights|GEMM' "$lf" | sed 's/^muflow: //' || true)"
}

# --- 5. the rows ---------------------------------------------------------------------------------
num() { { grep -o "\"$1\": *[0-9.eE+-]*" || true; } | head -1 | sed 's/.*: *//'; }
field() {  # field NAME FILE: the first number after NAME in muflow's run metrics
  awk -v k="$1" 'index($0, k) { for (i = 1; i <= NF; ++i) if ($i ~ /^[0-9.]+$/) { print $i; exit } }' "$2"
}
csvq() { printf '"%s"' "${1//\"/\"\"}"; }  # a CSV field, quotes doubled
record() { echo "$(date +%FT%T),$1,$2,$3,$4,$5,$6,$(csvq "$7")" >> "$CSV"; }

run_muflow() {  # run_muflow ROW DTYPE THREADS ROUND -> tok/s
  local n in out f="$WORK/topo/$1-$2-t$3.toml" lf="$WORK/logs/muflow-$1-$2-t$3-r$4.log"
  case "$1" in prefill512) n=1 in=$PREFILL out=1;; decode*) n=${1#decode} in=$PROMPT out=$GEN;; esac
  topo "$f" "$2" "$3" "$n" "$in" "$out"
  "$MUFLOW" run "$f" --no-trace --quiet > "$lf" 2>&1 || { cat "$lf" >&2; die "muflow run failed ($f)"; }
  local tokens dur ttft p50 p99
  tokens=$(field "output tokens" "$lf"); dur=$(field "duration" "$lf")
  ttft=$(awk '/time to first token/ { print $6 / 1000, $8 / 1000, $10 / 1000 }' "$lf")
  read -r ttft p50 p99 <<< "$ttft"
  [ -n "$tokens" ] && [ -n "$dur" ] && [ -n "$ttft" ] || { cat "$lf" >&2; die "could not read muflow's run metrics from $lf"; }
  local v
  if [ "$1" = prefill512 ]; then
    # prompt tokens over the time to first token (the prefill, the last position's logits and
    # the first sample)
    v=$(awk -v t="$ttft" -v n="$in" 'BEGIN { printf "%.2f", n / t }')
    echo "$v"
    record "$1" "$2" "$3" "$4" muflow "$v" "ttft_s=$ttft"
  else
    # decode steps after the prefill: every request's tokens but its first, over the time from
    # the (common) first token to the end of the run
    v=$(awk -v k="$tokens" -v n="$n" -v d="$dur" -v t="$ttft" 'BEGIN { printf "%.2f", (k - n) / (d - t) }')
    awk -v a="$p50" -v b="$p99" 'BEGIN { exit !(b > a * 1.1 + 0.005) }' &&
      log "warning: muflow TTFT p50 $p50 s != p99 $p99 s: the requests were not prefilled together"
    echo "$v"
    record "$1" "$2" "$3" "$4" muflow "$v" "tokens=$tokens duration_s=$dur ttft_s=$ttft"
  fi
}

run_llama() {  # run_llama ROW DTYPE THREADS ROUND -> tok/s
  local g="$WORK/gguf/synth-$2.gguf" kv32=0 lf="$WORK/logs/llama-$1-$2-t$3-r$4.log" v
  [ "$LLAMA_KV" = f32 ] && kv32=1
  case "$1" in
    prefill512) "$drv" "$g" "$3" "$PREFILL" 0 1 "$kv32" > "$lf" 2>&1 || { cat "$lf" >&2; die "sbs_decode failed"; }
                v=$(num speed_pp < "$lf");;
    decode*)    "$drv" "$g" "$3" "$PROMPT" $((GEN - 1)) "${1#decode}" "$kv32" > "$lf" 2>&1 || { cat "$lf" >&2; die "sbs_decode failed"; }
                v=$(num speed_tg < "$lf");;
  esac
  [ -n "$v" ] || { cat "$lf" >&2; die "could not read sbs_decode's result from $lf"; }
  v=$(printf "%.2f" "$v"); echo "$v"
  record "$1" "$2" "$3" "$4" llama.cpp "$v" "sbs_decode kv=$LLAMA_KV"
}

run_stock() {  # llama.cpp's own tools; -> tok/s
  local g="$WORK/gguf/synth-$2.gguf" lf="$WORK/logs/stock-$1-$2-t$3-r$4.log" v n d
  case "$1" in
    prefill512) "$BIN/llama-bench" -m "$g" -p "$PREFILL" -n 0 -t "$3" -r 1 -o jsonl > "$lf" 2>&1 || true
                v=$(num avg_ts < "$lf"); d="llama-bench pp$PREFILL kv=f16";;
    decode1)    "$BIN/llama-bench" -m "$g" -p 0 -n "$GEN" -t "$3" -r 1 -o jsonl > "$lf" 2>&1 || true
                v=$(num avg_ts < "$lf"); d="llama-bench tg$GEN kv=f16";;
    decode*)    n=${1#decode}
                "$BIN/llama-batched-bench" -m "$g" -c $((n * (PROMPT + GEN) + 16)) -b 2048 -ub 512 \
                  -npp "$PROMPT" -ntg $((GEN - 1)) -npl "$n" -t "$3" -tb "$3" -ctk "$LLAMA_KV" -ctv "$LLAMA_KV" \
                  --output-format jsonl > "$lf" 2>&1 || true
                v=$(num speed_tg < "$lf"); d="llama-batched-bench kv=$LLAMA_KV";;
  esac
  [ -n "$v" ] || { cat "$lf" >&2; die "could not read llama.cpp's result from $lf"; }
  v=$(printf "%.2f" "$v"); echo "$v"
  record "$1" "$2" "$3" "$4" llama.cpp-stock "$v" "$d"
}

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ a[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print a[(NR + 1) / 2]; else printf "%.2f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

table="$WORK/table.md"
{
  echo "| workload | dtype | threads | muflow tok/s | llama.cpp tok/s | muflow / llama.cpp |$([ "$STOCK" = 1 ] && echo " llama.cpp stock tool tok/s |")"
  echo "|---|---|---|---|---|---|$([ "$STOCK" = 1 ] && echo "---|")"
} > "$table"
for dt in $DTYPES; do
  for th in $THREADS; do
    probe "$dt" "$th"
    log "$dt, $th thread(s): muflow: ${probe_path:-?} ($threads_mode)"
    record probe "$dt" "$th" 0 muflow "" "$probe_path ($threads_mode)"
    for row in $ROWS; do
      mu="" ll="" st=""
      for r in $(seq 1 "$REPEATS"); do
        a=$(run_muflow "$row" "$dt" "$th" "$r"); mu="$mu $a"
        b=$(run_llama "$row" "$dt" "$th" "$r"); ll="$ll $b"
        c=""; [ "$STOCK" = 1 ] && { c=$(run_stock "$row" "$dt" "$th" "$r"); st="$st $c"; }
        log "$row $dt t$th round $r: muflow $a  llama.cpp $b${c:+  stock $c}"
      done
      m1=$(median <<< "$mu"); m2=$(median <<< "$ll")
      ratio=$(awk -v a="$m1" -v b="$m2" 'BEGIN { printf "%.2f", a / b }')
      case "$row" in prefill512) w="prefill $PREFILL (1 sequence)";; *) w="decode, ${row#decode} sequence(s)";; esac
      echo "| $w | $dt | $th | $m1 | $m2 | ${ratio}× |$([ "$STOCK" = 1 ] && echo " $(median <<< "$st") |")" >> "$table"
    done
  done
done
echo
echo "muflow $muflow_commit vs llama.cpp $llama_commit (KV cache $LLAMA_KV), medians of $REPEATS, $(date +%F), $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) cores"
cat "$table"
echo
echo "raw results: $CSV"
