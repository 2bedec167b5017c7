#include "tools/outputs_writer.hpp"

#include <cerrno>
#include <cstring>
#include <utility>

#include "nlohmann/json.hpp"

namespace muflow::tools {

std::string prompt_text(const actors::RequestOutput& r, const engine::model::Tokenizer& tok) {
  return r.prompt_text.empty() ? tok.decode(r.prompt) : r.prompt_text;
}

std::optional<std::string> OutputsWriter::open(const std::string& path,
                                               std::unique_ptr<OutputsWriter>* out) {
  errno = 0;
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) return "cannot write --outputs file '" + path + "': " + std::strerror(errno);
  out->reset(new OutputsWriter(path, f));
  return std::nullopt;
}

OutputsWriter::OutputsWriter(std::string path, std::FILE* file)
    : path_(std::move(path)), file_(file), thread_([this] { run(); }) {}

OutputsWriter::~OutputsWriter() {
  close();
  if (file_) std::fclose(file_);
}

void OutputsWriter::write(const actors::RequestOutput& r) {
  if (failed_.load()) return;
  std::unique_lock<std::mutex> lock(mu_);
  has_room_.wait(lock, [this] { return queue_.size() < kMaxQueuedOutputs || closing_; });
  if (closing_) return;
  queue_.push_back(r);
  has_work_.notify_one();
}

void OutputsWriter::close() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    closing_ = true;
  }
  has_work_.notify_one();
  has_room_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void OutputsWriter::run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    has_work_.wait(lock, [this] { return !queue_.empty() || closing_; });
    if (queue_.empty()) break;  // closing, nothing left
    actors::RequestOutput r = std::move(queue_.front());
    queue_.pop_front();
    const bool caught_up = queue_.empty();
    has_room_.notify_one();
    lock.unlock();
    bool ok = !failed_.load() && write_line(r);
    // Flush once the queue is drained: every finished request is on disk within milliseconds,
    // without one flush (a system call) per line when thousands finish per second.
    if (ok && caught_up) {
      errno = 0;
      if (std::fflush(file_) != 0) {
        error_ = "failed writing --outputs file '" + path_ +
                 "': " + (errno ? std::strerror(errno) : "flush failed");
        ok = false;
      }
    }
    if (!ok) failed_.store(true);
    lock.lock();
  }
}

bool OutputsWriter::write_line(const actors::RequestOutput& r) {
  nlohmann::json j{{"request_id", r.request_id},
                   {"finish_reason", actors::finish_reason_name(r.finish_reason)},
                   {"prompt_ids", r.prompt},
                   {"output_ids", r.output}};
  if (tok_) {
    j["prompt_text"] = prompt_text(r, *tok_);
    j["output_text"] = tok_->decode(r.output);
  }
  const std::string line = j.dump() + "\n";
  errno = 0;
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size()) {
    error_ = "failed writing --outputs file '" + path_ +
             "': " + (errno ? std::strerror(errno) : "short write");
    return false;
  }
  ++num_lines_;
  return true;
}

}  // namespace muflow::tools
