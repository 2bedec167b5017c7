// Fuzzes the measured-kernel-times CSV that calibrates the sim cost model
// (kernels/sim/kernel_time_csv.hpp, e.g. ../shared/data/kernels/*.csv): read_kernel_times_csv,
// then, when it parses, CostModel::calibrate_expert_ffn's fit on the same file (the V100
// Switch expert of the HarMoEny artifact: hidden 768, ffn 3072, two-layer, f32).
#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/sim/cost_model.hpp"
#include "kernels/sim/device_kind.hpp"
#include "kernels/sim/kernel_time_csv.hpp"
#include "tests/fuzz/fuzz_input_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace sim = muflow::kernels::sim;
  const std::string path = muflow::fuzz::write_input("kernel_times.csv", data, size);
  if (!sim::read_kernel_times_csv(path).ok()) return 0;
  static const absl::StatusOr<sim::DeviceKind> v100 = sim::find_device_kind("V100-32GB");
  if (!v100.ok()) return 0;
  sim::CostModel model;
  (void)model.calibrate_expert_ffn(path, 768, 3072, sim::FfnKind::kTwoLayer, *v100,
                                   sim::Precision::kF32);
  return 0;
}
