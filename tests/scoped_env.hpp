#pragma once
/// \file
/// An environment variable set (or unset) for one scope of a test and restored after it, for
/// settings a library reads from the environment when an object is created (UCX's
/// `UCX_TLS`, muflow's `MUFLOW_MODELS_DIR`). Not thread-safe: `setenv` is process-wide, so
/// use it where no other thread of the test reads the environment at the same time.

#include <cstdlib>
#include <optional>
#include <string>

namespace muflow::testing {

class ScopedEnv {
 public:
  /// Sets `name` to `value`, or unsets it when `value` is nullopt. `name` must outlive this.
  ScopedEnv(const char* name, const std::optional<std::string>& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) {
      ::setenv(name, value->c_str(), 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace muflow::testing
