// GemvAllReduce's fused calls as simulator programs (sim_gemv_allreduce.hpp).
#include "ops/model/sim_gemv_allreduce.hpp"

#include <algorithm>

#include "ops/common/op_util.hpp"
#include "ops/common/plan_layout.hpp"
#include "ops/model/sim_collectives.hpp"
#include "ops/model/sim_ops_util.hpp"

namespace tilecomm::model {

using namespace tilecomm::detail;
using namespace tilecomm::model::sim_detail;

// A GEMV tile: its W streamed from memory, from the caches, or the warm share's blend of the two.
double gemv_tile_s(const Profile& p, const SimSetup& s, std::size_t rows) {
  const double w_bytes = double(s.shape.m) * double(s.shape.k) * sizeof(float);
  const double h = warm_share(p, s, p.gemv_warm, w_bytes);
  const double x1 = double(rows), x2 = double(rows) * s.shape.k * s.shape.n;
  const double cold = p.gemv.at(x1, x2), warm = h > 0 ? p.gemv_warm.at(x1, x2) : 0.0;
  return std::max(0.0, h * warm + (1 - h) * cold);
}
GemvBlocks gemv_blocks(const SimSetup& s) {
  return GemvBlocks(s.shape.m, s.shape.n, sim_tile(s), s.ranks());
}
FusedAlgorithm gemv_algorithm(const SimSetup& s) {
  return gemv_fused_algorithm(s.options.fused_algorithm, s.shape.m * s.shape.n * sizeof(float),
                              s.nodes);
}

namespace {

// Two-shot (gemv_allreduce_fused.cpp: fused_compute, fused_node_sum, fused_reduce, fused_gather).
// A relay's proxy raises its node's flag for a reduced block from off-node as it lands; here the
// relay's gather task flags its node's ranks, when it runs.
SimRank gemv_two_shot(const Profile& p, const SimSetup& s, const Topology& topo) {
  const GemvBlocks g = gemv_blocks(s);
  const int me = topo.rank;
  const bool sums = relays_partials(topo);
  const std::vector<int>& mates = topo.node_ranks[topo.node];
  SimRank rank;
  rank.slots = fused_wgs(s, topo);
  for (std::size_t t : gemv_two_shot_order(topo, g, s.options.remote_first)) {
    const std::size_t b = t % g.blocks;
    const auto kind = static_cast<GemvTwoShotTask>(t / g.blocks);
    const double bytes = double(g.elems(b)) * kFloat;
    const int o = g.owner(b);
    SimTask task;
    task.tile = static_cast<long long>(b);
    auto to = [&](int q, std::uint64_t key) {  // a block stored for / sent to rank q
      if (q == me || topo.on_node(q))
        task.steps.push_back(SimStep::send(q, key, bytes, SimPath::Flag));
      else
        task.steps.push_back(SimStep::send(q, key, bytes, SimPath::Mpi, true));
    };
    switch (kind) {
      case GemvTwoShotTask::Compute:  // into the owner's or its relay's slot, or staged and sent
        task.label = "compute";
        task.peer = topo.on_node(o) || !sums ? o : node_relay(topo, o, topo.node);
        task.steps.push_back(SimStep::compute(gemv_tile_s(p, s, g.rows(b))));
        to(task.peer, task.peer == o ? kPartial | b : kNodeSum | b);
        break;
      case GemvTwoShotTask::NodeSum:  // the node's partials, added and sent to the owner
        task.label = "node sum";
        for (int src : mates)
          task.steps.push_back(SimStep::await(src, kNodeSum | b));
        task.steps.push_back(SimStep::compute(reduce_seconds(p, double(mates.size() - 1) * bytes)));
        to(o, kPartial | b);
        break;
      case GemvTwoShotTask::Reduce: {  // this node's partials and a node sum per other node
        task.label = "reduce";
        int sources = 0;
        for (int node = 0; node < topo.num_nodes; ++node)
          for (int src : node == topo.node ? mates : std::vector<int>{node_relay(topo, me, node)}) {
            task.steps.push_back(SimStep::await(src, kPartial | b));
            ++sources;
          }
        task.steps.push_back(SimStep::compute(reduce_seconds(p, (sources - 1) * bytes)));
        for (int q : mates)  // flagged on-node, sent to one rank per other node
          if (q != me) to(q, kReduced | b);
        for (int node = 0; node < topo.num_nodes; ++node)
          if (node != topo.node) to(node_relay(topo, me, node), kReduced | b);
        task.steps.push_back(SimStep::compute(copy_seconds(p, bytes)));
        break;
      }
      case GemvTwoShotTask::Gather: {  // the owner's reduced block: copied (on-node) or received
        task.label = "gather";
        const bool relayed = sums && !topo.on_node(o);
        const int from = relayed ? node_relay(topo, o, topo.node) : o;
        task.steps.push_back(SimStep::await(from == me ? o : from, kReduced | b));
        if (relayed && from == me)
          for (int q : mates)
            if (q != me) task.steps.push_back(SimStep::send(q, kReduced | b, bytes, SimPath::Flag));
        if (topo.on_node(o) || relayed)
          task.steps.push_back(SimStep::compute(copy_seconds(p, bytes)));
        break;
      }
    }
    rank.tasks.push_back(std::move(task));
  }
  return rank;
}

// One-shot (gemv_allreduce_one_shot.cpp: one_shot_compute, one_shot_node_reduce, one_shot_final).
SimRank gemv_one_shot(const Profile& p, const SimSetup& s, const Topology& topo) {
  const GemvBlocks g = gemv_blocks(s);
  const int me = topo.rank;
  const bool node_sums = topo.num_nodes > 1 && topo.local_size > 1;
  std::vector<int> peers_of;  // other nodes, rotated
  for (int i = 1; i < topo.num_nodes; ++i)
    peers_of.push_back((topo.node + i) % topo.num_nodes);
  const std::vector<int>& mine = topo.node_ranks[topo.node];
  SimRank rank;
  // Across nodes the host's final reduces are replayed as the last task.
  rank.slots = fused_wgs(s, topo);
  auto send_off = [&](SimTask& task, std::size_t b, double bytes) {
    for (int n : peers_of)  // node n's leader of b receives into its segment: its node sees it
      task.steps.push_back(
          SimStep::send(gemv_leader(topo, n, b), kPartial | b, bytes, SimPath::Mpi, true, true));
  };
  for (std::size_t t : gemv_one_shot_order(topo, g, static_cast<std::size_t>(s.slots))) {
    const std::size_t b = t % g.blocks;
    const auto kind = static_cast<GemvOneShotTask>(t / g.blocks);
    SimTask task;
    task.tile = static_cast<long long>(b);
    const double bytes = double(g.elems(b)) * kFloat;
    switch (kind) {
      case GemvOneShotTask::Compute:
        task.label = "compute";
        task.peer = me;
        task.steps.push_back(SimStep::compute(gemv_tile_s(p, s, g.rows(b))));
        for (int r : mine)  // released in my segment: my node's ranks read it there
          task.steps.push_back(SimStep::send(r, kPartial | b, bytes, SimPath::Flag));
        if (!node_sums) send_off(task, b, bytes);
        break;
      case GemvOneShotTask::NodeReduce:
        task.label = "node sum";
        for (int r : mine)
          task.steps.push_back(SimStep::await(r, kPartial | b));
        task.steps.push_back(SimStep::compute(reduce_seconds(p, (mine.size() - 1) * bytes)));
        for (int r : mine)
          task.steps.push_back(SimStep::send(r, kNodeSum | b, bytes, SimPath::Flag));
        send_off(task, b, bytes);
        break;
      case GemvOneShotTask::Final:  // one task: every block in turn
        task.label = "final";
        for (std::size_t f = 0; f < g.blocks; ++f) {
          const double fbytes = double(g.elems(f)) * kFloat;
          int sources = 0;
          for (int n = 0; n < topo.num_nodes; ++n) {
            if (n != topo.node) {  // node n's sum, sent by its leader of f
              task.steps.push_back(SimStep::await(gemv_leader(topo, n, f), kPartial | f));
              ++sources;
            } else if (node_sums) {
              task.steps.push_back(SimStep::await(gemv_leader(topo, topo.node, f), kNodeSum | f));
              ++sources;
            } else {
              for (int r : mine) {
                task.steps.push_back(SimStep::await(r, kPartial | f));
                ++sources;
              }
            }
          }
          task.steps.push_back(SimStep::compute(reduce_seconds(p, (sources - 1) * fbytes)));
        }
        break;
    }
    rank.tasks.push_back(std::move(task));
  }
  return rank;
}

}  // namespace

SimRank gemv_allreduce_fused(const Profile& p, const SimSetup& s, const Topology& topo) {
  return gemv_algorithm(s) == FusedAlgorithm::OneShot ? gemv_one_shot(p, s, topo)
                                                      : gemv_two_shot(p, s, topo);
}

}  // namespace tilecomm::model
