#!/usr/bin/env bash
# Installs everything muflow needs to build and test from Debian 12 (bookworm) packages.
# Idempotent; uses sudo when not root. See ../shared/design/TOOLCHAIN.md for why each is here.
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
PKGS=(
  build-essential cmake ninja-build pkg-config git
  lld                              # linker: ~4x faster than GNU ld on the ~110 test executables
  libcaf-dev                       # actors (CAF 0.17; caf_io: the cluster control plane)
  libucx-dev ucx-utils             # data plane between processes (transport/cluster)
  libssl-dev                       # cluster secret: HMAC-SHA256 challenge-response, nonces
  libdnnl-dev ocl-icd-opencl-dev   # oneDNN CPU GEMM (its CMake config needs OpenCL)
  libabsl-dev                      # Status / StatusOr, strings, containers
  libtomlplusplus-dev              # topology files
  libcli11-dev                     # CLI
  libspdlog-dev libfmt-dev         # logging
  nlohmann-json3-dev               # config.json, safetensors header, traces, HTTP bodies
  libcpp-httplib-dev               # `muflow serve` HTTP server and `muflow bench --url` client
  libsentencepiece-dev             # tokenizer.model
  libboost-graph-dev               # bipartite matching (Aurora colocation planner)
  libglpk-dev                      # MILP solver (ExFlow affinity placement)
  libjemalloc-dev                  # malloc of the muflow executables (2x faster large simulations)
  libgtest-dev libgmock-dev libbenchmark-dev
  clang libclang-rt-14-dev libomp-dev  # ASan+UBSan suite and libFuzzer targets (presets asan, fuzz), TSan (preset tsan)
  python3-numpy python3-torch python3-sentencepiece  # independent float64 reference forward in tests
  chromium                         # headless browser test of the `muflow trace view` report
  bible-kjv                        # KJV text for bench/aurora_exflow.sh (recorded expert paths)
)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "muflow: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
# The OpenAI Node client and a Prometheus text parser for the `muflow serve` tests, pinned by
# tests/node/package-lock.json (Node comes from Debian's nodejs; npm from the npm package).
if ! command -v npm >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get install -y -q --no-install-recommends nodejs npm
fi
(cd "$(dirname "$0")/../tests/node" && npm ci --no-audit --no-fund --loglevel=error)
