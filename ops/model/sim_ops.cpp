// Each operator's call as simulator programs. The order of tasks, the tiles and where each goes
// come from the operators' planners (ops/*/..._plan.hpp, ops/common/block_route.hpp); what a
// task does follows its kernel body (named at each builder).
#include "ops/model/sim_ops.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "ops/common/op_util.hpp"
#include "ops/common/plan_layout.hpp"
#include "ops/embedding_alltoall/embedding_alltoall_plan.hpp"
#include "ops/gemm_alltoall/gemm_alltoall_plan.hpp"
#include "ops/gemm_reduce_scatter/gemm_reduce_scatter_plan.hpp"
#include "ops/gemv_allreduce/gemv_allreduce_plan.hpp"
#include "ops/model/sim_collectives.hpp"
#include "ops/model/sim_gemm_alltoall.hpp"
#include "ops/model/sim_gemv_allreduce.hpp"
#include "ops/model/sim_ops_util.hpp"
#include "tilecomm/error.hpp"

namespace tilecomm::model {

using namespace tilecomm::detail;
using namespace tilecomm::model::sim_detail;

namespace {

// Bytes the compute kernel reads and writes per rank: GEMV's (GemmReduceScatter's) W, x (A), y
// (C); GemmAllToAll's experts' weights, and its rows in and out (as many as it routes: m); the
// embedding rows looked up and the pooled send buffer.
double compute_footprint(const SimSetup& s) {
  const double m = double(s.shape.m), k = double(s.shape.k), n = double(s.shape.n);
  if (s.shape.op == OpKind::GemmAllToAll)
    return (m * k + double(s.shape.tables) * k * n + m * n) * kFloat;
  if (s.shape.op != OpKind::EmbeddingAllToAll) return (m * k + k * n + m * n) * kFloat;
  return m * double(s.shape.tables) * double(s.shape.pool + 1) * n * kFloat;
}

}  // namespace

double warm_share(const Profile& p, const SimSetup& s, const Fit& warm, double bytes_per_rank) {
  const int sharing = s.ranks_per_cache > 0 ? s.ranks_per_cache : s.ranks_per_node;
  if (!s.repeated_call || warm.table.empty() || p.cache_bytes <= 0) return 0.0;
  const double ws = bytes_per_rank * double(sharing);
  if (ws <= 0) return 1.0;
  return std::clamp(0.5 * std::log2(2.0 * p.cache_bytes / ws), 0.0, 1.0);
}

namespace {

// An embedding tile: random rows from memory, from the caches (the call repeats on the same
// indices: the global batch's bags of this rank's tables), or the warm share's blend.
double pool_tile_s(const Profile& p, const SimSetup& s, std::size_t bags) {
  const OpShape& sh = s.shape;
  const double rows_bytes =
      double(sh.m) * double(sh.tables) * double(sh.pool) * double(sh.n) * sizeof(float);
  const double h = warm_share(p, s, p.embedding_warm, rows_bytes);
  const double lookups = double(bags) * sh.pool;
  const double cold = p.embedding.at(lookups, lookups * sh.n);
  const double warm = h > 0 ? p.embedding_warm.at(lookups, lookups * sh.n) : 0.0;
  return std::max(0.0, h * warm + (1 - h) * cold);
}

// ---- EmbeddingAllToAll ----

struct EmbeddingLayout {
  std::vector<std::size_t> first_table, batch_begin;
  EmbeddingGrid grid;
};
EmbeddingLayout embedding_layout(const SimSetup& s) {
  const int p = s.ranks();
  EmbeddingLayout l;
  l.first_table.assign(p + 1, 0);
  l.batch_begin.assign(p + 1, 0);
  for (int q = 0; q < p; ++q) {
    l.first_table[q + 1] = l.first_table[q] + s.shape.tables;
    l.batch_begin[q + 1] = split_begin(s.shape.m, p, q + 1);
  }
  l.grid.first_table = l.first_table;
  l.grid.batch_begin = l.batch_begin;
  l.grid.dim = s.shape.n;
  l.grid.tile = sim_tile(s);
  l.grid.local_tables = s.shape.tables;
  for (int q = 0; q < p; ++q)
    l.grid.max_blocks =
        std::max(l.grid.max_blocks, (l.grid.local_batch(q) + l.grid.tile - 1) / l.grid.tile);
  return l;
}

// BlockExchange::run (block_exchange.cpp: produce, arrive); no headers, no inputs.
SimRank embedding_fused(const Profile& p, const SimSetup& s, const Topology& topo) {
  const EmbeddingLayout l = embedding_layout(s);
  const EmbeddingFusedRoutes r = embedding_fused_routes(topo, l.grid, s.options.remote_first);
  const ExchangeTasks ids{r.produced.size(), r.arrivals.size(), topo.size, topo.rank, false, 0};
  SimRank rank;
  rank.slots = fused_wgs(s, topo);
  for (std::size_t t : ids.order()) {
    SimTask task;
    if (t < ids.produced) {
      const BlockRoute& b = r.produced[t];
      const double bytes = double(b.block.floats()) * kFloat;
      task.label = "pool";
      task.tile = static_cast<long long>(t);
      task.peer = b.peer;
      task.steps.push_back(SimStep::compute(pool_tile_s(p, s, b.block.rows)));
      if (b.peer != topo.rank)
        task.steps.push_back(SimStep::send(b.peer, kBlock | b.flag, bytes,
                                           topo.on_node(b.peer) ? SimPath::Flag : SimPath::Mpi,
                                           true));
    } else {
      const BlockRoute& a = r.arrivals[t - ids.produced];
      task.label = "arrive";
      task.tile = static_cast<long long>(a.flag);
      task.steps.push_back(SimStep::await(a.peer, kBlock | a.flag));
      if (topo.on_node(a.peer))  // copied out of the inbox
        task.steps.push_back(SimStep::compute(copy_seconds(p, double(a.block.floats()) * kFloat)));
    }
    rank.tasks.push_back(std::move(task));
  }
  return rank;
}

// ---- GemmReduceScatter ----

struct GemmRsBlocks {
  std::size_t rows_local, tile, blocks;
  std::size_t row0(std::size_t i) const { return std::min(rows_local, i * tile); }
  std::size_t rows(std::size_t i) const { return row0(i + 1) - row0(i); }
};
GemmRsBlocks gemm_rs_blocks(const SimSetup& s) {
  const std::size_t rows_local = s.shape.m / static_cast<std::size_t>(s.ranks()), t = sim_tile(s);
  return {rows_local, t, (rows_local + t - 1) / t};
}
double gemm_tile_s(const Profile& p, const OpShape& s, std::size_t rows) {
  return std::max(0.0, p.gemm.at(double(rows), double(rows) * s.k * s.n));
}

// gemm_reduce_scatter_fused.cpp: compute block i of owner q (into q's slot; off-node: into its
// relay's slot on this node, or staged and sent when alone on the node), node sum (the relay: await
// the node's partials, add, send), reduce my block i (await this node's partials and one node sum
// per other node, add).
SimRank gemm_rs_fused(const Profile& p, const SimSetup& s, const Topology& topo) {
  const GemmRsBlocks g = gemm_rs_blocks(s);
  const int ranks = topo.size;
  const std::size_t reduce_base = static_cast<std::size_t>(ranks) * g.blocks;
  const std::size_t node_sum_base = reduce_base + g.blocks;
  const bool sums = relays_partials(topo);
  const std::vector<int>& mates = topo.node_ranks[topo.node];
  SimRank rank;
  rank.slots = fused_wgs(s, topo);
  for (std::size_t t : gemm_rs_order(topo, g.blocks, s.options.remote_first)) {
    SimTask task;
    task.tile = static_cast<long long>(t);
    if (t >= node_sum_base) {
      const int q = static_cast<int>((t - node_sum_base) / g.blocks);
      const std::size_t i = (t - node_sum_base) % g.blocks;
      const double bytes = double(g.rows(i)) * s.shape.n * kFloat;
      task.label = "node sum";
      for (int src : mates)
        task.steps.push_back(SimStep::await(src, kNodeSum | (q * g.blocks + i)));
      task.steps.push_back(SimStep::compute(reduce_seconds(p, double(mates.size() - 1) * bytes)));
      task.steps.push_back(SimStep::send(q, kPartial | i, bytes, SimPath::Mpi, true));
    } else if (t >= reduce_base) {
      const std::size_t i = t - reduce_base;
      task.label = "reduce";
      int sources = 0;
      for (int node = 0; node < topo.num_nodes; ++node)
        for (int src :
             node == topo.node ? mates : std::vector<int>{node_relay(topo, topo.rank, node)}) {
          task.steps.push_back(SimStep::await(src, kPartial | i));
          ++sources;
        }
      task.steps.push_back(SimStep::compute(
          reduce_seconds(p, (sources - 1) * double(g.rows(i)) * s.shape.n * kFloat)));
    } else {
      const int q = static_cast<int>(t / g.blocks);
      const std::size_t i = t % g.blocks;
      const double bytes = double(g.rows(i)) * s.shape.n * kFloat;
      task.label = "compute";
      task.steps.push_back(SimStep::compute(gemm_tile_s(p, s.shape, g.rows(i))));
      if (topo.on_node(q)) {
        task.peer = q;
        task.steps.push_back(SimStep::send(q, kPartial | i, bytes, SimPath::Flag));
      } else if (sums) {
        task.peer = node_relay(topo, q, topo.node);
        task.steps.push_back(
            SimStep::send(task.peer, kNodeSum | (q * g.blocks + i), bytes, SimPath::Flag));
      } else {
        task.peer = q;
        task.steps.push_back(SimStep::send(q, kPartial | i, bytes, SimPath::Mpi, true));
      }
    }
    rank.tasks.push_back(std::move(task));
  }
  return rank;
}

// ---- the unfused modes ----

// The compute of chunk c of nc: one task per tile (the operators' shaped chunks split the same
// tiles: GEMV's row blocks, embedding's make_tiles(c, nc)).
std::vector<double> chunk_tiles(const Profile& p, const SimSetup& s, const Topology& topo,
                                std::size_t c, std::size_t nc, std::vector<double>* send_bytes) {
  std::vector<double> tiles;
  if (s.shape.op == OpKind::GemvAllReduce) {
    const GemvBlocks g = gemv_blocks(s);
    for (std::size_t b = split_begin(g.blocks, nc, c); b < split_begin(g.blocks, nc, c + 1); ++b)
      tiles.push_back(gemv_tile_s(p, s, g.rows(b)));
    return tiles;
  }
  if (s.shape.op == OpKind::GemmAllToAll) return gemm_alltoall_chunk_tiles(p, s, topo, c, nc);
  if (s.shape.op == OpKind::GemmReduceScatter) {  // chunk c of every owner's rows
    const GemmRsBlocks g = gemm_rs_blocks(s);
    const std::size_t lo = split_begin(g.rows_local, nc, c),
                      hi = split_begin(g.rows_local, nc, c + 1);
    for (int q = 0; q < topo.size; ++q)
      for (std::size_t r = lo; r < hi; r += g.tile)
        tiles.push_back(gemm_tile_s(p, s.shape, std::min(hi, r + g.tile) - r));
    return tiles;
  }
  const EmbeddingLayout l = embedding_layout(s);
  for (const EmbeddingTile& k : embedding_tiles(topo, l.grid, c, nc, false)) {
    tiles.push_back(pool_tile_s(p, s, k.bag1 - k.bag0));
    if (send_bytes) (*send_bytes)[k.dst] += double(k.bag1 - k.bag0) * s.shape.n * kFloat;
  }
  return tiles;
}

// Rank topo.rank's collective of chunk c of nc, its input as hot as the chunk's compute left it
// (the fused tiles' adds stay cold: one node's GEMV M 262144 fused measures 0.78-0.86x cold).
std::vector<SimStep> chunk_collective(const Profile& p, const SimSetup& s, const Topology& topo,
                                      std::size_t c, std::size_t nc, std::uint64_t base) {
  std::vector<SimStep> steps;
  const double hot = hot_share(p, compute_footprint(s) / double(nc));
  if (s.shape.op == OpKind::GemvAllReduce) {
    const GemvBlocks g = gemv_blocks(s);
    const std::size_t b0 = split_begin(g.blocks, nc, c), b1 = split_begin(g.blocks, nc, c + 1);
    const double bytes = double(g.elem0(b1) - g.elem0(b0)) * kFloat;
    allreduce_steps(steps, topo, bytes, p, base, hot);
    return steps;
  }
  if (s.shape.op == OpKind::GemmAllToAll)
    return gemm_alltoall_chunk_collective(p, s, topo, c, nc, base, hot);
  if (s.shape.op == OpKind::GemmReduceScatter) {
    const GemmRsBlocks g = gemm_rs_blocks(s);
    const double rows =
        double(split_begin(g.rows_local, nc, c + 1) - split_begin(g.rows_local, nc, c));
    reduce_scatter_steps(steps, topo, rows * topo.size * s.shape.n * kFloat, p, base, hot);
    return steps;
  }
  const EmbeddingLayout l = embedding_layout(s);
  const int n = topo.size;
  std::vector<double> send(n, 0), recv(n, 0);
  const std::size_t mine = l.grid.local_batch(topo.rank);
  for (int q = 0; q < n; ++q) {
    const std::size_t lq = l.grid.local_batch(q);
    send[q] = double(split_begin(lq, nc, c + 1) - split_begin(lq, nc, c)) * s.shape.tables *
              s.shape.n * kFloat;
    recv[q] = double(split_begin(mine, nc, c + 1) - split_begin(mine, nc, c)) * s.shape.tables *
              s.shape.n * kFloat;
  }
  alltoallv_steps(steps, topo, send, recv, p, base, hot);
  return steps;
}

}  // namespace

void check_setup(const SimSetup& s) {
  auto bad = [](const std::string& what) { throw Error(ErrorCode::InvalidArgument, what); };
  if (s.nodes < 1) bad(fmt::format("simulator: nodes = {} (must be >= 1)", s.nodes));
  if (s.ranks_per_node < 1)
    bad(fmt::format("simulator: ranks_per_node = {} (must be >= 1)", s.ranks_per_node));
  if (s.cus < 1) bad(fmt::format("simulator: cus = {} (must be >= 1)", s.cus));
  if (s.slots < 1) bad(fmt::format("simulator: slots = {} (must be >= 1)", s.slots));
  if (s.cpu_share < 0) bad(fmt::format("simulator: cpu_share = {} (must be >= 0)", s.cpu_share));
  if (s.shape.m == 0) bad("simulator: shape m (M or batch) = 0");
  if (s.shape.n == 0) bad("simulator: shape n (vectors or dim) = 0");
  if (s.shape.op == OpKind::GemmReduceScatter && s.shape.m % std::size_t(s.ranks()) != 0)
    bad(fmt::format("simulator: m = {} is not a multiple of the {} ranks", s.shape.m, s.ranks()));
  if (s.shape.op == OpKind::GemmAllToAll && (s.shape.k == 0 || s.shape.tables == 0))
    bad(
        fmt::format("simulator: gemm_alltoall needs K > 0 and experts per rank > 0 (K = {}, "
                    "experts = {})",
                    s.shape.k, s.shape.tables));
  if (s.shape.op == OpKind::EmbeddingAllToAll && s.shape.m < std::size_t(s.ranks()))
    bad(fmt::format("simulator: batch = {} is smaller than ranks = {}", s.shape.m, s.ranks()));
}

detail::OffNodePath sim_off_node_path(const SimCosts& costs) {
  return off_node_path(costs.mpi, costs.proxy_s, costs.net.link_bytes_per_s);
}

std::size_t sim_tile(const SimSetup& s) {
  if (s.shape.tile || s.options.tile) return s.shape.tile ? s.shape.tile : s.options.tile;
  const std::size_t slots = static_cast<std::size_t>(s.slots);
  if (s.shape.op == OpKind::GemvAllReduce)
    return gemv_default_tile(s.shape.m, s.shape.k, s.shape.n, gemv_algorithm(s), slots, s.ranks(),
                             s.nodes > 1, s.off_node);
  if (s.shape.op == OpKind::GemmReduceScatter)
    return gemm_rs_default_tile(s.shape.m, slots, s.shape.n, s.nodes > 1);
  if (s.shape.op == OpKind::GemmAllToAll) return kGemmAllToAllTileRows;
  return embedding_default_tile(s.shape.m, s.ranks(), s.shape.tables * s.ranks(), slots, s.shape.n,
                                s.nodes > 1);
}

std::vector<SimRank> fused_program(const Profile& p, const SimSetup& s) {
  check_setup(s);
  std::vector<SimRank> ranks;
  for (int r = 0; r < s.ranks(); ++r) {
    const Topology topo = block_topology(r, s.nodes, s.ranks_per_node);
    SimRank rank = s.shape.op == OpKind::GemmAllToAll        ? gemm_alltoall_fused(p, s, topo)
                   : s.shape.op == OpKind::GemmReduceScatter ? gemm_rs_fused(p, s, topo)
                   : s.shape.op == OpKind::EmbeddingAllToAll ? embedding_fused(p, s, topo)
                                                             : gemv_allreduce_fused(p, s, topo);
    rank.cores = cores_of(s);
    rank.start = kernel_launch_s(p, std::size_t(rank.slots), rank.slots);  // its WGs: fused_wgs
    rank.proxy_polls = s.proxy_polls && topo.num_nodes > 1;
    ranks.push_back(std::move(rank));
  }
  return ranks;
}

namespace {

// Sequential: the compute kernel, then the collective (each rank when its compute is done).
// Returns the call's time; `compute_time` gets the compute kernel's.
double sequential_call(const Profile& p, const SimSetup& s, const SimCosts& costs, Network* net,
                       double* compute_time) {
  const int n = s.ranks();
  std::vector<SimRank> compute(n), coll(n);
  for (int r = 0; r < n; ++r) {
    const Topology topo = block_topology(r, s.nodes, s.ranks_per_node);
    for (double t : chunk_tiles(p, s, topo, 0, 1, nullptr))
      compute[r].tasks.push_back({{SimStep::compute(t)}, "compute"});
    compute[r].slots = s.slots;
    compute[r].cores = cores_of(s);
    compute[r].start = kernel_launch_s(p, compute[r].tasks.size(), s.slots);
  }
  const SimResult first = simulate(compute, s.ranks_per_node, costs, false, net);
  *compute_time = first.time;
  for (int r = 0; r < n; ++r) {
    const Topology topo = block_topology(r, s.nodes, s.ranks_per_node);
    coll[r].tasks.push_back({chunk_collective(p, s, topo, 0, 1, kCollective), "collective"});
    coll[r].cores = cores_of(s);
    coll[r].start = first.rank_end[r];
  }
  return simulate(coll, s.ranks_per_node, costs, false, net).time;
}

// The shaped mode's chunks, as the ops cut them: never more than GemvAllReduce's row blocks
// (GemvAllReduceImpl::run_shaped) or GemmReduceScatter's rows per rank (run_unfused);
// EmbeddingAllToAll and GemmAllToAll (chunks of its experts, some empty) take the option as it
// is.
std::size_t shaped_chunks(const SimSetup& s) {
  const auto chunks = static_cast<std::size_t>(std::max(1, s.options.shaped.chunks));
  switch (s.shape.op) {
    case OpKind::GemvAllReduce:
      return std::min(chunks, std::max<std::size_t>(1, gemv_blocks(s).blocks));
    case OpKind::GemmReduceScatter:
      return std::min(chunks, gemm_rs_blocks(s).rows_local);
    default:
      return chunks;
  }
}

// Shaped: chunks of tiles, each chunk's collective a task after its tiles (it waits for them), a
// launch before each.
double shaped_call(const Profile& p, const SimSetup& s, const SimCosts& costs, Network* net) {
  const int n = s.ranks();
  const std::size_t chunks = shaped_chunks(s);
  std::vector<SimRank> shaped(n);
  for (int r = 0; r < n; ++r) {
    const Topology topo = block_topology(r, s.nodes, s.ranks_per_node);
    std::size_t compute_wgs = 0;
    for (std::size_t c = 0; c < chunks; ++c) {
      const std::vector<double> tiles = chunk_tiles(p, s, topo, c, chunks, nullptr);
      compute_wgs += tiles.size();
      for (std::size_t i = 0; i < tiles.size(); ++i)
        shaped[r].tasks.push_back({{SimStep::compute(tiles[i]),
                                    SimStep::send(r, kChunkDone | (c << 20) | i, 0, SimPath::Flag)},
                                   "compute"});
      SimTask collective{{}, "collective"};
      for (std::size_t i = 0; i < tiles.size(); ++i)
        collective.steps.push_back(SimStep::await(r, kChunkDone | (c << 20) | i));
      // A later chunk's communication kernel waits on an event: dispatched when its chunk's
      // compute ends, it pays a launch then (the first chunk's is in `start`).
      if (c > 0) collective.steps.push_back(SimStep::compute(p.launch_s));
      for (const SimStep& st : chunk_collective(p, s, topo, c, chunks, kCollective + 16 * c))
        collective.steps.push_back(st);
      shaped[r].tasks.push_back(std::move(collective));
    }
    shaped[r].slots = s.slots;
    shaped[r].cores = cores_of(s);
    // The compute kernel (its tiles) and the one-WG communication kernel.
    shaped[r].start = kernel_launch_s(p, compute_wgs, s.slots) + p.launch_s;
  }
  return simulate(shaped, s.ranks_per_node, costs, false, net).time;
}

// A mode's call in a loop of its own kind when the links are token buckets (NetworkParams::
// burst_bytes) and the call repeats: each call finds the buckets as the calls before it left them
// (a compute phase refills them, back-to-back transfers drain them). As the benchmarks time a call
// (fused_perf --lead-in-ms), the loop's calls add up to kLoopSeconds (at most kLoopCalls calls)
// and the last one's time is returned. One call otherwise: a network without buckets carries
// nothing from call to call.
constexpr double kLoopSeconds = 10e-3;
constexpr int kLoopCalls = 400;
template <class Call>
double in_a_loop(const SimSetup& s, const SimCosts& costs, Call&& call) {
  Network net(std::max(1, s.nodes), costs.net);
  double last = call(&net);
  if (!(s.repeated_call && costs.net.burst_bytes > 0)) return last;
  double spent = last;
  for (int i = 1; i < kLoopCalls && spent < kLoopSeconds; ++i) {
    net.next_call(last + s.loop_gap_s);
    last = call(&net);
    spent += last;
  }
  net.next_call(last + s.loop_gap_s);
  return call(&net);
}

}  // namespace

SimModes simulate_modes(const Profile& p, const SimSetup& setup, const SimCosts& costs,
                        bool timeline) {
  check_setup(setup);
  SimSetup s = setup;
  s.off_node = sim_off_node_path(costs);
  SimModes out;
  out.sequential = in_a_loop(
      s, costs, [&](Network* net) { return sequential_call(p, s, costs, net, &out.compute); });
  out.shaped = in_a_loop(s, costs, [&](Network* net) { return shaped_call(p, s, costs, net); });
  out.fused = in_a_loop(s, costs, [&](Network* net) {
    out.fused_run = simulate(fused_program(p, s), s.ranks_per_node, costs, timeline, net);
    return out.fused_run.time;
  });
  return out;
}

}  // namespace tilecomm::model
