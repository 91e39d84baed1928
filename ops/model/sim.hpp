#pragma once
// A discrete-event simulator of tilecomm calls (issue 15 §3, docs/model.md "Simulator"): N nodes x
// R ranks, each rank running a list of tasks in order on its WG slots (a persistent kernel), its
// CPU cores shared among the slots computing (processor sharing), messages between ranks on the
// segment (flags, copies) or through MPI and the network model (sim_network.hpp), received by a
// per-rank proxy whose CPU time shares the cores too. The task lists come from the operators' own
// planners (sim_ops.hpp); this file knows nothing of operators.
#include <cstdint>
#include <string>
#include <vector>

#include "ops/model/profile.hpp"
#include "ops/model/sim_network.hpp"

namespace tilecomm::model {

/// How a message travels. Flag: an on-node release (the data was stored into the peer's segment
/// by the compute; only the flag's latency). Shm: a copy through the segment (alpha + beta bytes,
/// the sender's CPU). Mpi: MPI point-to-point through the network (sender and receiver CPU).
enum class SimPath { Flag, Shm, Mpi };

struct SimStep {
  enum class Kind { Compute, Send, Await } kind = Kind::Compute;
  double seconds = 0;     ///< Compute: CPU seconds (at a whole core)
  int peer = -1;          ///< Send: destination rank; Await: source rank
  std::uint64_t key = 0;  ///< names a message of one (source, destination) pair
  double bytes = 0;       ///< Send
  SimPath path = SimPath::Flag;
  bool proxied = false;  ///< Send over Mpi from a fused kernel: the proxy's latency is added
  /// Send: when the message becomes visible at `peer`, every rank on peer's node sees it too (a
  /// proxy received it into peer's segment and raised a flag there).
  bool node_wide = false;
  static SimStep compute(double s) { return {Kind::Compute, s}; }
  static SimStep send(int dst, std::uint64_t key, double bytes, SimPath path, bool proxied = false,
                      bool node_wide = false) {
    return {Kind::Send, 0, dst, key, bytes, path, proxied, node_wide};
  }
  static SimStep await(int src, std::uint64_t key) { return {Kind::Await, 0, src, key}; }
};

/// A task: its steps run in order on one WG slot. `label` and `tile` name it in the timeline;
/// a compute task's `peer` is the rank its tile is for (as the operator's trace marks name it).
struct SimTask {
  std::vector<SimStep> steps;
  std::string label;
  long long tile = -1;
  int peer = -1;
};

/// One rank's kernel: tasks start in list order on `slots` WG slots, sharing `cores` cores (a
/// fraction when ranks share a core); the kernel starts at `start` (seconds).
struct SimRank {
  std::vector<SimTask> tasks;
  int slots = 1;
  double cores = 1;
  /// The proxy polls MPI for the whole kernel: one more consumer of the cores from `start` until
  /// the last task ends (a fused kernel across nodes, SimSetup::proxy_polls).
  bool proxy_polls = false;
  double start = 0;
};

/// The costs the simulator charges: the profile's paths and overheads, and the network.
struct SimCosts {
  PathCost shm, mpi;
  double flag_s = 0, proxy_s = 0;
  NetworkParams net;
  /// Off-node messages cost their CPU per message only (the fits' intercepts), not per byte: an
  /// RDMA NIC moves the bytes, where this machine's MPI copies them (TCP, shared memory).
  bool nic_offload = false;
  /// From a profile; the network's defaults: the link rate the profile measured under load
  /// (Profile::link_bytes_per_s), else its MPI path's 1 / beta; the latency its MPI alpha less
  /// the CPU the fit charges at both ends.
  static SimCosts from(const Profile& p);
};

struct SimSpan {
  int rank = 0, slot = 0;
  std::string label;
  long long tile = -1;
  double start = 0, end = 0;
};

struct SimResult {
  double time = 0;                ///< the last rank's end
  std::vector<double> rank_end;   ///< per rank: its last task's end
  std::vector<SimSpan> timeline;  ///< per task: when it ran (with `timeline`)
  long long messages = 0, events = 0;
};

/// Runs the ranks (rank r on node r / ranks_per_node). Error(InvalidArgument) when a rank awaits
/// a message nobody sends (the simulation would never end). `net`: the network to use, for
/// calls that follow one another (Network::next_call); default: a new one from costs.net.
SimResult simulate(const std::vector<SimRank>& ranks, int ranks_per_node, const SimCosts& costs,
                   bool timeline = false, Network* net = nullptr);

/// The timeline as the trace JSON tools/plot_trace.py reads (Chrome trace events, us).
std::string timeline_json(const SimResult& r);

}  // namespace tilecomm::model
