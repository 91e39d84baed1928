#pragma once
// One call of an operator's fused kernel: the task list of a persistent kernel, the communication
// it implies, and the primitives a task uses to move a tile.
//
// A tile bound for rank `dst` goes one of three ways (Dest): it stays on this rank, it is stored
// into an on-node rank's symmetric segment and released with a flag, or it is handed to the proxy,
// which sends it over MPI; the receiving rank's proxy has pre-posted a receive straight into where
// the tile belongs and raises the same flag when it lands. So a consumer only ever waits for a flag
// to reach the call's epoch: await() does that, polling MPI while it waits when the tile comes from
// off-node.
//
// Host side: build the order (add), name the receives and the number of sends the call expects
// (expect_recv, expect_sends), reserve staging for off-node tiles (stage), then run(body).

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "ops/common/op_context.hpp"
#include "runtime/wait.hpp"

namespace tilecomm::detail {

class FusedPlan {
 public:
  enum class Dest { Self, OnNode, OffNode };

  /// Starts a call: takes the context's next epoch and forgets the proxy's previous call.
  explicit FusedPlan(OpContext& ctx);

  std::uint32_t epoch() const { return epoch_; }
  /// 0 or 1: which half of double-buffered regions this call uses.
  int parity() const { return static_cast<int>(epoch_ & 1u); }
  /// How a tile reaches `rank`.
  Dest dest(int rank) const {
    return rank == ctx_.topo.rank    ? Dest::Self
           : ctx_.topo.on_node(rank) ? Dest::OnNode
                                     : Dest::OffNode;
  }

  // ---- host, before run() ----
  /// Appends task `task` to the kernel's order: tasks start in the order they are added.
  void add(std::size_t task) { order_.push_back(task); }
  std::size_t tasks() const { return order_.size(); }
  /// Reserves `floats` of staging for an off-node tile; returns its offset for staged().
  std::size_t stage(std::size_t floats);
  /// A receive of this call (proxy, off-node `src` only): on completion flags[idx] = epoch.
  void expect_recv(void* buf, int count, MPI_Datatype type, int src, int tag, TileFlags& flags,
                   std::size_t idx);
  /// One more send() this call will make.
  void expect_send() { ++sends_; }
  /// How await() pauses between polls. Default: WaitPolicy::backoff() for an on-node tile (spin
  /// TILECOMM_SPIN_US), backoff(2.0) for an off-node one (the waiter polls MPI); a latency-bound
  /// call sets WaitPolicy::latency() instead.
  void set_wait(const WaitPolicy& policy) { wait_ = policy; }
  /// Whether run()'s host thread drives the proxy: whenever the call has one (off-node peers).
  /// Then work the host does after run() returns — every receive and send of the call completed,
  /// the kernel ended — needs no other thread: a latency-bound call's last step can run there, so
  /// that one thread polls MPI at the call's end, not a waiting WG and the proxy taking turns on a
  /// one-core rank.
  bool host_drives_proxy() const { return ctx_.proxy() != nullptr; }
  /// The host's trace lane (one past the device's WG lanes), for work the host does itself.
  WorkgroupContext host_context() const;

  // ---- in a task ----
  /// Staging reserved by stage(): untouched by anything else until the call ends.
  float* staged(std::size_t offset) const { return staging_->data() + offset; }
  /// Releases a tile stored into on-node rank `dst`'s segment: flags[idx] = epoch.
  /// `tile` and `bytes` label the trace mark.
  void release(const WorkgroupContext& wg, TileFlags& flags, std::size_t idx, int dst,
               std::int64_t tile, std::int64_t bytes) const;
  /// Hands a finished off-node tile to the proxy (MPI_Isend now, completed by the proxy).
  void send(const WorkgroupContext& wg, const void* buf, int count, MPI_Datatype type, int dst,
            int tag, std::int64_t tile, std::int64_t bytes) const;
  /// Waits until flags[idx] reaches the epoch: a tile from `src` stored (on-node) or received by
  /// the proxy (off-node). Error(Timeout) naming `what` after the communicator's deadline.
  void await(const WorkgroupContext& wg, int src, const TileFlags& flags, std::size_t idx,
             const char* what) const;

  /// The owner's step of a fused reduction: awaits the partial of every rank s (flag
  /// s * stride + idx of `flags`) and reduces them into `dst` (`count` floats) in
  /// ReduceOrder::Canonical: node sums in node order, each in ascending rank order (one node, or
  /// every node after the first of one rank: plain rank order) — the order of the collectives'
  /// canonical algorithms, so fused and unfused modes agree bitwise.
  /// With `node_sum_from`, each other node n sends one partial, already its node sum (its ranks'
  /// partials added in ascending rank order, as this would add them), from rank
  /// node_sum_from(n): that rank's flag and partial_of() stand for the whole node. The result is
  /// the same bits.
  void reduce_partials(const WorkgroupContext& wg, const TileFlags& flags, std::size_t stride,
                       std::size_t idx, const std::function<const float*(int rank)>& partial_of,
                       float* dst, std::size_t count, const char* what,
                       const std::function<int(int node)>& node_sum_from = {}) const;

  /// A relay's node sum (node_relay, plan_layout.hpp): awaits the partial of every rank of this
  /// node (local rank l's flag flag_of(l) of `flags`) and adds them in ascending rank order, the
  /// node's term of ReduceOrder::Canonical, into `dst` (`count` floats).
  void sum_node_partials(const WorkgroupContext& wg, const TileFlags& flags,
                         const std::function<std::size_t(int local)>& flag_of,
                         const std::function<const float*(int local)>& partial_of, float* dst,
                         std::size_t count, const char* what) const;

  /// Launches the persistent kernel over the order and returns when it has ended and, when the
  /// call spans nodes, every receive and send of the call has completed. Without off-node peers
  /// the kernel runs one WG per slot. With them the host thread, idle until the kernel ends
  /// anyway, drives the proxy (Proxy::run: background-paced polls, latency-paced once the call's
  /// last send has been posted), and the kernel runs one WG per CU: a second WG on a CU computes
  /// nothing faster, and the proxy needs a share of the cores. A proxy WG in a slot of its own (the
  /// first design) cost a kernel launch and a stream synchronisation per call and polled at a
  /// fixed 60 us pace: the MoE layer across 2 emulated nodes ran 0.8x sequential's speed with it,
  /// 1.0-1.1x without (docs/ops.md, "Who progresses MPI"). If a task throws, the other WGs go on
  /// and the proxy serves them until the kernel has ended; then it cancels what is still pending
  /// and the task's error is rethrown.
  void run(const TaskFn& body);

 private:
  OpContext& ctx_;
  std::uint32_t epoch_;
  std::vector<std::size_t> order_;
  std::size_t sends_ = 0;
  std::vector<float>* staging_;
  std::optional<WaitPolicy> wait_;
  std::size_t staged_floats_ = 0;
};

}  // namespace tilecomm::detail
