#!/usr/bin/env bash
# The #20 checks on a GPU machine, from what bench/gpu_pack.sh packed (run in the repository
# root there; OUT: a folder for the logs, written as each step finishes): the gpu tests,
# `muflow generate` on cpu and cuda, the cuda_kernels benchmark, an ncu look at the decode
# GEMMs where ncu is installed, and the sim-vs-measured prediction on the GPU
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
cat $OUT/bench.log
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
if [ -n "$NCU" ]; then
  timeout 120 $NCU --clock-control none --kernel-name regex:gemm_bf16_kernel --launch-skip 2 \
    --launch-count 4 --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy \
    $B/cuda_kernels --decode-only --quick > $OUT/ncu.log 2>&1
  echo "ncu rc $?"
  grep -E "gemm_bf16_kernel|Duration|Memory Throughput|DRAM Throughput|Compute \(SM\)|Achieved Occupancy|Theoretical Occupancy|Registers|Block Limit" $OUT/ncu.log | head -60
fi
MUFLOW=$B/muflow BACKEND=cuda OUT=/tmp/pred REPEATS=3 timeout 240 bash bench/sim_prediction.sh sync async exflow moeshard harmoeny > $OUT/prediction.log 2>&1
echo "prediction rc $?"
cp /tmp/pred/prediction.csv /tmp/pred/cuda-kernels.csv $OUT/ 2>/dev/null
tail -16 $OUT/prediction.log
