// The one-shot fused GEMV+AllReduce kernel: the latency path for small outputs (decode).
//
// Every rank computes all of its partial W_r x_r, row block by row block, into its own slot of its
// shared segment and releases each block with a flag the moment it is done; on-node peers read it
// there (no copy on the way). Then every rank reduces every block itself, straight into y: one
// communication step instead of two-shot's two, no owner, no gather.
//
// Across nodes the link is the scarce resource, so each node sends each block once per other node,
// not once per rank: block b has a leader on every node, leader(n, b) = node n's ranks[b mod size].
// On a node of several ranks the leader sums the node's partials of b (ascending rank order) and
// sends that node sum to leader(m, b) of every other node m; on a node of one rank, the rank's own
// partial goes out the moment it is computed. A received node sum lands (proxy) in the leader's
// segment, where its on-node peers read it. Link bytes per call and direction: M floats per node
// pair, as the hierarchical AllReduce of sequential mode.
//
// Order of additions, every element: the node sums in node order, each node sum in ascending rank
// order (on one node: plain rank order). One rank per node: plain rank order, as two-shot.
//
// Task list: compute 0 .. B-1, each node reduce after the compute `lag` (= WGs) later (by then the
// node's ranks have computed that block too), the rest of the node reduces, then one task of final
// reduces, 0 .. B-1 in turn: a single waiter per rank (the reduces are a few us; several WGs
// polling for late peers would take the cores those peers need on an oversubscribed node). A task
// waits only for tasks listed before it on every rank (computes never wait; node reduces wait for
// computes; final reduces for node reduces), and tasks start in list order: no deadlock, even with
// one WG. The waits sleep at most 16 us at a time (WaitPolicy::latency); across nodes the host
// thread drives the MPI proxy and the kernel runs one WG per CU (FusedPlan::run).
//
// Across nodes the final reduces run on the host thread once the proxy has completed every
// receive and send and the kernel has ended (FusedPlan::host_drives_proxy): otherwise the final
// task's WG and the host's proxy both poll MPI while the call waits for its last blocks, and on a
// one-core rank they took turns on the core (~10 us per hand-over in traces). Measured at
// decode's shape across 2 emulated nodes x 1 rank: fused / sequential 1.05-1.09 -> 1.01-1.03
// (docs/ops.md, "The latency path"). The simulator still replays the final as the kernel's last
// task: the same work, after the same waits.
//
// Calls alternate buffer halves (epoch parity). A rank starts call e + 2, and so rewrites the half
// of call e, only after its final reduces of call e + 1, which needed every rank's call e + 1
// partials (directly, or through a node sum): each rank had then finished call e, reads included.
#include "collectives/reduce.hpp"
#include "ops/gemv_allreduce/gemv_allreduce_impl.hpp"

namespace tilecomm::detail {
namespace {

enum class Kind : std::size_t { Compute, NodeReduce, Final };  // = GemvOneShotTask
static_assert(static_cast<std::size_t>(Kind::Final) ==
              static_cast<std::size_t>(GemvOneShotTask::Final));

}  // namespace

struct GemvAllReduceImpl::OneShotCall {
  FusedPlan& plan;
  GemvWeights w;
  const float* x;
  float* y;
  bool node_sums = false;     // several nodes, and this node has several ranks
  std::vector<int> peers_of;  // other nodes, rotated to start after this one
  std::size_t task(Kind kind, std::size_t b, std::size_t blocks) const {
    return static_cast<std::size_t>(kind) * blocks + b;
  }
};

int GemvAllReduceImpl::leader(int node, std::size_t b) const {
  return gemv_leader(topo, node, b);
}

void GemvAllReduceImpl::one_shot_send(const WorkgroupContext& wg, const OneShotCall& call,
                                      const float* block, std::size_t b) {
  for (int n : call.peers_of)
    call.plan.send(wg, block, static_cast<int>(elems(b)), MPI_FLOAT, leader(n, b),
                   static_cast<int>(b), static_cast<std::int64_t>(b),
                   static_cast<std::int64_t>(elems(b) * sizeof(float)));
}

void GemvAllReduceImpl::one_shot_compute(const WorkgroupContext& wg, const OneShotCall& call,
                                         std::size_t b) {
  const FusedPlan& plan = call.plan;
  const int me = topo.rank, my_local = topo.local_rank;
  float* mine = partials(my_local, plan.parity(), me) + elem0(b);
  gemv_tile(call.w, call.x, mine, b);
  plan.release(wg, partial_flags[my_local], static_cast<std::size_t>(me) * blocks + b, me,
               static_cast<std::int64_t>(b), static_cast<std::int64_t>(elems(b) * sizeof(float)));
  if (!call.node_sums) one_shot_send(wg, call, mine, b);  // alone on my node: my partial goes out
}

void GemvAllReduceImpl::one_shot_node_reduce(const WorkgroupContext& wg, const OneShotCall& call,
                                             std::size_t b) {
  const FusedPlan& plan = call.plan;
  const std::vector<int>& mine = topo.node_ranks[topo.node];
  std::vector<const float*> sources(mine.size());
  for (std::size_t i = 0; i < mine.size(); ++i) {
    const int s = mine[i], at = topo.local_of[s];
    plan.await(wg, s, partial_flags[at], static_cast<std::size_t>(s) * blocks + b,
               "GemvAllReduce: partial (one-shot node sum; source rank * blocks + block)");
    sources[i] = partials(at, plan.parity(), s) + elem0(b);
  }
  float* sum = reduced(topo.local_rank, plan.parity()) + elem0(b);
  reduce_n(sum, reinterpret_cast<const void* const*>(sources.data()),
           static_cast<int>(sources.size()), elems(b), DataType::Float32, ReduceOp::Sum);
  reduced_flags[topo.local_rank].signal(b, plan.epoch());
  wg.mark("node sum", static_cast<std::int64_t>(b), topo.rank);
  one_shot_send(wg, call, sum, b);
}

void GemvAllReduceImpl::one_shot_final(const WorkgroupContext& wg, const OneShotCall& call,
                                       std::size_t b) {
  const FusedPlan& plan = call.plan;
  const char* what = "GemvAllReduce: partial or node sum (one-shot; source * blocks + block)";
  std::vector<const float*> sources;
  for (int n = 0; n < topo.num_nodes; ++n) {
    const int lead = leader(topo.node, b), at = topo.local_of[lead];
    if (n != topo.node) {  // node n's sum, received by this node's leader of b
      const int first = topo.node_ranks[n][0];
      const std::size_t idx = static_cast<std::size_t>(first) * blocks + b;
      // An off-node leader of mine is impossible; a leader that is me waits through the proxy.
      plan.await(wg, lead == topo.rank ? leader(n, b) : lead, partial_flags[at], idx, what);
      sources.push_back(partials(at, plan.parity(), first) + elem0(b));
    } else if (call.node_sums) {  // this node's sum, made by its leader of b
      plan.await(wg, lead, reduced_flags[at], b, what);
      sources.push_back(reduced(at, plan.parity()) + elem0(b));
    } else {  // every partial of this node, in rank order
      for (int s : topo.node_ranks[n]) {
        const int sl = topo.local_of[s];
        plan.await(wg, s, partial_flags[sl], static_cast<std::size_t>(s) * blocks + b, what);
        sources.push_back(partials(sl, plan.parity(), s) + elem0(b));
      }
    }
  }
  reduce_n(call.y + elem0(b), reinterpret_cast<const void* const*>(sources.data()),
           static_cast<int>(sources.size()), elems(b), DataType::Float32, ReduceOp::Sum);
  wg.mark("block reduced", static_cast<std::int64_t>(b), topo.rank);
}

void GemvAllReduceImpl::run_one_shot(GemvWeights w, const float* x, float* y) {
  FusedPlan plan(ctx);
  plan.set_wait(WaitPolicy::latency());
  OneShotCall call{plan, w, x, y, false, {}};
  call.node_sums = ctx.spans_nodes() && topo.local_size > 1;
  for (int i = 1; i < topo.num_nodes; ++i)
    call.peers_of.push_back((topo.node + i) % topo.num_nodes);

  // Blocks this rank sends off-node: all of them when alone on its node, else those it leads.
  const int me = topo.rank, my_local = topo.local_rank;
  auto leads = [&](std::size_t b) { return leader(topo.node, b) == me; };
  const bool host_final = plan.host_drives_proxy();
  for (std::size_t t : gemv_one_shot_order(topo, grid(), ctx.wg_slots()))
    if (!host_final || static_cast<Kind>(t / blocks) != Kind::Final)
      plan.add(t);  // Kind and GemvOneShotTask number the kinds alike

  for (std::size_t b = 0; b < blocks && ctx.spans_nodes(); ++b) {
    if (!leads(b)) continue;
    for (int n : call.peers_of) {  // node n's sum (or its one rank's partial) of b
      const int first = topo.node_ranks[n][0];
      plan.expect_recv(partials(my_local, plan.parity(), first) + elem0(b),
                       static_cast<int>(elems(b)), MPI_FLOAT, leader(n, b), static_cast<int>(b),
                       partial_flags[my_local], static_cast<std::size_t>(first) * blocks + b);
      plan.expect_send();
    }
  }
  plan.run([&](const WorkgroupContext& wg, std::size_t t) {
    const std::size_t b = t % blocks;
    switch (static_cast<Kind>(t / blocks)) {
      case Kind::Compute:
        return one_shot_compute(wg, call, b);
      case Kind::NodeReduce:
        return one_shot_node_reduce(wg, call, b);
      case Kind::Final:
        for (std::size_t f = 0; f < blocks; ++f)
          one_shot_final(wg, call, f);
        return;
    }
  });
  if (!host_final) return;
  const WorkgroupContext host = plan.host_context();
  for (std::size_t f = 0; f < blocks; ++f)
    one_shot_final(host, call, f);
}

}  // namespace tilecomm::detail
