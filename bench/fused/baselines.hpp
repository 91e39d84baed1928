#pragma once
// The baselines a careful engineer would write (issue 13, part 2), each with its knobs tuned by
// the benchmark: sequential with the best collective algorithm (the library's or MPI's), shaped
// with LDS occupancy shaping, shaped non-blocking (chunked, what frameworks do) and shaped with a
// dedicated communication CU (CU mask).
#include <string>
#include <vector>

#include "cpu_time.hpp"
#include "op_bench.hpp"

namespace tilecomm::bench {

/// A baseline family: the mode it runs and what the tuning varies.
enum class Baseline {
  SequentialBestCollective,  ///< Mode::Sequential, OpOptions::algorithm over the collective's
  ShapedLds,                 ///< chunks in {2,4,8} x free_cus in {1..max(1, C-1)}
  ShapedNonBlocking,         ///< chunks in {2,4,8}
  ShapedCuMask,              ///< chunks in {2,4,8} x free_cus in {1..C-1}; none when C < 2
};

/// Column name: "seq_best_coll", "shaped_lds", "shaped_nonblocking", "shaped_cu_mask".
std::string baseline_name(Baseline b);

/// One setting of a baseline's knobs.
struct Candidate {
  std::string knob;  ///< as the table prints it, e.g. "chunks=4 free_cus=1" or "algorithm=mpi"
  Mode mode = Mode::Sequential;
  OpOptions options;
};

/// Every setting of `b`'s knobs for an operator whose sequential mode runs collective `c` on a
/// device of `cus` CUs, starting from `base` (its tile and other options are kept). Empty when
/// the baseline cannot run on this device (CU mask with one CU).
std::vector<Candidate> candidates(Baseline b, Collective c, int cus, const OpOptions& base);

/// A tuned baseline: the winner's knob and its OpBench variant.
struct Tuned {
  Baseline baseline{};
  bool available = false;  ///< false: no candidate could run (the table prints "n/a")
  std::string knob;        ///< the winner's, or why none ran
  Mode mode = Mode::Sequential;
  std::size_t variant = 0;
  /// Every candidate tried: knob and median wall time (us, slowest rank); a candidate the
  /// operator or the collective rejected (tilecomm::Error) has -1 and its message.
  std::vector<std::pair<std::string, double>> tried;
  std::vector<std::string> rejected;
};

/// Empty if collective `c` can run with `algorithm` here, else why not (the Error's message): the
/// call (AllReduce, ReduceScatter: `bytes` of float32 per rank; All-to-Allv: one element per peer)
/// on a throwaway Communicator over MPI_COMM_WORLD (a declined call inside an operator used to
/// leave its context and communicator marked failed; it no longer does). The algorithms decline by
/// topology and segment size (shm: one node), which the probe shares with the operator's call.
/// Collective.
std::string probe_algorithm(Collective c, std::size_t bytes, const std::string& algorithm);

/// Adds every candidate as a variant of `bench` (a candidate naming an algorithm only if
/// probe_algorithm accepts it for bench.collective()), runs one warm-up call of each (a candidate
/// the operator rejects with tilecomm::Error on every rank is dropped), then `iters` rounds with
/// every candidate once per round, in rotating order; keeps the candidate with the lowest median
/// (wall time of the slowest rank) and drops the others. Collective.
Tuned tune(OpBench& bench, Baseline b, const std::vector<Candidate>& cands, int iters,
           const NodeCpu& node);

}  // namespace tilecomm::bench
