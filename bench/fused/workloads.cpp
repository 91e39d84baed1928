// fused_perf --workload: published model shapes, scaled down only where this 2-core, 24 GiB
// machine needs it (docs/workloads.md states each source and each scaling).
#include "workloads.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace tilecomm::bench {
namespace {

// MLPerf Training DLRM-v2 (DLRM-DCNv2 on Criteo 1TB, multi-hot; mlcommons/training
// recommendation_v2/torchrec_dlrm): rows per table (--num_embeddings_per_feature) and indices per
// bag (--multi_hot_sizes) of its 26 sparse features, embedding dim 128, global batch 65536.
constexpr std::size_t kDlrmRows[] = {
    40000000, 39060,    17295,    7424,     20265,  3,     7122, 1543, 63,
    40000000, 3067956,  405282,   10,       2209,   11938, 155,  4,    976,
    14,       40000000, 40000000, 40000000, 590152, 12973, 108,  36};
constexpr std::size_t kDlrmPool[] = {3, 2, 1, 2, 6, 1, 1,  1,   1,  7,  3, 8, 1,
                                     6, 9, 5, 1, 1, 1, 12, 100, 27, 10, 3, 1, 1};
constexpr std::size_t kDlrmDim = 128;
constexpr std::size_t kDlrmBatch = 4096;       // of 65536: 1/16
constexpr std::size_t kDlrmMaxRows = 2000000;  // memory: 1 GiB per table at dim 128 (float32)
constexpr double kDlrmZipf = 1.05;

std::size_t ceil_div(std::size_t a, std::size_t b) {
  return (a + b - 1) / b;
}

void dlrm(std::vector<WorkloadCase>& out) {
  Shape s;
  s.size = kDlrmBatch;
  s.dim = kDlrmDim;
  s.zipf = kDlrmZipf;
  for (std::size_t rows : kDlrmRows)
    s.table_rows.push_back(std::min(rows, kDlrmMaxRows));
  s.table_pool.assign(std::begin(kDlrmPool), std::end(kDlrmPool));
  s.ratio = *std::max_element(s.table_pool.begin(), s.table_pool.end());
  s.tables = s.table_rows.size();
  out.push_back({"dlrm", "26 tables (MLPerf DLRM-v2)", "embedding_alltoall", s});
}

// Row-parallel projections of Llama-2 7B / 70B (hidden 4096 / 8192, MLP width 11008 / 28672):
// attention output (o_proj) and MLP down (down_proj); Y = W X with W [hidden x K], K split over
// the ranks. Batch 1 and 8 decoded together; bf16 weights as deployed, float32 for the 7B rows.
void llama_decode(std::vector<WorkloadCase>& out, int ranks) {
  struct Layer {
    const char* label;
    std::size_t m, k;
    bool fp32_too;
  };
  const Layer layers[] = {{"7B o_proj", 4096, 4096, true},
                          {"7B down_proj", 4096, 11008, true},
                          {"70B o_proj", 8192, 8192, false},
                          {"70B down_proj", 8192, 28672, false}};
  for (const Layer& l : layers)
    for (bool bf16 : {true, false}) {
      if (!bf16 && !l.fp32_too) continue;
      for (std::size_t n : {1, 8}) {
        Shape s;
        s.size = l.m;
        s.ratio = ceil_div(l.k, static_cast<std::size_t>(ranks));
        s.batch = n;
        s.bf16 = bf16;
        out.push_back({"llama-decode", l.label, "gemv_allreduce", s});
      }
    }
}

// Mixtral 8x7B's MoE layer (8 experts, top-2, hidden 4096, expert width 14336): the expert down
// projection [14336 x 4096] and the All-to-All that returns its rows to the tokens' ranks, the
// width scaled to 14336 / 8 = 1792, 128 tokens per rank, expert popularity Zipf(1.0).
void mixtral_moe(std::vector<WorkloadCase>& out, int ranks) {
  constexpr std::size_t kExperts = 8;
  if (kExperts % static_cast<std::size_t>(ranks) != 0)
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("--workload mixtral-moe: {} experts cannot be split over {} ranks",
                            kExperts, ranks));
  Shape s;
  s.size = 128;
  s.ratio = 14336 / 8;
  s.dim = 4096;
  s.tables = kExperts / static_cast<std::size_t>(ranks);
  s.top_k = 2;
  s.zipf = 1.0;
  out.push_back({"mixtral-moe", "expert down_proj + combine", "gemm_alltoall", s});
}

}  // namespace

std::vector<WorkloadCase> workload_cases(const std::string& name, int ranks) {
  std::vector<WorkloadCase> out;
  const bool all = name == "all";
  if (all || name == "dlrm") dlrm(out);
  if (all || name == "llama-decode") llama_decode(out, ranks);
  if (all || name == "mixtral-moe") mixtral_moe(out, ranks);
  if (out.empty())
    throw Error(
        ErrorCode::InvalidArgument,
        fmt::format("--workload {} is not one of: dlrm, llama-decode, mixtral-moe, all", name));
  return out;
}

}  // namespace tilecomm::bench
