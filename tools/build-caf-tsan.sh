#!/usr/bin/env bash
# Builds CAF 0.17.6 (libcaf_core, libcaf_io) with ThreadSanitizer into build/caf-tsan, for the
# `tsan` preset. Debian's libcaf is not instrumented: TSan then cannot see the happens-before
# edge of a message send (CAF's mailbox is lock-free, inside libcaf_core.so) and reports every
# message's payload as a race. With an instrumented CAF it sees the edges, and what it reports
# is real.
#
#   tools/build-caf-tsan.sh CAF_SOURCE_DIR
#     CAF_SOURCE_DIR: actor-framework at tag 0.17.6 (the version Debian 12 ships), e.g.
#       git clone --branch 0.17.6 --depth 1 https://github.com/actor-framework/actor-framework
#   then: cmake --preset tsan && cmake --build --preset tsan && ctest --preset tsan
set -euo pipefail
if [[ $# -ne 1 || ! -f "$1/libcaf_core/caf/all.hpp" ]]; then
  echo "usage: $0 CAF_SOURCE_DIR   (actor-framework checked out at tag 0.17.6)" >&2
  exit 2
fi
src="$(cd "$1" && pwd)"
root="$(cd "$(dirname "$0")/.." && pwd)"
prefix="$root/build/caf-tsan"
work="$root/build/caf-tsan-build"
# The same compiler and standard library as the tsan preset (clang with libstdc++: CAF 0.17
# would pick libc++ under clang otherwise, which does not link with the rest). `-include limits`:
# CAF 0.17.6's receive_buffer.hpp uses std::numeric_limits without the header, which GCC 12's
# libstdc++ no longer includes transitively.
cmake -S "$src" -B "$work" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DCAF_NO_AUTO_LIBCPP=yes \
  -DCAF_NO_EXAMPLES=yes -DCAF_NO_UNIT_TESTS=yes -DCAF_NO_OPENCL=yes -DCAF_NO_OPENSSL=yes \
  -DCAF_NO_PYTHON=yes -DCAF_NO_TOOLS=yes -DCAF_NO_SUMMARY=yes -DCAF_NO_COMPILER_CHECK=yes \
  -DCMAKE_CXX_FLAGS="-fsanitize=thread -fno-omit-frame-pointer -include limits" \
  -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=thread" -DCMAKE_INSTALL_PREFIX="$prefix"
cmake --build "$work"
cmake --install "$work"
echo "$0: CAF with TSan in $prefix (the tsan preset looks there first)"
