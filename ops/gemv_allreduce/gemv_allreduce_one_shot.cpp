// The one-shot fused GEMV+AllReduce kernel: the latency path for small outputs (decode).
//
// Every rank computes all of its partial W_r x_r, row block by row block, into its own slot of its
// shared segment, and publishes each block the moment it is done: a release flag for its on-node
// peers (who read the block in place: no copy on the way), one MPI message per off-node peer
// (handed to the proxy at once; the peer's proxy receives it straight into that peer's slot for
// this rank). Then every rank reduces every block itself, in rank order, straight into y. One
// communication step instead of two-shot's two (owner reduce, then the reduced block back), no
// owner, no gather: what a short call needs. Bytes per rank: (p - 1) x M read on the node, M per
// off-node peer sent; so it is chosen only for small M (GemvAllReduceImpl: kOneShotMaxBytes).
//
// Task list: compute 0 .. blocks-1, then reduce 0 .. blocks-1 (every rank in the same order, so
// block b is ready on all ranks at about the same time). Tasks start in order, so every compute
// task has started before any WG waits: no deadlock with one WG. The waits expect their flag
// within about one call (WaitPolicy::latency of the previous call's length): they yield instead of
// sleeping, so a short call is not stretched by 20-250 us sleeps.
//
// Calls alternate buffer halves (epoch parity). A rank starts call e + 2, and so rewrites the half
// of call e, only after it has reduced call e + 1, i.e. seen every peer's call e + 1 partials: each
// peer had then finished call e, its reads of this rank's half included.
#include <chrono>

#include "collectives/reduce.hpp"
#include "ops/gemv_allreduce/gemv_allreduce_impl.hpp"

namespace tilecomm::detail {

struct GemvAllReduceImpl::OneShotCall {
  FusedPlan& plan;
  GemvWeights w;
  const float* x;
  float* y;
  std::vector<int> off_node;  // off-node peers, in the rotated destination order
};

void GemvAllReduceImpl::one_shot_compute(const WorkgroupContext& wg, const OneShotCall& call,
                                         std::size_t b) {
  const FusedPlan& plan = call.plan;
  const int me = topo.rank, my_local = topo.local_rank;
  float* mine = partials(my_local, plan.parity(), me) + row0(b);
  gemv_tile(call.w, call.x, mine, b);
  const auto bytes = static_cast<std::int64_t>(rows(b) * sizeof(float));
  plan.release(wg, partial_flags[my_local], static_cast<std::size_t>(me) * blocks + b, me,
               static_cast<std::int64_t>(b), bytes);
  for (int q : call.off_node)
    plan.send(wg, mine, static_cast<int>(rows(b)), MPI_FLOAT, q, static_cast<int>(b),
              static_cast<std::int64_t>(b), bytes);
}

void GemvAllReduceImpl::one_shot_reduce(const WorkgroupContext& wg, const OneShotCall& call,
                                        std::size_t b) {
  const FusedPlan& plan = call.plan;
  const int p = topo.size, my_local = topo.local_rank;
  const float* on_stack[64];
  std::vector<const float*> on_heap;
  const float** sources = p <= 64 ? on_stack : (on_heap.resize(p), on_heap.data());
  for (int s = 0; s < p; ++s) {
    // An on-node rank's partial is read in its own segment; an off-node one was received into mine.
    const int at = topo.on_node(s) ? topo.local_of[s] : my_local;
    plan.await(wg, s, partial_flags[at], static_cast<std::size_t>(s) * blocks + b,
               "GemvAllReduce (one-shot): partial (source rank * blocks + block)");
    sources[s] = partials(at, plan.parity(), s) + row0(b);
  }
  reduce_n(call.y + row0(b), reinterpret_cast<const void* const*>(sources), p, rows(b),
           DataType::Float32, ReduceOp::Sum);  // rank order, as every mode
  wg.mark("block reduced", static_cast<std::int64_t>(b), topo.rank);
}

void GemvAllReduceImpl::run_one_shot(GemvWeights w, const float* x, float* y) {
  const auto start = std::chrono::steady_clock::now();
  FusedPlan plan(ctx);
  plan.set_wait(WaitPolicy::latency(last_one_shot_us));
  OneShotCall call{plan, w, x, y, {}};
  for (int q : ctx.destination_order(true))
    if (plan.dest(q) == FusedPlan::Dest::OffNode) call.off_node.push_back(q);
  for (std::size_t b = 0; b < blocks; ++b)
    plan.add(b);
  for (std::size_t b = 0; b < blocks; ++b)
    plan.add(blocks + b);
  const int my_local = topo.local_rank;
  for (int s : ctx.source_order())
    if (plan.dest(s) == FusedPlan::Dest::OffNode)
      for (std::size_t b = 0; b < blocks; ++b)
        plan.expect_recv(partials(my_local, plan.parity(), s) + row0(b), static_cast<int>(rows(b)),
                         MPI_FLOAT, s, static_cast<int>(b), partial_flags[my_local],
                         static_cast<std::size_t>(s) * blocks + b);
  for (std::size_t i = 0; i < call.off_node.size() * blocks; ++i)
    plan.expect_send();
  plan.run([&](const WorkgroupContext& wg, std::size_t t) {
    if (t < blocks) return one_shot_compute(wg, call, t);
    one_shot_reduce(wg, call, t - blocks);
  });
  last_one_shot_us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace tilecomm::detail
