#include "transport/cluster/data_plane.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_format.h"
#include "spdlog/spdlog.h"

namespace muflow::transport::cluster {
namespace {

absl::Status ucx_error(const char* call, ucs_status_t status) {
  return absl::UnavailableError(
      absl::StrFormat("UCX %s failed: %s", call, ucs_status_string(status)));
}

// UCX settings under which a peer's death on this host is not fatal to this process (every
// message eager, no cross-memory attach), each unless the user set it (its UCX_ variable wins).
// Why, and what is left for InfiniBand: transport/cluster/README.md, "A dead peer on one host
// is not fatal"; the cost: bench/README.md, "A sender killed mid-rendezvous".
absl::Status survive_dead_senders(ucp_config_t* config) {
  for (const auto& [name, value] : {std::pair<const char*, const char*>{"RNDV_THRESH", "inf"},
                                    std::pair<const char*, const char*>{"TLS", "^cma"}}) {
    if (std::getenv(absl::StrFormat("UCX_%s", name).c_str()) != nullptr) continue;
    const ucs_status_t st = ucp_config_modify(config, name, value);
    if (st != UCS_OK) {
      return ucx_error(absl::StrFormat("ucp_config_modify(%s=%s)", name, value).c_str(), st);
    }
  }
  return absl::OkStatus();
}

}  // namespace

struct DataPlane::Impl {
  Options options;
  Handler handler;
  Rejected rejected;
  ucp_context_h context = nullptr;
  ucp_worker_h worker = nullptr;
  int ucx_fd = -1;  // the worker's event fd (owned by UCX)
  int cmd_fd = -1;  // eventfd: commands queued

  std::mutex mu;
  std::deque<std::function<void()>> commands;  // guarded by mu
  bool stopping = false;                       // guarded by mu
  std::atomic<bool> has_commands{false};       // set with every queued command (and a kick)
  std::thread thread;
  // Held by whichever thread is in UCX (the worker is UCS_THREAD_MODE_SERIALIZED): the progress
  // thread while it runs commands, progresses and arms the worker (never while it sleeps in
  // poll), or a sender posting its send inline (`try_send_inline`, which only try-locks it).
  std::mutex ucx_mu;
  // The data plane whose ucx_mu this thread may hold: set for good on the progress thread,
  // and on an inline sender while it holds it. A send from such a thread (a handler's answer,
  // a `done` called inside `send`) is queued: try-locking a mutex it owns would be undefined.
  static thread_local const Impl* ucx_holder;

  // Guarded by ucx_mu.
  absl::flat_hash_map<uint32_t, ucp_ep_h> eps;
  int64_t inflight_sends = 0;
  int64_t inflight_recvs = 0;

  std::atomic<uint64_t> sent_messages{0}, sent_bytes{0}, received_messages{0}, received_bytes{0},
      rejected_messages{0}, failed_sends{0}, abandoned_receives{0}, posted_inline{0};
  std::atomic<int64_t> receives_pending{0};  // mirrors inflight_recvs for stats()

  struct SendOp {
    Impl* impl = nullptr;
    uint32_t peer = 0;
    bool abandoned = false;     // its endpoint was closed first (close_ep)
    std::vector<char> message;  // contiguous: the receiver fetches a rendezvous in one get
    uint64_t bytes = 0;
    SendDone done;
  };
  struct RecvOp {
    Impl* impl = nullptr;
    std::unique_ptr<char[]> buf;
    size_t length = 0;  // announced by the probe
    uint64_t tag = 0;
    bool reject = false;
    bool complete = false;
    bool abandoned = false;  // its sender was dropped first (close_ep): never delivered
    ucs_status_t status = UCS_OK;
  };
  // Sends UCX has not completed, by peer, and those abandoned when their endpoint was closed
  // (freed when UCX completes them or after the UCX worker is destroyed). Progress thread.
  absl::flat_hash_map<uint32_t, absl::flat_hash_set<SendOp*>> live_sends;
  absl::flat_hash_set<SendOp*> abandoned_sends;
  // Receives by sender tag, each in the order UCX matched them (= that sender's send order).
  // A rendezvous receive completes after eager ones matched behind it; delivering from the
  // head of its sender's queue only keeps the send order. One queue per sender, so that a
  // receive that never completes (its sender was killed mid-message: UCX without peer-failure
  // handling may never finish it) holds back that sender's later messages only, not every
  // other process's (#18: a survivor stopped answering the driver's pings after a kill -9).
  absl::flat_hash_map<uint64_t, std::deque<std::unique_ptr<RecvOp>>> recv_order;
  // Receives of dropped senders that UCX had not completed: kept (UCX may still write their
  // buffers or call recv_cb) until the worker is destroyed.
  std::vector<std::unique_ptr<RecvOp>> abandoned_recvs;

  ~Impl() {
    if (worker) ucp_worker_destroy(worker);
    abandoned_recvs.clear();
    recv_order.clear();
    for (SendOp* op : abandoned_sends) delete op;
    if (context) ucp_cleanup(context);
    if (cmd_fd >= 0) ::close(cmd_fd);
  }

  // Queues `fn` for the progress thread; false once stopping.
  bool post(std::function<void()> fn) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (stopping) return false;
      commands.push_back(std::move(fn));
      has_commands.store(true, std::memory_order_release);
    }
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(cmd_fd, &one, sizeof one);
    return true;
  }

  // Runs `fn` on the progress thread and waits until it ran; false (not run) once stopping.
  // Never from the progress thread itself (it would wait for itself).
  bool run_and_wait(const std::function<void()>& fn) {
    std::promise<void> done;
    auto ran = done.get_future();
    if (!post([&fn, &done] {
          fn();
          done.set_value();
        })) {
      return false;
    }
    ran.wait();
    return true;
  }

  // Wakes the progress thread without a command (it then progresses the worker once).
  void kick() {
    has_commands.store(true, std::memory_order_release);
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(cmd_fd, &one, sizeof one);
  }

  // Posts a send from the calling thread when nothing is in the way: no other thread in UCX
  // and no command queued (those go first: one peer's messages keep the order of `send`).
  // The message then leaves at once (an eager send, or a rendezvous' request to send) instead
  // of after the progress thread's wakeup, which on a machine whose cores are busy with
  // stages takes 0.1-2 ms (bench/README.md, #18). The progress thread is kicked to complete
  // it. False (nothing done; the caller queues it) otherwise.
  bool try_send_inline(uint32_t peer, std::vector<char>& message, SendDone& done) {
    if (!options.inline_sends || ucx_holder == this) return false;
    std::unique_lock<std::mutex> ucx(ucx_mu, std::try_to_lock);
    if (!ucx.owns_lock()) return false;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (stopping || !commands.empty()) return false;
    }
    posted_inline.fetch_add(1, std::memory_order_relaxed);
    // Restored after: this may be another plane's progress thread (its own mark stays).
    const Impl* const holder_before = ucx_holder;
    ucx_holder = this;
    const bool pending = start_send(peer, std::move(message), std::move(done));
    ucx_holder = holder_before;
    // Before the unlock: once it is released, the plane may be stopped and destroyed.
    if (pending) kick();  // UCX completes it, or sends it once the transport has room
    return true;
  }

  static void send_cb(void* request, ucs_status_t status, void* user_data) {
    auto* op = static_cast<SendOp*>(user_data);
    op->impl->finish_send(op, status);
    ucp_request_free(request);
  }

  void finish_send(SendOp* op, ucs_status_t status) {
    std::unique_ptr<SendOp> owned(op);
    if (op->abandoned) {  // counted and reported when its endpoint was closed
      abandoned_sends.erase(op);
      return;
    }
    if (auto it = live_sends.find(op->peer); it != live_sends.end()) {
      it->second.erase(op);
      if (it->second.empty()) live_sends.erase(it);
    }
    --inflight_sends;
    if (status == UCS_OK) {
      sent_messages.fetch_add(1, std::memory_order_relaxed);
      sent_bytes.fetch_add(op->bytes, std::memory_order_relaxed);
      if (op->done) op->done(absl::OkStatus());
    } else {
      failed_sends.fetch_add(1, std::memory_order_relaxed);
      const std::string what = absl::StrFormat("%s: a %d-byte send to process %d failed: %s",
                                               options.name, op->bytes, op->peer,
                                               ucs_status_string(status));
      spdlog::error(what);
      if (op->done) op->done(absl::UnavailableError(what));
    }
  }

  // Force-closes the endpoint to `peer` (if any) and forgets it. Sends to it that are still in
  // flight are abandoned: UCX (without UCP_ERR_HANDLING_MODE_PEER, which would cost the
  // shared-memory transports on one host: UCX 1.13 then picks TCP) may never complete a send
  // to a dead peer, so each one's `done` gets Cancelled now, it no longer counts as in flight,
  // and its buffers are kept until the UCX worker is destroyed (or UCX completes it after all).
  void close_ep(uint32_t peer) {
    auto it = eps.find(peer);
    if (it == eps.end()) return;
    ucp_ep_h ep = it->second;
    eps.erase(it);
    force_close(ep);
    auto live = live_sends.find(peer);
    if (live == live_sends.end()) return;
    for (SendOp* op : live->second) {
      --inflight_sends;
      failed_sends.fetch_add(1, std::memory_order_relaxed);
      op->abandoned = true;
      abandoned_sends.insert(op);
      if (op->done) {
        op->done(absl::CancelledError(absl::StrFormat(
            "%s: the endpoint to process %d was closed with the send in flight", options.name,
            peer)));
        op->done = nullptr;
      }
    }
    live_sends.erase(live);
  }

  // Forgets the receives from `peer` not delivered yet (drop_peer: the peer died): one UCX has
  // not completed (it died mid-message) is kept until the worker is destroyed, complete ones
  // queued behind it are dropped with it (delivering them would break the sender's order).
  // Counted, logged. Not on a reconnect (connect): a live peer's messages stay queued.
  void abandon_recvs(uint64_t peer) {
    auto q = recv_order.find(peer);
    if (q == recv_order.end()) return;
    std::deque<std::unique_ptr<RecvOp>> ops = std::move(q->second);
    recv_order.erase(q);
    for (std::unique_ptr<RecvOp>& op : ops) {
      --inflight_recvs;
      abandoned_receives.fetch_add(1, std::memory_order_relaxed);
      if (!op->complete) {
        op->abandoned = true;
        abandoned_recvs.push_back(std::move(op));
      }
    }
    receives_pending.store(inflight_recvs, std::memory_order_relaxed);
    spdlog::warn("{}: dropped process {} with {} of its messages not delivered (the first one "
                 "unfinished)",
                 options.name, peer, ops.size());
  }

  // DataPlane::drop_peer's work (progress thread).
  void drop(uint32_t peer) {
    close_ep(peer);
    abandon_recvs(peer);
  }

  void force_close(ucp_ep_h ep) {
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = UCP_EP_CLOSE_FLAG_FORCE;
    ucs_status_ptr_t st = ucp_ep_close_nbx(ep, &param);
    if (st != nullptr && !UCS_PTR_IS_ERR(st)) {
      while (ucp_request_check_status(st) == UCS_INPROGRESS) ucp_worker_progress(worker);
      ucp_request_free(st);
    }
  }

  // Posts one send (ucx_mu held); true while UCX has it in flight (it completes in send_cb).
  bool start_send(uint32_t peer, std::vector<char> message, SendDone done) {
    auto it = eps.find(peer);
    if (it == eps.end()) {
      failed_sends.fetch_add(1, std::memory_order_relaxed);
      if (done) {
        done(absl::FailedPreconditionError(
            absl::StrFormat("%s: no endpoint to process %d (connect first)", options.name, peer)));
      }
      return false;
    }
    auto op = std::make_unique<SendOp>();
    op->impl = this;
    op->peer = peer;
    op->message = std::move(message);
    op->bytes = op->message.size();
    op->done = std::move(done);
    ucp_request_param_t param{};
    // An eager send may complete inside the call (nullptr below): then no progress is needed.
    param.op_attr_mask =
        UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_DATATYPE;
    param.cb.send = &Impl::send_cb;
    param.user_data = op.get();
    param.datatype = ucp_dt_make_contig(1);
    ++inflight_sends;
    // Registered before the call: UCX may complete the send (send_cb) before it returns.
    live_sends[peer].insert(op.get());
    ucs_status_ptr_t st = ucp_tag_send_nbx(it->second, op->message.data(), op->message.size(),
                                           options.process, &param);
    if (st == nullptr) {
      finish_send(op.release(), UCS_OK);
      return false;
    }
    if (UCS_PTR_IS_ERR(st)) {
      finish_send(op.release(), UCS_PTR_STATUS(st));
      return false;
    }
    op.release();  // send_cb owns it now (and may have run already)
    return true;
  }

  static void recv_cb(void* request, ucs_status_t status, const ucp_tag_recv_info_t*,
                      void* user_data) {
    auto* op = static_cast<RecvOp*>(user_data);
    op->impl->finish_recv(op, status);
    ucp_request_free(request);
  }

  void finish_recv(RecvOp* op, ucs_status_t status) {
    op->complete = true;
    op->status = status;
    if (op->abandoned) return;  // its sender was dropped; freed with the worker
    // Delivers the sender's completed head messages in order (`op` among them: it is freed
    // once delivered, so its tag is read first). The queue is looked up again for each: the
    // handler may drop a peer (abandon_recvs erases its queue).
    const uint64_t tag = op->tag;
    for (;;) {
      auto q = recv_order.find(tag);
      if (q == recv_order.end() || q->second.empty() || !q->second.front()->complete) return;
      std::unique_ptr<RecvOp> head = std::move(q->second.front());
      q->second.pop_front();
      if (q->second.empty()) recv_order.erase(q);
      deliver(*head);
    }
  }

  void deliver(RecvOp& op_ref) {
    RecvOp* op = &op_ref;
    const ucs_status_t status = op->status;
    --inflight_recvs;
    receives_pending.store(inflight_recvs, std::memory_order_relaxed);
    if (op->reject || status != UCS_OK) {
      rejected_messages.fetch_add(1, std::memory_order_relaxed);
      const std::string why =
          op->reject ? absl::StrFormat("larger than the %d-byte limit (max_message_bytes)",
                                       options.max_message_bytes)
                     : absl::StrFormat("the receive failed: %s", ucs_status_string(status));
      spdlog::error("{}: rejected a {}-byte message from process {}: {} (not delivered)",
                    options.name, op->length, op->tag, why);
      // A failed receive is a transport error (e.g. a sender that died mid-message), which the
      // runtime's liveness checks handle (a lost worker is recovered from); an oversized
      // message comes from a live sender and can never be delivered.
      if (op->reject && rejected) rejected(op->tag, op->length, why);
      return;
    }
    received_messages.fetch_add(1, std::memory_order_relaxed);
    received_bytes.fetch_add(op->length, std::memory_order_relaxed);
    Received r;
    r.tag = op->tag;
    r.bytes = std::move(op->buf);
    r.size = op->length;
    if (handler) handler(std::move(r));
  }

  // Receives every message UCX has matched; true when there was one.
  bool poll_incoming() {
    bool any = false;
    for (;;) {
      ucp_tag_recv_info_t info{};
      ucp_tag_message_h msg = ucp_tag_probe_nb(worker, 0, 0, 1, &info);
      if (msg == nullptr) return any;
      any = true;
      auto op = std::make_unique<RecvOp>();
      op->impl = this;
      op->length = info.length;
      op->tag = info.sender_tag;
      size_t count = info.length;
      if (info.length > static_cast<uint64_t>(options.max_message_bytes)) {
        op->reject = true;  // bound before allocating: drain into nothing
        count = 0;
      } else {
        op->buf = std::make_unique_for_overwrite<char[]>(info.length == 0 ? 1 : info.length);
      }
      ucp_request_param_t param{};
      param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                           UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
      param.cb.recv = &Impl::recv_cb;
      param.user_data = op.get();
      param.datatype = ucp_dt_make_contig(1);
      ++inflight_recvs;
      receives_pending.store(inflight_recvs, std::memory_order_relaxed);
      RecvOp* raw = op.get();
      recv_order[raw->tag].push_back(std::move(op));
      ucs_status_ptr_t st = ucp_tag_msg_recv_nbx(worker, raw->buf.get(), count, msg, &param);
      if (st == nullptr) {
        finish_recv(raw, UCS_OK);
      } else if (UCS_PTR_IS_ERR(st)) {
        finish_recv(raw, UCS_PTR_STATUS(st));
      }
    }
  }

  // Runs queued commands; true when stopping was requested.
  bool run_commands() {
    if (!has_commands.exchange(false, std::memory_order_acq_rel)) {
      std::lock_guard<std::mutex> lock(mu);
      return stopping;
    }
    uint64_t drained = 0;
    [[maybe_unused]] ssize_t n = ::read(cmd_fd, &drained, sizeof drained);
    std::deque<std::function<void()>> batch;
    bool stop = false;
    {
      std::lock_guard<std::mutex> lock(mu);
      batch.swap(commands);
      stop = stopping;
    }
    for (auto& fn : batch) fn();
    return stop;
  }

  // Progresses UCX and takes new messages; true when anything happened.
  bool progress_all() {
    bool any = false;
    while (ucp_worker_progress(worker) != 0) any = true;
    return poll_incoming() || any;
  }

  // Progress loop: after activity it keeps progressing for `spin_us` (a message stream's next
  // message is usually that close), then arms the worker and sleeps in poll(2) until UCX or a
  // command wakes it.
  void loop() {
    ucx_holder = this;
    const auto spin = std::chrono::microseconds(options.spin_us);
    auto last_activity = std::chrono::steady_clock::now();
    for (;;) {
      std::unique_lock<std::mutex> ucx(ucx_mu);
      const bool had_commands = has_commands.load(std::memory_order_acquire);
      const bool stop = run_commands();
      const bool active = progress_all() || had_commands;
      if (stop) break;
      const auto now = std::chrono::steady_clock::now();
      if (active) last_activity = now;
      if (now - last_activity < spin) continue;
      const ucs_status_t armed = ucp_worker_arm(worker);
      ucx.unlock();  // an inline send may come now: it kicks cmd_fd, so poll returns
      if (armed == UCS_ERR_BUSY) continue;  // events pending: progress again
      pollfd fds[2] = {{ucx_fd, POLLIN, 0}, {cmd_fd, POLLIN, 0}};
      const int rc = ::poll(fds, 2, armed == UCS_OK ? -1 : 10);
      if (rc < 0 && errno != EINTR) {
        spdlog::error("{}: poll failed: {}", options.name, std::strerror(errno));
      }
      if (rc > 0 && (fds[1].revents & POLLIN) != 0) {
        // Drained here too: a command or kick whose flag run_commands took just before its
        // eventfd write would otherwise leave the fd readable and this loop spinning.
        uint64_t drained = 0;
        [[maybe_unused]] ssize_t n = ::read(cmd_fd, &drained, sizeof drained);
      }
      last_activity = std::chrono::steady_clock::now();  // woken: spin for what follows
    }
    shutdown_on_thread();
  }

  // Progress thread, at stop: lets in-flight sends finish (bounded), closes endpoints.
  void shutdown_on_thread() {
    std::lock_guard<std::mutex> ucx(ucx_mu);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while ((inflight_sends > 0) && std::chrono::steady_clock::now() < deadline) {
      (void)progress_all();
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    if (inflight_sends > 0) {
      spdlog::warn("{}: stopping with {} sends still in flight", options.name, inflight_sends);
    }
    std::vector<uint32_t> peers;
    for (const auto& [peer, ep] : eps) peers.push_back(peer);
    for (uint32_t peer : peers) close_ep(peer);
    // Outstanding receives are cancelled by the worker's destruction; nothing is delivered.
    // (recv_order keeps their buffers alive until ~Impl destroyed the worker.)
    handler = nullptr;
    rejected = nullptr;
  }
};

thread_local const DataPlane::Impl* DataPlane::Impl::ucx_holder = nullptr;

absl::StatusOr<std::unique_ptr<DataPlane>> DataPlane::create(Options options, Handler handler,
                                                             Rejected rejected) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->handler = std::move(handler);
  impl->rejected = std::move(rejected);

  ucp_config_t* config = nullptr;
  ucs_status_t st = ucp_config_read(nullptr, nullptr, &config);
  if (st != UCS_OK) return ucx_error("ucp_config_read", st);
  if (absl::Status fault_safe = survive_dead_senders(config); !fault_safe.ok()) {
    ucp_config_release(config);
    return fault_safe;
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
  st = ucp_init(&params, config, &impl->context);
  ucp_config_release(config);
  if (st != UCS_OK) return ucx_error("ucp_init", st);

  ucp_worker_params_t wparams{};
  wparams.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE | UCP_WORKER_PARAM_FIELD_EVENTS;
  wparams.thread_mode = UCS_THREAD_MODE_SERIALIZED;  // ucx_mu serializes the threads
  wparams.events = UCP_WAKEUP_TAG_SEND | UCP_WAKEUP_TAG_RECV | UCP_WAKEUP_RX | UCP_WAKEUP_TX;
  st = ucp_worker_create(impl->context, &wparams, &impl->worker);
  if (st != UCS_OK) return ucx_error("ucp_worker_create", st);
  st = ucp_worker_get_efd(impl->worker, &impl->ucx_fd);
  if (st != UCS_OK) return ucx_error("ucp_worker_get_efd", st);

  ucp_address_t* addr = nullptr;
  size_t addr_len = 0;
  st = ucp_worker_get_address(impl->worker, &addr, &addr_len);
  if (st != UCS_OK) return ucx_error("ucp_worker_get_address", st);
  std::vector<char> address(reinterpret_cast<const char*>(addr),
                            reinterpret_cast<const char*>(addr) + addr_len);
  ucp_worker_release_address(impl->worker, addr);

  impl->cmd_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (impl->cmd_fd < 0) {
    return absl::UnavailableError(absl::StrFormat("eventfd failed: %s", std::strerror(errno)));
  }
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->loop(); });
  return std::unique_ptr<DataPlane>(
      new DataPlane(std::move(options), std::move(address), std::move(impl)));
}

DataPlane::DataPlane(Options options, std::vector<char> address, std::unique_ptr<Impl> impl)
    : options_(std::move(options)), address_(std::move(address)), impl_(std::move(impl)) {}

DataPlane::~DataPlane() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stopping = true;
  }
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(impl_->cmd_fd, &one, sizeof one);
  if (impl_->thread.joinable()) impl_->thread.join();
}

absl::Status DataPlane::connect(uint32_t peer, std::span<const char> address) {
  if (address.empty()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: empty UCX address for process %d", options_.name, peer));
  }
  auto copy = std::make_shared<std::vector<char>>(address.begin(), address.end());
  std::promise<absl::Status> result;
  auto fut = result.get_future();
  Impl* impl = impl_.get();
  const bool posted = impl->post([impl, peer, copy, &result] {
    ucp_ep_params_t ep_params{};
    ep_params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    ep_params.address = reinterpret_cast<const ucp_address_t*>(copy->data());
    ucp_ep_h ep = nullptr;
    ucs_status_t st = ucp_ep_create(impl->worker, &ep_params, &ep);
    if (st != UCS_OK) {
      result.set_value(ucx_error("ucp_ep_create", st));
      return;
    }
    impl->close_ep(peer);  // a reconnect replaces the old endpoint
    impl->eps.emplace(peer, ep);
    result.set_value(absl::OkStatus());
  });
  if (!posted) {
    return absl::FailedPreconditionError(absl::StrFormat("%s: stopped", options_.name));
  }
  return fut.get();
}

void DataPlane::send(uint32_t peer, std::vector<std::vector<char>> parts, SendDone done) {
  Impl* impl = impl_.get();
  // One contiguous buffer: UCX 1.13 sends a rendezvous of an iov datatype without the sender's
  // address and key (src/ucp/tag/rndv.c, ucp_tag_rndv_rts_pack packs them for a contiguous
  // datatype only), so the receiver cannot fetch it in one zero-copy get (cma on one host)
  // and the data crosses in the active-message pipeline, fragment by fragment, each needing
  // the sender's progress thread. A message of one part (the actor runtime's frames) is
  // moved, not copied.
  std::vector<char> message;
  size_t filled = 0, total = 0;
  for (const std::vector<char>& part : parts) {
    filled += part.empty() ? 0 : 1;
    total += part.size();
  }
  if (filled == 1) {
    for (std::vector<char>& part : parts) {
      if (!part.empty()) message = std::move(part);
    }
  } else if (filled > 1) {
    message.reserve(total);
    for (const std::vector<char>& part : parts)
      message.insert(message.end(), part.begin(), part.end());
  }
  if (impl->try_send_inline(peer, message, done)) return;
  auto holder =
      std::make_shared<std::pair<std::vector<char>, SendDone>>(std::move(message), std::move(done));
  const bool posted = impl->post([impl, peer, holder] {
    impl->start_send(peer, std::move(holder->first), std::move(holder->second));
  });
  if (!posted) {
    impl->failed_sends.fetch_add(1, std::memory_order_relaxed);
    if (holder->second) {
      holder->second(absl::FailedPreconditionError(absl::StrFormat("%s: stopped", options_.name)));
    }
  }
}

absl::Status DataPlane::send_and_wait(uint32_t peer, std::vector<std::vector<char>> parts) {
  auto result = std::make_shared<std::promise<absl::Status>>();
  auto fut = result->get_future();
  send(peer, std::move(parts), [result](absl::Status s) { result->set_value(std::move(s)); });
  return fut.get();
}

void DataPlane::drop_peer(uint32_t peer) {
  Impl* impl = impl_.get();
  impl->run_and_wait([impl, peer] { impl->drop(peer); });
}

void DataPlane::drop_all_peers() {
  Impl* impl = impl_.get();
  impl->run_and_wait([impl] {
    std::vector<uint64_t> peers;
    for (const auto& [peer, ep] : impl->eps) peers.push_back(peer);
    for (const auto& [tag, queue] : impl->recv_order) peers.push_back(tag);
    for (const uint64_t peer : peers) impl->drop(static_cast<uint32_t>(peer));
  });
}

DataPlaneStats DataPlane::stats() const {
  DataPlaneStats s;
  s.sent_messages = impl_->sent_messages.load();
  s.sent_bytes = impl_->sent_bytes.load();
  s.received_messages = impl_->received_messages.load();
  s.received_bytes = impl_->received_bytes.load();
  s.rejected_messages = impl_->rejected_messages.load();
  s.failed_sends = impl_->failed_sends.load();
  s.abandoned_receives = impl_->abandoned_receives.load();
  s.receives_pending = impl_->receives_pending.load();
  s.posted_inline = impl_->posted_inline.load();
  return s;
}

}  // namespace muflow::transport::cluster
