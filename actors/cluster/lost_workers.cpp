#include "actors/cluster/lost_workers.hpp"

#include <algorithm>

#include "spdlog/spdlog.h"

namespace muflow::actors::cluster {

void back_off_if_returned_lately(LostState& s, uint32_t p, std::chrono::milliseconds interval,
                                 const std::string& name) {
  const auto now = std::chrono::steady_clock::now();
  auto it = s.taken_back_at.find(p);
  if (it == s.taken_back_at.end() || now - it->second >= kStayUp) {
    s.failed_returns.erase(p);
    s.retry_after.erase(p);
    return;
  }
  const int n = std::min(++s.failed_returns[p], 16);
  const auto wait =
      std::min<std::chrono::milliseconds>(interval * (int64_t{1} << n), std::chrono::minutes(5));
  s.retry_after[p] = now + wait;
  spdlog::error(
      "muflow driver: {} was lost again {:.1f} s after it was taken back; tried again "
      "in {:.1f} s",
      name, std::chrono::duration<double>(now - it->second).count(),
      std::chrono::duration<double>(wait).count());
}

}  // namespace muflow::actors::cluster
