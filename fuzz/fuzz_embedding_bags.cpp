// libFuzzer target: EmbeddingAllToAll::run argument checks (CSR offsets, indices, weights, spans)
// on a single-rank communicator. Contract checked: bad input raises Error(InvalidArgument) naming
// EmbeddingAllToAll; accepted input gives exactly the reference pooled vectors, in every mode.
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "fuzz_common.hpp"

using namespace tilecomm;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::Input in{data, size};
  static const std::size_t kRows[] = {0, 1, 5, 16}, kBatch[] = {0, 1, 3, 8};
  constexpr std::size_t dim = 3;
  const std::size_t rows = kRows[in.byte() % 4], batch = kBatch[in.byte() % 4];
  static std::map<std::pair<std::size_t, std::size_t>, std::unique_ptr<EmbeddingAllToAll>> ops;
  auto& op = ops[{rows, batch}];
  if (!op)
    op = std::make_unique<EmbeddingAllToAll>(fuzz::self_comm(), fuzz::small_device(),
                                             std::vector<std::size_t>{rows}, dim, batch,
                                             Pooling::Sum);
  std::vector<float> table(rows * dim);
  for (std::size_t i = 0; i < table.size(); ++i)
    table[i] = fuzz::small_int(i);
  // Offsets: usually batch + 1 entries, sometimes not; indices and weights from the input.
  const std::size_t noff = in.byte() % 8 == 0 ? in.byte() % 12 : batch + 1;
  std::vector<std::int64_t> off(noff), idx(in.byte() % 24);
  for (auto& o : off)
    o = in.value();
  if (in.byte() % 2 && noff > 0) {  // make them plausible: a running sum of small steps from 0
    off[0] = 0;
    for (std::size_t g = 1; g < noff; ++g)
      off[g] = off[g - 1] + in.byte() % 4;
    if (in.byte() % 2) idx.resize(static_cast<std::size_t>(off.back()));
  }
  for (auto& i : idx)
    i = in.value();
  std::vector<float> w;
  if (in.byte() % 3 == 0) {
    w.resize(in.byte() % 4 == 0 ? in.byte() % 24 : idx.size());
    for (std::size_t i = 0; i < w.size(); ++i)
      w[i] = fuzz::small_int(i + 99);
  }
  const std::size_t ntables_passed = in.byte() % 16 == 0 ? 0 : 1;
  const float* tables[] = {table.data()};
  EmbeddingBags bags[] = {{idx, off, w}};
  std::vector<float> out(op->local_batch() * op->num_tables() * dim + 1, -7.0f);
  const Mode mode = static_cast<Mode>(in.byte() % 3);
  try {
    op->run(std::span(tables, ntables_passed), std::span(bags, ntables_passed), out.data(), mode);
  } catch (const Error& e) {
    fuzz::require(e.code() == ErrorCode::InvalidArgument, "error code is InvalidArgument");
    fuzz::require(e.message().rfind("EmbeddingAllToAll", 0) == 0, "error names the operator");
    return 0;
  }
  // Accepted: the CSR must have been valid, and the result exact.
  fuzz::require(ntables_passed == 1 && off.size() == batch + 1 && off[0] == 0, "offsets shape");
  for (std::size_t g = 0; g < batch; ++g) {
    fuzz::require(off[g] <= off[g + 1], "offsets non-decreasing");
    for (auto j = off[g]; j < off[g + 1]; ++j)
      fuzz::require(idx[j] >= 0 && static_cast<std::size_t>(idx[j]) < rows, "indices in range");
    for (std::size_t d = 0; d < dim; ++d) {
      float ref = 0;
      for (auto j = off[g]; j < off[g + 1]; ++j)
        ref += (w.empty() ? 1.0f : w[j]) * table[idx[j] * dim + d];
      fuzz::require(out[g * dim + d] == ref, "pooled value equals the reference");
    }
  }
  fuzz::require(out.back() == -7.0f, "nothing written past out");
  return 0;
}
