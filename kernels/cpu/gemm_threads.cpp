#include "kernels/cpu/gemm_threads.hpp"

#include <algorithm>

namespace muflow::kernels::cpu {
namespace {

int& thread_gemm_threads() {
  thread_local int threads = 1;
  return threads;
}

}  // namespace

int gemm_threads() { return thread_gemm_threads(); }

GemmThreadsScope::GemmThreadsScope(int threads) : previous_(thread_gemm_threads()) {
  thread_gemm_threads() = std::clamp(threads, 1, kMaxGemmThreads);
}

GemmThreadsScope::~GemmThreadsScope() { thread_gemm_threads() = previous_; }

}  // namespace muflow::kernels::cpu
