#include "actors/process_layout.hpp"

#include "absl/strings/str_format.h"
#include "actors/run_context.hpp"

namespace muflow::actors {

std::string to_string(const ActorAddress& a) {
  switch (a.role) {
    case ActorRole::kCoordinator:
      return "coordinator";
    case ActorRole::kAttention:
      return absl::StrFormat("attention(b=%d, r=%d)", a.block, a.index);
    case ActorRole::kExpert:
      return absl::StrFormat("expert(b=%d, slot=%d)", a.block, a.index);
    case ActorRole::kSampler:
      return absl::StrFormat("sampler(r=%d)", a.index);
    case ActorRole::kDispatch:
      return absl::StrFormat("dispatch(b=%d)", a.block);
    case ActorRole::kCombine:
      return absl::StrFormat("combine(b=%d)", a.block);
    case ActorRole::kDevice:
      return absl::StrFormat("device %d", a.index);
  }
  return absl::StrFormat("unknown role %d", static_cast<int>(a.role));
}

caf::actor resolve(const ActorTable& t, const ActorAddress& a) {
  // `at` of a vector with a bounds check that returns an empty handle instead of throwing.
  auto at = [](const std::vector<caf::actor>& v, int32_t i) -> caf::actor {
    return i >= 0 && static_cast<size_t>(i) < v.size() ? v[static_cast<size_t>(i)] : caf::actor{};
  };
  auto row = [](const std::vector<std::vector<caf::actor>>& v,
                int32_t b) -> const std::vector<caf::actor>* {
    return b >= 0 && static_cast<size_t>(b) < v.size() ? &v[static_cast<size_t>(b)] : nullptr;
  };
  switch (a.role) {
    case ActorRole::kCoordinator:
      return t.coordinator;
    case ActorRole::kAttention: {
      const auto* r = row(t.attention, a.block);
      return r ? at(*r, a.index) : caf::actor{};
    }
    case ActorRole::kExpert: {
      const auto* r = row(t.experts, a.block);
      return r ? at(*r, a.index) : caf::actor{};
    }
    case ActorRole::kSampler:
      return at(t.samplers, a.index);
    case ActorRole::kDispatch:
      return at(t.dispatch, a.block);
    case ActorRole::kCombine:
      return at(t.combine, a.block);
    case ActorRole::kDevice:
      return at(t.devices, a.index);
  }
  return {};
}

}  // namespace muflow::actors
