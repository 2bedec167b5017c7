#!/usr/bin/env bash
# The #20 checks on a GPU machine, from what bench/gpu_pack.sh packed (run in the repository
# root there; OUT: a folder for the logs, written as each step finishes): the gpu tests,
# `muflow generate` on cpu and cuda, the cuda_kernels benchmark, the wgmma_bits probe, an ncu
# look at the decode GEMMs where ncu is installed, and the sim-vs-measured prediction on the GPU
# (BACKEND=cuda bench/sim_prediction.sh). bench/README.md "CUDA backend" has the results.
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-out/gpu}"
mkdir -p "$OUT"
D=$PWD/.devcarry
mkdir -p /tmp/mf && tar xJf $D/devbundle.tar.xz -C /tmp/mf
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
CUB=$(find /usr/local /opt /usr/lib -name 'libcublas.so.13' 2>/dev/null | head -1)
export LD_LIBRARY_PATH=/tmp/mf/lib:$(dirname "$CUB")
rm -f /tmp/mf/lib/libstdc++.so.6 /tmp/mf/lib/libgcc_s.so.1
# The tests look for the data where the build machine had it (MUFLOW_DATA_DIR, compiled in;
# gpu_pack.sh wrote it down): put kjv-mixtral-tiny there. mkdir -p creates each component of a
# path like <checkout>/../shared/data, the checkout folder too, so the ".." resolves.
data_dir="$(cat "$D/data_dir.txt" 2>/dev/null || true)"
if [ -n "$data_dir" ]; then
  mkdir -p "$data_dir/models" && cp -r "$D/models/kjv-mixtral-tiny" "$data_dir/models/"
fi
M="${data_dir:-$D}/models/kjv-mixtral-tiny"
B=/tmp/mf/bin
timeout 120 $B/cuda_kernels_test > $OUT/kernels_test.log 2>&1; echo "kernels test rc $?"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED" $OUT/kernels_test.log
timeout 300 $B/cuda_backend_test > $OUT/backend_test.log 2>&1; echo "backend test rc $?"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|\[cuda\]" $OUT/backend_test.log
for be in cpu cuda; do
  timeout 60 $B/muflow generate --model $M --prompt "In the beginning God created" --max-new-tokens 24 --backend $be --json 2>&1
done | tee -a $OUT/backend_test.log
timeout 150 $B/cuda_kernels --csv $OUT/cuda_kernels.csv > $OUT/bench.log 2>&1; echo "bench rc $?"
if [ -x $B/wgmma_bits ]; then
  timeout 30 $B/wgmma_bits >> $OUT/bench.log 2>&1; echo "wgmma_bits rc $?"
fi
cat $OUT/bench.log
# The machine code of the decode-path GEMMs, where the toolkit's cuobjdump is installed.
OBJDUMP=$(command -v cuobjdump || ls /usr/local/cuda*/bin/cuobjdump 2>/dev/null | head -1)
if [ -n "$OBJDUMP" ]; then
  $OBJDUMP -sass -arch sm_90 $B/cuda_kernels_test 2>/dev/null |
    awk '/Function :/ {p = /decode_warp|decode_kernel|narrow/} p' > $OUT/sass.log
  echo "sass: $(grep -c 'Function :' $OUT/sass.log) functions"
fi
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
if [ -n "$NCU" ]; then
  timeout 120 $NCU --clock-control none \
    --kernel-name regex:'gemm_bf16_decode_kernel|gemm_f32_narrow_kernel' --launch-count 6 --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy \
    $B/cuda_kernels --decode-only --quick > $OUT/ncu.log 2>&1
  echo "ncu rc $?"
  # One large grouped GEMM (512 tokens per expert, the sm_90 kernel on H100/H200: its launches
  # at 256 tokens, grouped then dense, are skipped).
  timeout 120 $NCU --clock-control none --kernel-name regex:'persistent_kernel' --launch-skip 24 \
    --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis \
    --section ComputeWorkloadAnalysis --section Occupancy $B/cuda_kernels --quick \
    >> $OUT/ncu.log 2>&1
  echo "ncu (grouped) rc $?"
  grep -E "gemm_bf16_decode_kernel|gemm_f32_narrow_kernel|persistent_kernel|Duration|Memory Throughput|DRAM Throughput|Compute \(SM\)|Achieved Occupancy|Theoretical Occupancy|Registers|Block Limit|Pipe|L2 Cache Throughput|L1/TEX Cache Throughput|Bank" $OUT/ncu.log | head -90
fi
# PREDICT=0 skips the sim-vs-measured runs (about two minutes). One calibration per wiring
# (CALIBRATE_AFTER=0): the second one brackets a shared VM's drift, and device time is scarce.
[ "${PREDICT:-1}" = 0 ] && exit 0
MUFLOW=$B/muflow BACKEND=cuda CALIBRATE_AFTER=0 OUT=/tmp/pred REPEATS=3 timeout 240 bash bench/sim_prediction.sh sync async exflow moeshard harmoeny > $OUT/prediction.log 2>&1
echo "prediction rc $?"
cp /tmp/pred/prediction.csv /tmp/pred/sync-cuda-kernels.csv $OUT/ 2>/dev/null
tail -16 $OUT/prediction.log
