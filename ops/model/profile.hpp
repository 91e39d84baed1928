#pragma once
// The calibrated cost profile (issue 15, docs/model.md): what tilecomm_calibrate measures and the
// model (predict.hpp) reads. Plain numbers, one struct per concern, so that a simulator can reuse
// the same cost terms: per-tile compute cost, per-path message latency / per-byte cost and CPU
// cost, proxy and flag overheads, kernel launch and barrier costs. Seconds and bytes throughout.
#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "tilecomm/env.hpp"

namespace tilecomm::model {

/// One measured point of a compute sweep: the features and the time (s).
struct Sample {
  double x1 = 0, x2 = 0, t = 0;
};

struct Fit;
/// A compute fit's table read at (x1, x2) (both > 0), as a cost per unit of x2 (t / x2) times x2.
/// Points of the tile's own x2 / x1 (its work per row), when there are any: linear in log2 x1
/// between the two around it, the nearest one's beyond them (two at one x1: their mean). Else the
/// nearest measured points, weighted by 1 / distance^2 in (log2 x1, log2 (x2 / x1)), the four
/// nearest at most (a measured point itself when hit exactly).
double table_at(const Fit& f, double x1, double x2);

/// t = c[0] + c[1] x1 + c[2] x2 (x1, x2 named per use), fitted by least squares (LAPACKE_dgelsy)
/// over `points` measurements; `rms` is the root mean square residual (s), `max_rel` the largest
/// |residual| / measured. The compute fits also keep their measured points (`table`): at() then
/// reads the table (table_at), since a kernel's cost per unit is not linear in the tile's shape
/// (the operator's GEMV kernel costs 0.5 ns per multiply-add at K = 256 and 0.28 at K = 16 and
/// 1024: the fit, 59 % off at worst, put GEMV M = 262144 K = 16 at half its measured time).
struct Fit {
  std::array<double, 3> c{};
  double rms = 0, max_rel = 0;
  int points = 0;
  std::vector<Sample> table;
  double at(double x1, double x2 = 0) const {
    if (!table.empty() && x1 > 0 && x2 > 0) return table_at(*this, x1, x2);
    return c[0] + c[1] * x1 + c[2] * x2;
  }
};

/// One message path. Latency and per-byte cost of one message (fit t = alpha + beta bytes over a
/// size sweep: c[0] = alpha, c[1] = beta), and the CPU time it costs the sender's and the
/// receiver's thread (fit cpu = c[0] + c[1] bytes).
struct PathCost {
  bool measured = false;
  Fit time, cpu_send, cpu_recv;
  /// On-node only: the per-byte cost of a bulk copy while every rank of the node copies, through
  /// memory the caches do not hold (0: not measured). The ping-pong's buffers stay in the caches,
  /// a call's collective runs after compute that streamed past them.
  double bulk_beta = 0;
  double alpha() const { return time.c[0]; }
  /// Per-byte cost of a message: the bulk copy's when measured and dearer, else the ping-pong's.
  double beta() const { return std::max(time.c[1], bulk_beta); }
};

struct Profile {
  std::string host, version;
  int cus = 1;    ///< CUs per rank of the calibration run (informative)
  int ranks = 1;  ///< ranks of the calibration run
  int nodes = 1;  ///< nodes of the calibration run (TILECOMM_NODE_SIZE counts)
  // Compute, one CU (a WG on its own), per tile:
  /// GemvAllReduce, float32 (OpenBLAS sgemv): x1 = rows, x2 = rows x K x n.
  Fit gemv;
  /// The same tiles with W already in the caches (one block of W reused: a loop calling one
  /// operator on weights that fit in the L3). Empty (no table, zero line) in older profiles.
  Fit gemv_warm;
  /// The last-level cache of the calibrating CPU, bytes (0: unknown).
  double cache_bytes = 0;
  /// A core's L2 cache, bytes (0: unknown, as in older profiles).
  double l2_bytes = 0;
  /// EmbeddingAllToAll, float32 pooling: x1 = lookups (a row fetched at random: a cache miss),
  /// x2 = lookups x dim.
  Fit embedding;
  /// The same tiles fetching rows the L3 holds (random rows of an 8 MiB set read just before,
  /// scattered over a large table: a loop calling one operator on the same batch). Empty in
  /// older profiles.
  Fit embedding_warm;
  /// GEMM tiles (GemmAllToAll, GemmReduceScatter; tilecomm's packed GEMM): x1 = rows,
  /// x2 = rows x K x N (multiply-adds).
  Fit gemm;
  /// Adding float arrays (reductions): x1 = bytes added.
  Fit reduce;
  /// The same with the arrays in the L2 (a collective's input its compute has just written,
  /// MemCosts). Empty (0 points) in older profiles.
  Fit reduce_hot;
  /// Paths: on-node through the shared segment (a copy into the peer's segment and a release
  /// flag), off-node through MPI point-to-point.
  PathCost shm, mpi;
  /// Extra latency the fused kernel's MPI proxy adds per off-node message: an 8-byte ping-pong
  /// between two WGs through the real Proxy (driven by the host thread each side), one way, minus
  /// plain MPI's alpha; half the proxy's shortest background sleep (20 us) when it cannot be
  /// measured (one rank).
  double proxy_s = 0;
  /// A flag's signal-to-observed round trip on one node, halved (the on-node tile handshake).
  double flag_s = 0;
  /// Launching a one-WG kernel on the device and waiting for it.
  double launch_s = 0;
  /// Launching a kernel of one WG per slot (CUs x slots), each returning once all have started,
  /// and waiting for it: launch_s plus bringing in the workers beyond the first (where a rank has
  /// fewer cores than slots, a wake-up and a context switch each). 0 in older profiles: launch_s.
  double launch_grid_s = 0;
  /// tilecomm::barrier on the calibration job.
  double barrier_s = 0;
  /// Bytes per second a node's NIC sustains while every rank sends to every off-node rank, in the
  /// library's eager pieces (calibrate_link.hpp); 0 on one node, and in older profiles. The
  /// simulator's default link.
  double link_bytes_per_s = 0;
};

/// Reads a profile. Error(InvalidArgument) naming `path` when the file cannot be read, is not
/// JSON, or lacks a field.
Profile load_profile(const std::string& path);
/// Writes `p` as JSON to `path` (creating its directory). Error(InvalidUsage) naming the path on
/// failure.
void save_profile(const Profile& p, const std::string& path);
/// The JSON text of a profile (save_profile's content).
std::string to_json_text(const Profile& p);

/// $XDG_CACHE_HOME/tilecomm/profile-<host>-<version>.json (~/.cache when XDG_CACHE_HOME is unset);
/// empty when neither XDG_CACHE_HOME nor HOME is set (in `e`).
std::string default_profile_path(const Env& e = env());
/// This build's version ("0.1.0").
const char* version();

/// The profile the operators' Auto uses, resolved from OpOptions::profile (`option`) and the
/// environment: option "none": no profile; a non-empty option or TILECOMM_PROFILE: that file,
/// which must exist and parse (Error naming the file otherwise); else the default path when it
/// exists (a corrupt default file is a warning on stderr and no profile). Returns false when there
/// is no profile. `e`: the environment (TILECOMM_PROFILE, the cache directory).
bool resolve_profile(const std::string& option, Profile& out, const Env& e = env());

}  // namespace tilecomm::model
