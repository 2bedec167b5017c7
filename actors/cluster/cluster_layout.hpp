#pragma once
/// \file
/// Where the actors of a run spanning processes live (#18), and how a process delivers the
/// actor messages it receives. Process 0 is the driver (coordinator, and the devices no
/// worker lists); worker i of `[[cluster.workers]]` is process i + 1 and hosts the devices it
/// lists. A barrier collective has a replica in each process that hosts one of its sources
/// or destinations (collective.hpp).

#include <caf/all.hpp>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "actors/cluster/actor_codec.hpp"
#include "actors/cluster/remote_actor.hpp"
#include "actors/process_layout.hpp"
#include "actors/run_context.hpp"
#include "engine/topology/topology.hpp"
#include "transport/cluster/frame.hpp"

namespace muflow::actors::cluster {

/// [num_devices] the process index that hosts each device of `topology`. Pure; any thread.
std::vector<uint32_t> device_processes(const engine::topology::Topology& topology);

/// Re-placement after losing worker processes (#18 item 5): `device_process` with every device
/// of a process in `lost` moved to the surviving worker that hosts the fewest devices at that
/// point (ties: the lowest process index), devices in index order; to the driver (process 0)
/// when no worker of 1..num_processes-1 survives. Devices of survivors stay where they are,
/// so a survivor keeps its weights and KV layout. Pure; any thread.
std::vector<uint32_t> replace_lost_devices(std::vector<uint32_t> device_process,
                                           const std::set<uint32_t>& lost, uint32_t num_processes);

/// The device-to-process map as the control plane carries it in `cl_setup`: process indices
/// in decimal, comma-separated, device 0 first ("1,2,1,0"). Pure; any thread.
std::string format_device_processes(const std::vector<uint32_t>& device_process);

/// Parses `format_device_processes`'s text for a topology of `num_devices` devices and
/// `num_processes` processes (driver + workers). Errors: InvalidArgument naming the entry
/// that is not a process index below `num_processes`, or a count other than `num_devices`.
/// Bounded: never allocates more than `num_devices` entries. Pure; any thread.
absl::StatusOr<std::vector<uint32_t>> parse_device_processes(const std::string& text,
                                                             size_t num_devices,
                                                             uint32_t num_processes);

/// Decoder bounds for a run of `config` (activation width = hidden size, logits = vocab,
/// K/V width = kv heads × head dim, token counts from the scheduler's batch limits).
ActorMessageLimits limits_for(const engine::model::ModelConfig& config,
                              const engine::topology::Topology& topology);

/// The layout of process `self` in run attempt `run` (the driver's number, frame.hpp): hosts
/// the devices `device_process` gives it (and the coordinator when it is process 0); remote
/// handles send through `outbox`.
/// Used by one thread while the run is built; then read-only (any thread).
class ClusterLayout final : public ProcessLayout {
 public:
  ClusterLayout(caf::actor_system& sys, uint32_t self, std::vector<uint32_t> device_process,
                std::shared_ptr<Outbox> outbox, uint64_t run)
      : sys_(sys),
        self_(self),
        run_(run),
        device_process_(std::move(device_process)),
        outbox_(std::move(outbox)) {}

  bool hosts_device(int64_t device) const override { return process_of(device) == self_; }
  bool hosts_driver() const override { return self_ == 0; }
  caf::actor remote_in(const ActorAddress& address, uint32_t process) override;

  uint32_t self() const override { return self_; }
  /// The run attempt this layout belongs to: frames stamped with another are not delivered.
  uint64_t run() const { return run_; }
  /// The process of `device` (0 for -1: the driver's actors); process 0 for an index out of
  /// range.
  uint32_t process_of(int64_t device) const override {
    return device >= 0 && static_cast<size_t>(device) < device_process_.size()
               ? device_process_[static_cast<size_t>(device)]
               : 0;
  }
  /// Every remote handle made so far, with its process (to stop them, or to report the ones
  /// of a process that died).
  const std::vector<std::pair<uint32_t, caf::actor>>& remotes() const { return remotes_; }

 private:
  caf::actor_system& sys_;
  const uint32_t self_;
  const uint64_t run_;
  const std::vector<uint32_t> device_process_;
  std::shared_ptr<Outbox> outbox_;
  std::vector<std::pair<uint32_t, caf::actor>> remotes_;
};

/// What `deliver_actor_frame` did with a frame it did not refuse.
enum class FrameDelivery {
  kDelivered,  ///< sent to its actor
  kOtherRun,   ///< of another run attempt: dropped unread (the caller counts it as late)
};

/// Delivers one kActorMessage frame received from process `from` to its actor in this
/// process of the run `ctx` (built with `layout`): decodes it within `limits`, checks that its
/// destination is an actor this process hosts (a collective: a replica that gathers here, see
/// graph_builder.hpp `place_collective`), for a token batch that its rows are as wide as the
/// model's rows (hidden size, or twice that with a shared expert's output), for its rows and
/// a contribution's that they name DP ranks of the run (`TokenMeta::origin_rank` in
/// [0, num_ranks)), and for reports to
/// the coordinator that they fit the run (device and block in range, one entry per device,
/// finite times); then sends it (anonymously) to that actor, a kReports bundle as its reports
/// one by one, in order, and only when every one of them passed. A frame stamped with another
/// run attempt than `layout.run()` is neither decoded nor delivered (kOtherRun): a straggler
/// of an attempt that failed when a worker was lost, which the next attempt's actors, under
/// the same addresses, must not see (#18 item 5: outputs identical to a fault-free run).
/// Errors: InvalidArgument naming what was wrong (the frame is dropped). Any thread (the data
/// plane's progress thread) while `ctx` lives.
absl::StatusOr<FrameDelivery> deliver_actor_frame(const RunContext& ctx,
                                                  const ClusterLayout& layout,
                                                  const transport::cluster::FrameView& frame,
                                                  const ActorMessageLimits& limits);

/// Fails the run `ctx` with `what` (e.g. a rejected frame: the run cannot finish without the
/// message, so it ends with an error instead of waiting forever): the coordinator gets
/// `failed` — directly on the driver, through `outbox` (may be null: nothing sent) from a
/// worker. Any thread while `ctx` lives.
void fail_run(const RunContext& ctx, const ClusterLayout& layout, Outbox* outbox,
              const std::string& what);

}  // namespace muflow::actors::cluster
