#pragma once
// The operators' calls as simulator programs (sim.hpp), built from the operators' own planners:
// the fused task lists from gemv_two_shot_order / gemv_one_shot_order (GemvAllReduce) and
// embedding_fused_routes + ExchangeTasks (EmbeddingAllToAll, a BlockExchange), the tiles and
// routes they imply, and what each kind of task does (the kernels' task bodies, step by step).
// Sequential mode: the compute kernel over the same tiles, then the collective's algorithm
// (sim_collectives.hpp); shaped mode: chunks of tiles, each chunk's collective as a task after
// them on a slot of its own. GemmReduceScatter: gemm_rs_order (its fused kernel's order).
// GemmAllToAll: GemmAllToAllPlan and ExchangeTasks with headers, on fused_perf's synthetic routing
// (sim_gemm_alltoall.hpp). GemvAllReduce's one-shot and two-shot programs: sim_gemv_allreduce.hpp.
#include <vector>

#include "ops/model/predict.hpp"
#include "ops/model/sim.hpp"

namespace tilecomm::model {

/// One call to simulate: the op's shape (predict.hpp's OpShape: GemvAllReduce m, k per rank, n;
/// EmbeddingAllToAll m = global batch, tables per rank, pool, n = dim; GemmReduceScatter m rows,
/// k per rank, n columns; GemmAllToAll m = rows each rank routes, tables = experts per rank, each
/// k x n), the layout (nodes x ranks_per_node ranks, each `cus` cores and `slots` WG slots) and
/// the options the planners
/// read (remote_first, tile, fused_algorithm, shaped.chunks).
struct SimSetup {
  OpShape shape;
  int nodes = 1, ranks_per_node = 1, cus = 1, slots = 2;
  /// Cores each rank gets (0: cus). Less than one when the ranks outnumber the cores (the
  /// emulated cluster's nodes on this machine's two cores).
  double cpu_share = 0;
  /// Fused across nodes: the proxy (the host thread) takes a share of the cores for the whole
  /// kernel (it polls MPI), besides the CPU of each receive. An upper bound: the real proxy backs
  /// off (sleeps) while nothing arrives.
  bool proxy_polls = false;
  /// The call repeats on the same weights and indices (a benchmark's loop): the share of its data
  /// (per rank: GEMV's W, or the rows an embedding call looks up; times ranks_per_cache) the
  /// caches keep (warm_share) costs the profile's gemv_warm or embedding_warm points. Off: a
  /// model's many layers stream their weights from memory, and a training step looks up a new
  /// batch.
  bool repeated_call = false;
  /// With token buckets (NetworkParams::burst_bytes) and repeated_call: the idle time between
  /// two calls of the loop, when the buckets refill (a benchmark's barrier between timed calls).
  double loop_gap_s = 0;
  /// Ranks whose weights share one last-level cache (0: ranks_per_node). More than a node's
  /// when the nodes are emulated on one machine: tools/cluster's nodes share this VM's one L3.
  int ranks_per_cache = 0;
  /// The off-node path the op's tile rules cut for (GemvAllReduce's one-shot blocks):
  /// simulate_modes sets it from its profile and costs (sim_off_node_path).
  detail::OffNodePath off_node;
  OpOptions options;
  int ranks() const { return nodes * ranks_per_node; }
};

/// The share of a repeated call's data (SimSetup::repeated_call, a benchmark's loop) it finds in
/// the caches, 0..1: all of it when the bytes each rank reads (`bytes_per_rank`), times the ranks
/// sharing one last-level cache, fit in half the profile's cache_bytes; none from twice the cache
/// on; in between linear in log2 of that working set (half at the cache's size). 0 when the call
/// does not repeat, the profile has no `warm` points or no cache size. A tile then costs this share
/// of its warm point's time plus the rest of its streamed point's.
double warm_share(const Profile& p, const SimSetup& s, const Fit& warm, double bytes_per_rank);

/// Error(InvalidArgument) naming what the simulator cannot run (an op it does not model, a bad
/// layout or shape).
void check_setup(const SimSetup& s);

/// The off-node path an op calibrated on the simulated network would see (off_node_path): the link
/// `costs` simulate, and per message the CPU their MPI path charges at both ends (intercepts) plus
/// their proxy latency; the defaults where these are zero.
detail::OffNodePath sim_off_node_path(const SimCosts& costs);

/// The tile the op would choose (rows or bags).
std::size_t sim_tile(const SimSetup& s);

/// The fused call's per-rank programs.
std::vector<SimRank> fused_program(const Profile& p, const SimSetup& s);

struct SimModes {
  double sequential = 0, shaped = 0, fused = 0;
  double compute = 0;  ///< sequential's compute phase (its first kernel), slowest rank
  SimResult fused_run;
};
/// Simulates one call of every mode.
SimModes simulate_modes(const Profile& p, const SimSetup& s, const SimCosts& costs,
                        bool timeline = false);

}  // namespace tilecomm::model
