// GemmAllToAll in the simulator (sim_gemm_alltoall.hpp): the operator's plan of the call, and
// what each task of its kernels does.
#include "ops/model/sim_gemm_alltoall.hpp"

#include <algorithm>

#include "ops/common/block_route.hpp"
#include "ops/common/op_util.hpp"
#include "ops/common/plan_layout.hpp"
#include "ops/gemm_alltoall/gemm_alltoall_plan.hpp"
#include "ops/model/sim_collectives.hpp"
#include "ops/model/sim_ops_util.hpp"

namespace tilecomm::model {

using namespace tilecomm::detail;
using namespace tilecomm::model::sim_detail;

namespace {

// Rank topo.rank's plan of the synthetic call, as the operator makes it: the tiling, and the
// routing from every rank's synthetic counts (the operator's capacities as fused_perf sizes
// them: every rank returns at most its m rows).
GemmAllToAllPlan plan_of(const SimSetup& s, const Topology& topo) {
  const std::size_t per_rank = s.shape.tables, experts = per_rank * std::size_t(topo.size);
  GemmAllToAllPlan plan(per_rank, s.shape.n);
  plan.topology = &topo;
  plan.first_expert.resize(std::size_t(topo.size) + 1);
  for (std::size_t q = 0; q <= std::size_t(topo.size); ++q)
    plan.first_expert[q] = q * per_rank;
  plan.set_tiling(s.shape.k, s.options.tile ? s.options.tile : s.shape.tile);
  plan.set_max_rows_out(s.shape.m);
  plan.slot_rows = s.shape.m;
  const std::vector<std::size_t> send = synthetic_moe_routing(s.shape.m, topo.rank, experts);
  std::vector<std::size_t> recv(per_rank * std::size_t(topo.size));
  for (int src = 0; src < topo.size; ++src) {
    const std::vector<std::size_t> theirs = synthetic_moe_routing(s.shape.m, src, experts);
    for (std::size_t e = 0; e < per_rank; ++e)
      recv[e * std::size_t(topo.size) + std::size_t(src)] =
          theirs[plan.first_expert[topo.rank] + e];
  }
  plan.derive_routing(recv, send, false);
  return plan;
}

double tile_s(const Profile& p, const SimSetup& s, const GemmTile& t) {
  const double rows = double(t.row1 - t.row0), cols = double(t.col1 - t.col0);
  return std::max(0.0, p.gemm.at(rows, rows * double(s.shape.k) * cols));
}

// The per-call header's words and the exchange's zero-copy word (every rank: shape.tables experts).
double header_bytes(const SimSetup& s) {
  return double(gemm_alltoall_header_words(s.shape.tables) + 1) * sizeof(std::uint64_t);
}

// A message between this rank and `peer`: through the node's segment (a flag) or MPI.
SimPath path_to(const Topology& topo, int peer) {
  return topo.on_node(peer) ? SimPath::Flag : SimPath::Mpi;
}

}  // namespace

SimRank gemm_alltoall_fused(const Profile& p, const SimSetup& s, const Topology& topo) {
  const GemmAllToAllPlan plan = plan_of(s, topo);
  const std::vector<GemmTile> tiles =
      plan.make_tiles(0, plan.local_experts, destination_order(topo, s.options.remote_first));
  std::vector<BlockRoute> produced;
  for (const GemmTile& t : tiles)
    produced.push_back(plan.result_route(t));
  const std::vector<BlockRoute> arrivals = plan.result_arrivals(source_order(topo));
  const ExchangeTasks ids{produced.size(), arrivals.size(), topo.size, topo.rank, true, 0};
  SimRank rank;
  rank.slots = fused_wgs(s, topo);
  for (std::size_t t : ids.order()) {
    SimTask task;
    if (t < ids.produced) {  // produce(): on-node, after the source's header (place())
      const BlockRoute& b = produced[t];
      task.label = "gemm";
      task.tile = static_cast<long long>(t);
      task.peer = b.peer;
      if (b.peer != topo.rank && topo.on_node(b.peer))
        task.steps.push_back(SimStep::await(b.peer, kHeader));
      task.steps.push_back(SimStep::compute(tile_s(p, s, tiles[t])));
      if (b.peer != topo.rank)
        task.steps.push_back(SimStep::send(b.peer, kBlock | b.flag,
                                           double(b.block.floats()) * kFloat, path_to(topo, b.peer),
                                           true));
    } else if (t < ids.send_headers()) {  // arrive(): the header, the block, its copy into y
      const BlockRoute& a = arrivals[t - ids.produced];
      task.label = "arrive";
      task.tile = static_cast<long long>(a.flag);
      task.steps.push_back(SimStep::await(a.peer, kHeader));
      task.steps.push_back(SimStep::await(a.peer, kBlock | a.flag));
      if (topo.on_node(a.peer))
        task.steps.push_back(SimStep::compute(copy_seconds(p, double(a.block.floats()) * kFloat)));
    } else if (t < ids.check_headers()) {  // send_header()
      const int q = static_cast<int>(t - ids.send_headers());
      task.label = "header";
      task.peer = q;
      task.steps.push_back(SimStep::send(q, kHeader, header_bytes(s), path_to(topo, q), true));
    } else {  // check_header()
      const int q = static_cast<int>(t - ids.check_headers());
      task.label = "check header";
      task.steps.push_back(SimStep::await(q, kHeader));
    }
    rank.tasks.push_back(std::move(task));
  }
  return rank;
}

std::vector<double> gemm_alltoall_chunk_tiles(const Profile& p, const SimSetup& s,
                                              const Topology& topo, std::size_t c, std::size_t nc) {
  const GemmAllToAllPlan plan = plan_of(s, topo);
  std::vector<double> out;
  for (const GemmTile& t :
       plan.make_tiles(split_begin(plan.local_experts, nc, c),
                       split_begin(plan.local_experts, nc, c + 1), destination_order(topo, false)))
    out.push_back(tile_s(p, s, t));
  return out;
}

std::vector<SimStep> gemm_alltoall_chunk_collective(const Profile& p, const SimSetup& s,
                                                    const Topology& topo, std::size_t c,
                                                    std::size_t nc, std::uint64_t base,
                                                    double hot) {
  const GemmAllToAllPlan plan = plan_of(s, topo);
  const int n = topo.size;
  const std::size_t ne = plan.local_experts, e0 = split_begin(ne, nc, c),
                    e1 = split_begin(ne, nc, c + 1);
  const double row = double(s.shape.n) * kFloat;
  std::vector<double> send(n, 0), recv(n, 0);
  for (int q = 0; q < n; ++q) {
    const std::size_t sq = std::size_t(q);
    send[q] = double(plan.route.send_row[sq * ne + e1] - plan.route.send_row[sq * ne + e0]) * row;
    const std::size_t g0 = plan.first_expert[sq] + split_begin(plan.experts_of(q), nc, c);
    const std::size_t g1 = plan.first_expert[sq] + split_begin(plan.experts_of(q), nc, c + 1);
    recv[q] = double(plan.y_row(g1) - plan.y_row(g0)) * row;
  }
  std::vector<SimStep> steps;
  alltoallv_steps(steps, topo, send, recv, p, base, hot, false);  // into y: no reshape
  return steps;
}

}  // namespace tilecomm::model
