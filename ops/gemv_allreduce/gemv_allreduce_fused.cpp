// The fused GEMV+AllReduce kernel (two-shot at tile granularity), on a FusedPlan.
//
// One persistent kernel runs three kinds of tasks:
//  1. compute row block b, straight into the destination: the owner's shared `partials` slot when
//     the owner is on this node (then a release flag in the owner's segment), else staging the WG
//     sends at once. Blocks owned by other ranks go first (off-node, then on-node), so their
//     communication overlaps the rest of the compute;
//  2. reduce an owned block: wait for the p partial flags, reduce in rank order into the shared
//     `reduced` buffer, flag it, send it to off-node ranks, copy it into y. Each owned block's
//     reduce directly follows its compute in the list, so reduced blocks leave early too;
//  3. gather each block owned elsewhere: wait for the owner's flag and copy (on-node), or for the
//     proxy's arrival flag (off-node: the proxy received it straight into y).
// Tasks start in list order, so every compute task has started before any WG waits: no deadlock
// even with one WG. Consecutive calls alternate buffer halves (epoch parity); a rank can only be
// one call ahead of any peer, because each call waits for every peer's partials.
#include <cstring>

#include "ops/gemv_allreduce/gemv_allreduce_impl.hpp"

namespace tilecomm::detail {
namespace {

enum class Kind : std::size_t { Compute, Reduce, Gather };  // = GemvTwoShotTask
static_assert(static_cast<std::size_t>(Kind::Gather) ==
              static_cast<std::size_t>(GemvTwoShotTask::Gather));

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
  ctx.map_segment(layout);
  partial_flags = ctx.flags_at(partial_flags_offset, p * blocks);
  reduced_flags = ctx.flags_at(reduced_flags_offset, blocks);
  arrived_flags = std::move(ctx.flags_at(arrived_flags_offset, blocks)[topo.local_rank]);
}

// Task order, and the proxy's part of the call: partials from off-node ranks for my blocks,
// reduced blocks from off-node owners straight into y; sends: my partials to off-node owners, my
// reduced blocks to every off-node rank.
void GemvAllReduceImpl::plan_fused(FusedPlan& plan, FusedCall& call) {
  const int me = topo.rank, p = topo.size, my_local = topo.local_rank;
  for (std::size_t t : gemv_two_shot_order(topo, grid(), ctx.options.remote_first))
    plan.add(t);  // Kind and GemvTwoShotTask number the kinds alike
  if (!ctx.spans_nodes()) return;
  call.staged = plan.stage(m * n);
  int off_node_ranks = 0;
  for (int s = 0; s < p; ++s)
    off_node_ranks += topo.on_node(s) ? 0 : 1;
  for (std::size_t b = 0; b < blocks; ++b) {
    const int o = owner(b), count = static_cast<int>(elems(b));
    if (o == me) {
      for (int s = 0; s < p; ++s)
        if (!topo.on_node(s))
          plan.expect_recv(partials(my_local, plan.parity(), s) + elem0(b), count, MPI_FLOAT, s,
                           static_cast<int>(b), partial_flags[my_local], s * blocks + b);
      for (int q = 0; q < off_node_ranks; ++q)
        plan.expect_send();
    } else if (!topo.on_node(o)) {
      plan.expect_recv(call.y + elem0(b), count, MPI_FLOAT, o, static_cast<int>(blocks + b),
                       arrived_flags, b);
      plan.expect_send();
    }
  }
}

void GemvAllReduceImpl::fused_compute(const WorkgroupContext& wg, const FusedCall& call,
                                      std::size_t b) {
  const FusedPlan& plan = call.plan;
  const int o = owner(b), me = topo.rank;
  const auto bytes = static_cast<std::int64_t>(elems(b) * sizeof(float));
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
  const int p = topo.size, my_local = topo.local_rank;
  float* red = reduced(my_local, plan.parity()) + elem0(b);
  plan.reduce_partials(
      wg, partial_flags[my_local], blocks, b,
      [&](int s) { return partials(my_local, plan.parity(), s) + elem0(b); }, red, elems(b),
      "GemvAllReduce: partial (source rank * blocks + block)");
  reduced_flags[my_local].signal(b, plan.epoch());
  for (int q = 0; q < p; ++q)
    if (plan.dest(q) == FusedPlan::Dest::OffNode)
      plan.send(wg, red, static_cast<int>(elems(b)), MPI_FLOAT, q, static_cast<int>(blocks + b),
                static_cast<std::int64_t>(b), static_cast<std::int64_t>(elems(b) * sizeof(float)));
  std::memcpy(call.y + elem0(b), red, elems(b) * sizeof(float));
  wg.mark("block reduced", static_cast<std::int64_t>(b), topo.rank);
}

void GemvAllReduceImpl::fused_gather(const WorkgroupContext& wg, const FusedCall& call,
                                     std::size_t b) {
  const FusedPlan& plan = call.plan;
  const int o = owner(b);
  if (plan.dest(o) == FusedPlan::Dest::OffNode) {  // the proxy received it straight into y
    plan.await(wg, o, arrived_flags, b, "GemvAllReduce: reduced block from off-node owner");
    return;
  }
  const int owner_local = topo.local_of[o];
  plan.await(wg, o, reduced_flags[owner_local], b, "GemvAllReduce: reduced block");
  std::memcpy(call.y + elem0(b), reduced(owner_local, plan.parity()) + elem0(b),
              elems(b) * sizeof(float));
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
    }
  });
}

}  // namespace tilecomm::detail
