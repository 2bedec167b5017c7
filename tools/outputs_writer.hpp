#pragma once
// `muflow run --outputs F.jsonl`: one JSON line per request, in finish order, written by a
// thread of its own so that formatting (token ids, decoded text) and file I/O stay off the
// coordinator actor's thread, which launches every engine step. Lines are written as requests
// finish; the file is flushed whenever the writer has caught up (within milliseconds of a
// request finishing), so an interrupted run keeps what finished. Memory: at most
// kMaxQueuedOutputs outputs wait; past that write() blocks the caller (backpressure) rather
// than grow without bound under overload.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "actors/coordinator.hpp"
#include "engine/model/tokenizer.hpp"

namespace muflow::tools {

/// The prompt of `r` as text: the workload's text when it gave one, else its ids decoded.
std::string prompt_text(const actors::RequestOutput& r, const engine::model::Tokenizer& tok);

class OutputsWriter {
 public:
  static constexpr size_t kMaxQueuedOutputs = 4096;

  /// Opens (truncates) `path`, whose folder exists, and starts the writer thread. The error
  /// names the path and the OS reason.
  static std::optional<std::string> open(const std::string& path,
                                         std::unique_ptr<OutputsWriter>* out);
  ~OutputsWriter();  // close()
  OutputsWriter(const OutputsWriter&) = delete;
  OutputsWriter& operator=(const OutputsWriter&) = delete;

  /// Lines also hold the prompt and output text (set before the first write; may be null).
  void set_text(const engine::model::Tokenizer* tok) { tok_ = tok; }

  /// Queues `r`'s line (any thread; one caller at a time keeps finish order: the coordinator).
  /// Blocks while kMaxQueuedOutputs wait. After a failed write nothing more is written.
  void write(const actors::RequestOutput& r);

  /// Writes what is queued, flushes and stops the thread. Idempotent. Call before reading
  /// num_lines() or error().
  void close();

  const std::string& path() const { return path_; }
  /// A write or flush failed (any thread).
  bool failed() const { return failed_.load(); }
  /// Why (after close()).
  const std::string& error() const { return error_; }
  /// Lines written (after close()).
  int64_t num_lines() const { return num_lines_; }

 private:
  OutputsWriter(std::string path, std::FILE* file);
  void run();  // the writer thread
  // Formats and writes one line; false after a failure (error_ set).
  bool write_line(const actors::RequestOutput& r);

  std::string path_;
  std::FILE* file_ = nullptr;
  const engine::model::Tokenizer* tok_ = nullptr;
  std::mutex mu_;
  std::condition_variable has_work_, has_room_;
  std::deque<actors::RequestOutput> queue_;  // guarded by mu_
  bool closing_ = false;                     // guarded by mu_
  std::thread thread_;
  std::atomic<bool> failed_{false};
  std::string error_;      // written by the thread, read after close()
  int64_t num_lines_ = 0;  // likewise
};

}  // namespace muflow::tools
