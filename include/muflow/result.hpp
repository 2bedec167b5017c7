#pragma once
/// \file
/// Errors of the public muflow API: every call that can fail returns a muflow::Status (no
/// value) or a muflow::Result<T> (a value or a Status). The API never throws for bad input
/// and never aborts; the message names what to fix ("topologies/x.toml: file not found",
/// "GenerationParams.max_tokens must be >= 1, got 0"). Only standard-library types.

#include <stdexcept>
#include <string>
#include <utility>
#include <variant>

namespace muflow {

/// What kind of error a Status carries (the subset of Abseil's / gRPC's canonical codes the
/// engine produces; any other internal code is reported as kInternal).
enum class ErrorCode : int {
  kOk = 0,
  kInvalidArgument,     ///< bad input: a malformed topology, a bad prompt or parameter
  kNotFound,            ///< a file the topology names (itself, the model, prompts) is missing
  kPermissionDenied,    ///< a file exists but cannot be read or written; a worker process
                        ///< refuses this process's cluster secret
  kFailedPrecondition,  ///< the call is not possible in this state (after shutdown; text
                        ///< prompt without a tokenizer; the sim backend has no live engine)
  kResourceExhausted,   ///< the model or its KV cache does not fit in memory
  kUnimplemented,       ///< a wiring or backend this build does not have
  kDataLoss,            ///< a model file is truncated or corrupt
  kInternal,            ///< the engine failed (a stage, a callback that threw, a bug)
  kUnavailable,         ///< a worker process of `[[cluster.workers]]` cannot be reached, or
                        ///< was lost and its devices could not be moved to the others
};

/// "OK", "INVALID_ARGUMENT", ... (the canonical upper-case names). Any thread.
inline const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk:
      return "OK";
    case ErrorCode::kInvalidArgument:
      return "INVALID_ARGUMENT";
    case ErrorCode::kNotFound:
      return "NOT_FOUND";
    case ErrorCode::kPermissionDenied:
      return "PERMISSION_DENIED";
    case ErrorCode::kFailedPrecondition:
      return "FAILED_PRECONDITION";
    case ErrorCode::kResourceExhausted:
      return "RESOURCE_EXHAUSTED";
    case ErrorCode::kUnimplemented:
      return "UNIMPLEMENTED";
    case ErrorCode::kDataLoss:
      return "DATA_LOSS";
    case ErrorCode::kInternal:
      return "INTERNAL";
    case ErrorCode::kUnavailable:
      return "UNAVAILABLE";
  }
  return "INTERNAL";
}

/// Success, or an error code with a message a user can act on. Plain value; copy freely.
class Status {
 public:
  /// Success.
  Status() = default;
  /// An error. A `code` of kOk makes a success (the message is dropped).
  Status(ErrorCode code, std::string message)
      : code_(code), message_(code == ErrorCode::kOk ? std::string() : std::move(message)) {}

  bool ok() const noexcept { return code_ == ErrorCode::kOk; }
  explicit operator bool() const noexcept { return ok(); }
  ErrorCode code() const noexcept { return code_; }
  /// Empty on success.
  const std::string& message() const noexcept { return message_; }
  /// "OK", or e.g. "NOT_FOUND: /x/topo.toml: file not found".
  std::string to_string() const {
    return ok() ? std::string("OK") : std::string(error_code_name(code_)) + ": " + message_;
  }

 private:
  ErrorCode code_ = ErrorCode::kOk;
  std::string message_;
};

/// A value of type T, or the error that prevented it. Plain value (movable; copyable when T
/// is). Check ok() before value(): value() on an error is a programming error and throws
/// std::logic_error carrying the error's message (it never returns garbage).
template <typename T>
class Result {
 public:
  /// A value.
  Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit
  /// An error. An OK status (no value to hold) becomes a kInternal error.
  Result(Status error)  // NOLINT: implicit, so `return Status(...)` works
      : v_(std::in_place_index<1>,
           error.ok()
               ? Status(ErrorCode::kInternal, "Result built from an OK Status without a value")
               : std::move(error)) {}

  bool ok() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return ok(); }

  /// OK when a value is held, else the error.
  Status status() const { return ok() ? Status() : std::get<1>(v_); }

  T& value() & {
    check();
    return std::get<0>(v_);
  }
  const T& value() const& {
    check();
    return std::get<0>(v_);
  }
  T&& value() && {
    check();
    return std::get<0>(std::move(v_));
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  void check() const {
    if (!ok())
      throw std::logic_error("muflow::Result::value() on an error: " + status().to_string());
  }
  std::variant<T, Status> v_;
};

}  // namespace muflow
