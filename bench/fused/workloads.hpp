#pragma once
// The shapes of real models as fused_perf presets (--workload): sources and scaling in
// docs/workloads.md.
#include <string>
#include <vector>

#include "op_bench.hpp"

namespace tilecomm::bench {

struct WorkloadCase {
  std::string workload;  // "dlrm", "llama-decode", "mixtral-moe"
  std::string label;     // the layer it models, e.g. "70B down_proj"
  std::string op;        // an OpBench name (make_op_bench)
  Shape shape;
};

/// The cases of workload `name` ("dlrm", "llama-decode", "mixtral-moe" or "all") for a job of
/// `ranks` ranks (K is split over the ranks, experts too). Error(InvalidArgument) naming
/// --workload for an unknown name, or a job size the workload cannot be split over.
std::vector<WorkloadCase> workload_cases(const std::string& name, int ranks);

}  // namespace tilecomm::bench
