#include "engine/model/model_memory.hpp"

#include <unistd.h>

#include <string>

#include "absl/strings/str_format.h"

namespace muflow::engine::model {

double weight_bytes(const ModelConfig& c, bool hosts_attention, int64_t num_experts,
                    double bytes_per_element) {
  const double H = static_cast<double>(c.hidden_size), D = static_cast<double>(c.head_dim);
  const double L = static_cast<double>(c.num_layers);
  const double matrices = c.gated_experts ? 3.0 : 2.0;
  double params = L * static_cast<double>(num_experts) * matrices * H *
                  static_cast<double>(c.expert_ffn);
  if (hosts_attention) {
    const double attention = H * static_cast<double>(c.num_heads + 2 * c.num_kv_heads) * D +
                             static_cast<double>(c.num_heads) * D * H;
    const double per_block = attention + H * static_cast<double>(c.num_experts) +
                             matrices * H * static_cast<double>(c.shared_expert_ffn) + 2.0 * H;
    params += L * per_block +
              static_cast<double>(c.vocab_size) * H * (c.tie_word_embeddings ? 1.0 : 2.0) + H;
  }
  return params * bytes_per_element;
}

double model_weight_bytes(const ModelConfig& c, double bytes_per_element) {
  return weight_bytes(c, true, c.num_experts, bytes_per_element);
}

double physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return 0.0;
  return static_cast<double>(pages) * static_cast<double>(page);
}

absl::Status check_weights_fit_in_memory(const ModelConfig& c, double bytes_per_element,
                                         double copies, std::string_view what) {
  const double need = copies * model_weight_bytes(c, bytes_per_element);
  const double have = physical_memory_bytes();
  if (have <= 0.0 || need <= 0.8 * have) return absl::OkStatus();
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  return absl::ResourceExhaustedError(absl::StrFormat(
      "%s: the model's weights need %.1f GiB (%.0f × %.1f GiB at %g bytes per element), more "
      "than 80%% of this machine's %.1f GiB; use smaller dims or backend \"sim\"",
      std::string(what), need / kGiB, copies, need / copies / kGiB, bytes_per_element,
      have / kGiB));
}

}  // namespace muflow::engine::model
