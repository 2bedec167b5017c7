#pragma once
/// \file
/// Run-to-run spread of a simulated stage run's duration (issue #19 item 3): the sim charges
/// each run its mean time (kernel rows plus the in-run host correction of `[cost] kernels`),
/// but on a real backend runs of the same work vary (the 2-core VM, traced cpu runs against
/// the sim's replay of the same runs: a log deviation of 0.11–0.20 for attention, 0.04–0.08
/// for expert and 0.08–0.13 for sampler runs),
/// and where a barrier waits for the slowest of several devices that variation costs time a
/// mean does not: E[max] > max of the means. A deterministic sim gets it from counter-based
/// draws: the n-th run of one stage under one seed always gets the same factor.

#include <cstdint>

namespace muflow::engine::exec {

/// Largest |z| of a draw: a factor stays within [exp(−4σ − σ²/2), exp(4σ − σ²/2)] (a run of
/// a simulated hour never becomes a day).
inline constexpr double kRunSpreadMaxZ = 4.0;

/// The factor (dimensionless, > 0) of a run's duration: exp(σ z − σ²/2), z a standard normal
/// draw (Box–Muller over two counter-based uniforms, engine::serving::counter_uniform of
/// (seed, stream, 2n) and (seed, stream, 2n + 1); written out rather than
/// std::normal_distribution, whose values differ between standard libraries) clamped to
/// ±kRunSpreadMaxZ, so that E[factor] = 1 (the mean time is kept; the clamp moves the mean by
/// less than 1e-3 for σ <= 1) and log(factor) has standard deviation σ. `sigma`: a log
/// standard deviation (MeasuredKernels::run_spread); `stream`: one per stage (actors/stage.cpp:
/// its device and its index among the device's stages); `n`: the stage's draw count. `sigma`
/// <= 0 or not finite gives 1; no errors. Pure; any thread.
double run_spread_factor(uint64_t seed, uint64_t stream, uint64_t n, double sigma);

}  // namespace muflow::engine::exec
