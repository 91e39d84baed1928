// The fused GEMV+AllReduce kernel (two-shot at tile granularity), on a FusedPlan.
//
// One persistent kernel runs these kinds of tasks:
//  1. compute row block b, straight into the destination: the owner's shared `partials` slot when
//     the owner is on this node (then a release flag in the owner's segment); for an off-node
//     owner, the relay partials of its relay on this node when the node has several ranks (node
//     sums, ops/common/plan_layout.hpp), else staging the WG sends at once. Blocks owned by other
//     ranks go first (off-node, then on-node), so their communication overlaps the rest of the
//     compute;
//  2. node sum (this rank relays the block's off-node owner): await the node's partials, add them
//     in rank order, send the sum to the owner: one block per owner crosses the node's link;
//  3. reduce an owned block: wait for this node's partials and one node sum per other node, reduce
//     in ReduceOrder::Canonical into the shared `reduced` buffer, flag it, send it to one rank per
//     other node (the block's relay there), copy it into y. Each owned block's reduce directly
//     follows its compute in the list, so reduced blocks leave early too;
//  4. gather each block owned elsewhere: wait for the owner's flag and copy (on-node), or for the
//     block from off-node: the proxy received it straight into y (a node of one rank), or into the
//     relay's `reduced` (its proxy raised the relay's reduced flag), whence the node's ranks copy.
// Tasks start in list order, so every compute task has started before any WG waits, and a relay
// only waits for blocks its node's ranks compute no later (gemv_two_shot_order): no deadlock even
// with one WG. Consecutive calls alternate buffer halves (epoch parity); a rank can only be one
// call ahead of any peer, because each call waits for every peer's partials.
#include <cstring>

#include "ops/common/plan_layout.hpp"
#include "ops/gemv_allreduce/gemv_allreduce_impl.hpp"

namespace tilecomm::detail {
namespace {

enum class Kind : std::size_t { Compute, Reduce, Gather, NodeSum };  // = GemvTwoShotTask
static_assert(static_cast<std::size_t>(Kind::NodeSum) ==
              static_cast<std::size_t>(GemvTwoShotTask::NodeSum));

}  // namespace

struct GemvAllReduceImpl::FusedCall {
  FusedPlan& plan;
  GemvWeights w;
  const float* x;
  float* y;
  std::size_t staged = 0;  // off-node partials: staging laid out like y
  std::size_t task(Kind kind, std::size_t b, std::size_t blocks) const {
    return static_cast<std::size_t>(kind) * blocks + b;
  }
};

void GemvAllReduceImpl::map_fused_segment() {
  const std::size_t p = topo.size;
  SegmentLayout layout;
  const std::size_t partial_flags_offset = layout.add(TileFlags::bytes_for(p * blocks));
  const std::size_t reduced_flags_offset = layout.add(TileFlags::bytes_for(blocks));
  const std::size_t arrived_flags_offset = layout.add(TileFlags::bytes_for(blocks));
  partials_offset = layout.add(2 * p * m * n * sizeof(float));
  reduced_offset = layout.add(2 * m * n * sizeof(float));
  node_sums = algorithm == FusedAlgorithm::TwoShot && relays_partials(topo);
  const std::size_t local = static_cast<std::size_t>(topo.local_size);
  std::size_t relay_flags_offset = 0;
  if (node_sums) {
    relay_flags_offset = layout.add(TileFlags::bytes_for(local * blocks));
    relay_offset = layout.add(2 * local * m * n * sizeof(float));
  }
  ctx.map_segment(layout);
  partial_flags = ctx.flags_at(partial_flags_offset, p * blocks);
  reduced_flags = ctx.flags_at(reduced_flags_offset, blocks);
  arrived_flags = std::move(ctx.flags_at(arrived_flags_offset, blocks)[topo.local_rank]);
  if (node_sums) relay_flags = ctx.flags_at(relay_flags_offset, local * blocks);
}

// Task order, and the proxy's part of the call. Receives: for my blocks, one partial (its node
// sum) from every other node; reduced blocks from off-node owners, straight into y (a node of one
// rank) or, for the owners I relay, into my `reduced`. Sends: my partials to off-node owners (a
// node of one rank) or the node sums I relay, and my reduced blocks to one rank per other node.
void GemvAllReduceImpl::plan_fused(FusedPlan& plan, FusedCall& call) {
  const int me = topo.rank, my_local = topo.local_rank;
  for (std::size_t t : gemv_two_shot_order(topo, grid(), ctx.options.remote_first))
    plan.add(t);  // Kind and GemvTwoShotTask number the kinds alike
  if (!ctx.spans_nodes()) return;
  call.staged = plan.stage(m * n);
  for (std::size_t b = 0; b < blocks; ++b) {
    const int o = owner(b), count = static_cast<int>(elems(b));
    if (o == me) {
      for (int node = 0; node < topo.num_nodes; ++node) {
        if (node == topo.node) continue;
        const int s = node_relay(topo, me, node);
        plan.expect_recv(partials(my_local, plan.parity(), s) + elem0(b), count, MPI_FLOAT, s,
                         static_cast<int>(b), partial_flags[my_local], s * blocks + b);
        plan.expect_send();
      }
    } else if (!topo.on_node(o) && !node_sums) {
      plan.expect_recv(call.y + elem0(b), count, MPI_FLOAT, o, static_cast<int>(blocks + b),
                       arrived_flags, b);
      plan.expect_send();
    } else if (!topo.on_node(o) && node_relay(topo, o, topo.node) == me) {
      plan.expect_recv(reduced(my_local, plan.parity()) + elem0(b), count, MPI_FLOAT, o,
                       static_cast<int>(blocks + b), reduced_flags[my_local], b);
      plan.expect_send();
    }
  }
}

void GemvAllReduceImpl::fused_compute(const WorkgroupContext& wg, const FusedCall& call,
                                      std::size_t b) {
  const FusedPlan& plan = call.plan;
  const int o = owner(b), me = topo.rank;
  const auto bytes = static_cast<std::int64_t>(elems(b) * sizeof(float));
  if (plan.dest(o) == FusedPlan::Dest::OffNode && node_sums) {  // into the relay's segment
    const int relay = node_relay(topo, o, topo.node), relay_local = topo.local_of[relay];
    gemv_tile(call.w, call.x,
              relay_partials(relay_local, plan.parity(), topo.local_rank) + elem0(b), b);
    plan.release(wg, relay_flags[relay_local], topo.local_rank * blocks + b, relay,
                 static_cast<std::int64_t>(b), bytes);
    return;
  }
  if (plan.dest(o) == FusedPlan::Dest::OffNode) {
    float* staging = plan.staged(call.staged) + elem0(b);
    gemv_tile(call.w, call.x, staging, b);
    plan.send(wg, staging, static_cast<int>(elems(b)), MPI_FLOAT, o, static_cast<int>(b),
              static_cast<std::int64_t>(b), bytes);
    return;
  }
  const int owner_local = topo.local_of[o];  // straight into the owner's segment
  gemv_tile(call.w, call.x, partials(owner_local, plan.parity(), me) + elem0(b), b);
  plan.release(wg, partial_flags[owner_local], static_cast<std::size_t>(me) * blocks + b, o,
               static_cast<std::int64_t>(b), bytes);
}

void GemvAllReduceImpl::fused_reduce(const WorkgroupContext& wg, const FusedCall& call,
                                     std::size_t b) {
  const FusedPlan& plan = call.plan;
  const int my_local = topo.local_rank;
  float* red = reduced(my_local, plan.parity()) + elem0(b);
  plan.reduce_partials(
      wg, partial_flags[my_local], blocks, b,
      [&](int s) { return partials(my_local, plan.parity(), s) + elem0(b); }, red, elems(b),
      "GemvAllReduce: partial (source rank * blocks + block)",
      [&](int node) { return node_relay(topo, topo.rank, node); });
  reduced_flags[my_local].signal(b, plan.epoch());
  for (int node = 0; node < topo.num_nodes; ++node)
    if (node != topo.node)
      plan.send(wg, red, static_cast<int>(elems(b)), MPI_FLOAT, node_relay(topo, topo.rank, node),
                static_cast<int>(blocks + b), static_cast<std::int64_t>(b),
                static_cast<std::int64_t>(elems(b) * sizeof(float)));
  std::memcpy(call.y + elem0(b), red, elems(b) * sizeof(float));
  wg.mark("block reduced", static_cast<std::int64_t>(b), topo.rank);
}

void GemvAllReduceImpl::fused_gather(const WorkgroupContext& wg, const FusedCall& call,
                                     std::size_t b) {
  const FusedPlan& plan = call.plan;
  const int o = owner(b);
  if (plan.dest(o) == FusedPlan::Dest::OffNode && !node_sums) {  // received straight into y
    plan.await(wg, o, arrived_flags, b, "GemvAllReduce: reduced block from off-node owner");
    return;
  }
  // From the owner's `reduced` (on-node), or from its relay's here (the relay's proxy received it;
  // the relay itself awaits its proxy).
  const int from = plan.dest(o) == FusedPlan::Dest::OffNode ? node_relay(topo, o, topo.node) : o;
  const int from_local = topo.local_of[from];
  plan.await(wg, from == topo.rank ? o : from, reduced_flags[from_local], b,
             "GemvAllReduce: reduced block");
  std::memcpy(call.y + elem0(b), reduced(from_local, plan.parity()) + elem0(b),
              elems(b) * sizeof(float));
}

void GemvAllReduceImpl::fused_node_sum(const WorkgroupContext& wg, const FusedCall& call,
                                       std::size_t b) {
  const FusedPlan& plan = call.plan;
  const int my_local = topo.local_rank;
  float* sum = plan.staged(call.staged) + elem0(b);
  plan.sum_node_partials(
      wg, relay_flags[my_local], [&](int l) { return l * blocks + b; },
      [&](int l) { return relay_partials(my_local, plan.parity(), l) + elem0(b); }, sum, elems(b),
      "GemvAllReduce: partial for a relayed owner (local rank * blocks + block)");
  plan.send(wg, sum, static_cast<int>(elems(b)), MPI_FLOAT, owner(b), static_cast<int>(b),
            static_cast<std::int64_t>(b), static_cast<std::int64_t>(elems(b) * sizeof(float)));
}

void GemvAllReduceImpl::run_fused(GemvWeights w, const float* x, float* y) {
  FusedPlan plan(ctx);
  FusedCall call{plan, w, x, y};
  plan_fused(plan, call);
  plan.run([&](const WorkgroupContext& wg, std::size_t t) {
    const std::size_t b = t % blocks;
    switch (static_cast<Kind>(t / blocks)) {
      case Kind::Compute:
        return fused_compute(wg, call, b);
      case Kind::Reduce:
        return fused_reduce(wg, call, b);
      case Kind::Gather:
        return fused_gather(wg, call, b);
      case Kind::NodeSum:
        return fused_node_sum(wg, call, b);
    }
  });
}

}  // namespace tilecomm::detail
