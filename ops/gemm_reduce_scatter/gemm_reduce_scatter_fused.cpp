// The fused GEMM+ReduceScatter kernel, on a FusedPlan: the first half of GemvAllReduce's two-shot
// with GEMM tiles, and node sums across nodes. Three task kinds:
//  1. compute block i of owner q's rows (A rows x W), straight into q's shared `partials` slot for
//     this rank when q is on this node (then a release flag in q's segment). For an off-node q:
//     into the relay partials of q's relay on this node (then a release flag there) when this node
//     has several ranks, else into staging the WG sends at once. Blocks owned by other ranks go
//     first (off-node, then on-node);
//  2. node sum (this rank is q's relay): await the node's partials of q's block i, add them in rank
//     order into staging and send the sum to q: one block per owner crosses the node's link, not
//     one per rank;
//  3. reduce block i of this rank's rows: await the partials of this node's ranks and one node sum
//     per other node, add them in ReduceOrder::Canonical into y. Each reduce directly follows this
//     rank's own compute of the block.
// Tasks start in list order (gemm_rs_order: a relay only waits for computes that come no later in
// the order its node shares), so no WG waits for one that waits for it. Consecutive calls
// alternate buffer halves (epoch parity); a rank is at most one call ahead of a peer, because
// finishing a call needs every peer's partials of that call.
#include "ops/common/plan_layout.hpp"
#include "ops/gemm_reduce_scatter/gemm_reduce_scatter_impl.hpp"
#include "ops/gemm_reduce_scatter/gemm_reduce_scatter_plan.hpp"

namespace tilecomm::detail {

void GemmReduceScatterImpl::run_fused(const float* a, float* y) {
  FusedPlan plan(ctx);
  const int me = topo.rank, p = topo.size, my_local = topo.local_rank;
  const std::size_t reduce_base = static_cast<std::size_t>(p) * blocks;  // task ids after computes
  const std::size_t node_sum_base = reduce_base + blocks;
  const bool sums = relay_slots > 0;
  for (std::size_t t : gemm_rs_order(topo, blocks, ctx.options.remote_first))  // as the simulator
    plan.add(t);
  // Staging: what this rank sends (its partials when alone on its node, else its node sums).
  std::vector<std::size_t> staged(p, 0);
  for (int q = 0; q < p; ++q)
    if (plan.dest(q) == FusedPlan::Dest::OffNode &&
        (!sums || node_relay(topo, q, topo.node) == me)) {
      staged[q] = plan.stage(rows_local * n);
      for (std::size_t i = 0; i < blocks; ++i)
        plan.expect_send();
    }
  // One partial of each of my blocks from every other node (its node sum): the proxy receives.
  for (int node = 0; node < topo.num_nodes; ++node) {
    if (node == topo.node) continue;
    const int s = node_relay(topo, me, node);
    for (std::size_t i = 0; i < blocks; ++i)
      plan.expect_recv(partials(my_local, plan.parity(), s) + block_row0(i) * n,
                       static_cast<int>(block_rows(i) * n), MPI_FLOAT, s, static_cast<int>(i),
                       partial_flags[my_local], s * blocks + i);
  }
  plan.run([&](const WorkgroupContext& wg, std::size_t task) {
    if (task >= node_sum_base) {  // my node's partials of owner q's block i, added and sent
      const int q = static_cast<int>((task - node_sum_base) / blocks);
      const std::size_t i = (task - node_sum_base) % blocks, at = block_row0(i) * n;
      const std::size_t count = block_rows(i) * n;
      const int slot = relay_slot[q];
      float* sum = plan.staged(staged[q]) + at;
      plan.sum_node_partials(
          wg, relay_flags[my_local], [&](int l) { return relay_flag(slot, l, i); },
          [&](int l) { return relay_partials(my_local, plan.parity(), slot, l) + at; }, sum, count,
          "GemmReduceScatter: partial for a relayed owner (slot * local ranks + local rank) * "
          "blocks + block");
      plan.send(wg, sum, static_cast<int>(count), MPI_FLOAT, q, static_cast<int>(i),
                static_cast<std::int64_t>(task), static_cast<std::int64_t>(count * sizeof(float)));
      return;
    }
    if (task >= reduce_base) {
      const std::size_t i = task - reduce_base, at = block_row0(i) * n;
      plan.reduce_partials(
          wg, partial_flags[my_local], blocks, i,
          [&](int s) { return partials(my_local, plan.parity(), s) + at; }, y + at,
          block_rows(i) * n, "GemmReduceScatter: partial (source rank * blocks + block)",
          [&](int node) { return node_relay(topo, me, node); });
      return;
    }
    const int q = static_cast<int>(task / blocks);
    const std::size_t i = task % blocks, at = block_row0(i) * n, rows = block_rows(i);
    const auto bytes = static_cast<std::int64_t>(rows * n * sizeof(float));
    const std::size_t row0 = q * rows_local + block_row0(i);  // in A
    if (plan.dest(q) == FusedPlan::Dest::OffNode && !sums) {
      float* staging = plan.staged(staged[q]) + at;
      gemm_rows(a, row0, rows, staging, n);
      plan.send(wg, staging, static_cast<int>(rows * n), MPI_FLOAT, q, static_cast<int>(i),
                static_cast<std::int64_t>(task), bytes);
      return;
    }
    if (plan.dest(q) == FusedPlan::Dest::OffNode) {  // into the relay's segment (maybe mine)
      const int relay = node_relay(topo, q, topo.node), relay_local = topo.local_of[relay];
      gemm_rows(a, row0, rows,
                relay_partials(relay_local, plan.parity(), relay_slot[q], my_local) + at, n);
      plan.release(wg, relay_flags[relay_local], relay_flag(relay_slot[q], my_local, i), relay,
                   static_cast<std::int64_t>(task), bytes);
      return;
    }
    const int q_local = topo.local_of[q];  // straight into the owner's segment
    gemm_rows(a, row0, rows, partials(q_local, plan.parity(), me) + at, n);
    plan.release(wg, partial_flags[q_local], static_cast<std::size_t>(me) * blocks + i, q,
                 static_cast<std::int64_t>(task), bytes);
  });
}

}  // namespace tilecomm::detail
