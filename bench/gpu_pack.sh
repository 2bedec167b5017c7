#!/usr/bin/env bash
# Packs what bench/gpu_run.sh needs on a GPU machine that has none of the project's libraries
# and no network (the lent H100/H200 machines): the muflow CLI, the gpu test executables and
# the cuda_kernels benchmark and the wgmma_bits probe from build/release (stripped), every shared library they load
# except glibc's and the CUDA toolkit's (cuBLAS comes from the machine's CUDA), as
# .devcarry/devbundle.tar.xz, and kjv-mixtral-tiny under .devcarry/models. .devcarry is
# ignored by git; carry it with the device tool (carry = [".devcarry"]).
# Usage: cmake --build --preset release && bench/gpu_pack.sh
set -euo pipefail
cd "$(dirname "$0")/.."
B=build/release
bins=("$B/tools/muflow" "$B/tests/cuda_kernels_test" "$B/tests/cuda_backend_test" "$B/bench/cuda_kernels")
for b in "${bins[@]}"; do [ -x "$b" ] || { echo "gpu_pack.sh: $b not built (nvcc found?)" >&2; exit 1; }; done
# wgmma_bits exists where the build targets sm_90a (CUDA 12 on).
[ -x "$B/bench/wgmma_bits" ] && bins+=("$B/bench/wgmma_bits")
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib" .devcarry/models
cp "${bins[@]}" "$stage/bin/"
strip "$stage"/bin/*
for b in "${bins[@]}"; do ldd "$b"; done | awk '/=>/ {print $3}' | sort -u |
  grep -v -E '/(libc|libm|libpthread|libdl|librt|ld-linux-x86-64|libcublas|libcublasLt)\.so' |
  while read -r lib; do cp -L "$lib" "$stage/lib/"; done
tar cJf .devcarry/devbundle.tar.xz -C "$stage" bin lib
data="${MUFLOW_DATA_DIR:-../shared/data}"
# Where the gpu tests look for the data (compiled in): gpu_run.sh puts the model there.
sed -n 's/^MUFLOW_DATA_DIR:PATH=//p' "$B/CMakeCache.txt" > .devcarry/data_dir.txt
[ -d .devcarry/models/kjv-mixtral-tiny ] && chmod -R u+w .devcarry/models/kjv-mixtral-tiny
rm -rf .devcarry/models/kjv-mixtral-tiny
cp -r "$data/models/kjv-mixtral-tiny" .devcarry/models/
chmod -R u+w .devcarry/models/kjv-mixtral-tiny  # the shared data is read-only
du -sh .devcarry
