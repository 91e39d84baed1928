// The fused GEMM+ReduceScatter kernel, on a FusedPlan: the first half of GemvAllReduce's two-shot
// with GEMM tiles. Two task kinds:
//  1. compute block i of owner q's rows (A rows x W), straight into q's shared `partials` slot for
//     this rank when q is on this node (then a release flag in q's segment), else into staging the
//     WG sends at once. Blocks owned by other ranks go first (off-node, then on-node);
//  2. reduce block i of this rank's rows: await every rank's partial, add them in rank order into
//     y. Each reduce directly follows this rank's own compute of the block.
// Tasks start in list order, so every compute task has started before any WG waits. Consecutive
// calls alternate buffer halves (epoch parity); a rank is at most one call ahead of a peer, because
// finishing a call needs every peer's partials of that call.
#include "ops/gemm_reduce_scatter/gemm_reduce_scatter_impl.hpp"
#include "ops/gemm_reduce_scatter/gemm_reduce_scatter_plan.hpp"

namespace tilecomm::detail {

void GemmReduceScatterImpl::run_fused(const float* a, float* y) {
  FusedPlan plan(ctx);
  const int me = topo.rank, p = topo.size, my_local = topo.local_rank;
  const std::size_t reduce_base = static_cast<std::size_t>(p) * blocks;  // task ids after computes
  const bool remote_first = ctx.options.remote_first;
  for (std::size_t t : gemm_rs_order(topo, blocks, remote_first))  // shared with the simulator
    plan.add(t);
  std::vector<std::size_t> staged(p, 0);
  for (int q : ctx.destination_order(remote_first))
    if (plan.dest(q) == FusedPlan::Dest::OffNode) {
      staged[q] = plan.stage(rows_local * n);
      for (std::size_t i = 0; i < blocks; ++i)
        plan.expect_send();
    }
  for (int s = 0; s < p; ++s)  // partials of my blocks from off-node ranks: the proxy receives
    if (plan.dest(s) == FusedPlan::Dest::OffNode)
      for (std::size_t i = 0; i < blocks; ++i)
        plan.expect_recv(partials(my_local, plan.parity(), s) + block_row0(i) * n,
                         static_cast<int>(block_rows(i) * n), MPI_FLOAT, s, static_cast<int>(i),
                         partial_flags[my_local], s * blocks + i);
  plan.run([&](const WorkgroupContext& wg, std::size_t task) {
    if (task >= reduce_base) {
      const std::size_t i = task - reduce_base, at = block_row0(i) * n;
      plan.reduce_partials(
          wg, partial_flags[my_local], blocks, i,
          [&](int s) { return partials(my_local, plan.parity(), s) + at; }, y + at,
          block_rows(i) * n, "GemmReduceScatter: partial (source rank * blocks + block)");
      return;
    }
    const int q = static_cast<int>(task / blocks);
    const std::size_t i = task % blocks, at = block_row0(i) * n, rows = block_rows(i);
    const auto bytes = static_cast<std::int64_t>(rows * n * sizeof(float));
    const std::size_t row0 = q * rows_local + block_row0(i);  // in A
    if (plan.dest(q) == FusedPlan::Dest::OffNode) {
      float* staging = plan.staged(staged[q]) + at;
      gemm_rows(a, row0, rows, staging, n);
      plan.send(wg, staging, static_cast<int>(rows * n), MPI_FLOAT, q, static_cast<int>(i),
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
