#pragma once
// fused_perf --workload: every case of the named workloads with every variant as a column —
// sequential, the tuned baselines (bench/fused/baselines.hpp), fused — measured side by side,
// each checked against sequential, against the CPU-aware ideal and issue 13's bars.
#include <string>

#include "cpu_time.hpp"
#include "op_bench.hpp"

namespace tilecomm::bench {

struct WorkloadRun {
  std::string workload;     ///< dlrm | llama-decode | mixtral-moe | all
  int iters = 10;           ///< measured rounds (each: every variant once, in round_order)
  int warmup = 3;           ///< unmeasured rounds before them
  int tune_iters = 3;       ///< rounds per baseline's tuning (after one warm-up call each)
  OpOptions base;           ///< options of sequential and fused (tile, ...)
  std::string json;         ///< rank 0 writes every row here ("" = no file)
  std::string trace;        ///< prefix: PREFIX_<workload>.json, one fused iteration of the
                            ///< workload's case with the longest comm-only time ("" = none)
  double min_timed_ms = 0;  ///< more rounds until sequential's timed calls add up to this (ms)
};

/// Runs the table; rank 0 prints it (Markdown) as rows complete. Returns non-zero if any variant
/// gave a result that differs from sequential's. Collective.
int run_workloads(const WorkloadRun& run, Communicator& comm, Device& dev, const NodeCpu& node);

}  // namespace tilecomm::bench
