#include "engine/serving/request_source.hpp"

#include <utility>

namespace muflow::engine::serving {
namespace {

class VectorSource final : public RequestSource {
 public:
  explicit VectorSource(std::vector<Request> requests) : requests_(std::move(requests)) {}
  int64_t remaining() const override { return static_cast<int64_t>(requests_.size() - next_); }
  std::optional<Request> next() override {
    if (next_ >= requests_.size()) return std::nullopt;
    Request r = std::move(requests_[next_]);
    requests_[next_++] = Request{};  // its prompt's memory leaves with it
    return r;
  }

 private:
  std::vector<Request> requests_;
  size_t next_ = 0;
};

}  // namespace

RequestSourcePtr make_vector_source(std::vector<Request> requests) {
  return std::make_shared<VectorSource>(std::move(requests));
}

}  // namespace muflow::engine::serving
