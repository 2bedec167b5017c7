#pragma once
/// \file
/// How many threads the fixed-order GEMM of the calling thread may use (issue #16, item 4:
/// several cores per device). A device's executor thread sets it for the stages it runs;
/// every Linear / ExpertFfn call on that thread then splits its column panels over that many
/// OpenMP threads. The fixed-order kernel gives the same bits for every count
/// (kernels/cpu/fixed_order_gemm.hpp), so the count changes speed, never the answer. The
/// oneDNN tile fallback stays single-threaded whatever the count.

namespace muflow::kernels::cpu {

/// Upper bound of a thread count (a topology key is checked against it).
inline constexpr int kMaxGemmThreads = 256;

/// The calling thread's GEMM thread count (1 unless a GemmThreadsScope is active on it).
int gemm_threads();

/// Sets the calling thread's GEMM thread count for the scope's lifetime, restoring the
/// previous count on exit. `threads` is clamped to [1, kMaxGemmThreads]. Thread-local: other
/// threads are unaffected. Not movable.
class GemmThreadsScope {
 public:
  explicit GemmThreadsScope(int threads);
  ~GemmThreadsScope();
  GemmThreadsScope(const GemmThreadsScope&) = delete;
  GemmThreadsScope& operator=(const GemmThreadsScope&) = delete;

 private:
  int previous_;
};

}  // namespace muflow::kernels::cpu
