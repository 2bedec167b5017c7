#include "actors/wirings/registry.hpp"

#include <array>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "actors/wirings/async.hpp"
#include "actors/wirings/async_replicated.hpp"
#include "actors/wirings/exflow.hpp"
#include "actors/wirings/harmoeny.hpp"
#include "actors/wirings/moeshard.hpp"
#include "actors/wirings/sync.hpp"

namespace muflow::actors {
namespace {

std::array<const Wiring*, 6> all_wirings() {
  return {&sync_wiring(),     &async_wiring(),  &harmoeny_wiring(),
          &moeshard_wiring(), &exflow_wiring(), &async_replicated_wiring()};
}

}  // namespace

absl::StatusOr<const Wiring*> find_wiring(std::string_view name) {
  for (const Wiring* w : all_wirings()) {
    if (w->name() == name) return w;
  }
  return absl::UnimplementedError(
      absl::StrFormat("wiring '%s' is not available in this build; expected one of: %s", name,
                      absl::StrJoin(available_wirings(), ", ")));
}

std::vector<std::string> available_wirings() {
  std::vector<std::string> names;
  for (const Wiring* w : all_wirings()) names.emplace_back(w->name());
  return names;
}

std::string wirings_with(bool (*accepts)(const WiringTraits&)) {
  std::vector<std::string> names;
  for (const Wiring* w : all_wirings()) {
    if (accepts(w->traits())) names.push_back(absl::StrFormat("\"%s\"", w->name()));
  }
  if (names.size() <= 1) return absl::StrJoin(names, "");
  const std::string last = names.back();
  names.pop_back();
  return absl::StrCat(absl::StrJoin(names, ", "), " or ", last);
}

}  // namespace muflow::actors
