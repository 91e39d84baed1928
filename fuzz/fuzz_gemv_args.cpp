// libFuzzer target: GemvAllReduce::run argument checks (null w/x/y, y overlapping w or x, mode) on
// a single-rank communicator. w, x and y are placed at fuzzed offsets in one arena, so they may
// overlap. Contract checked: bad input raises Error(InvalidArgument) naming GemvAllReduce; accepted
// input gives exactly y = W x in every mode and writes nothing outside y.
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "fuzz_common.hpp"

using namespace tilecomm;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::Input in{data, size};
  static const std::size_t kM[] = {0, 1, 5, 17}, kK[] = {0, 1, 3, 4};
  const std::size_t m = kM[in.byte() % 4], k = kK[in.byte() % 4];
  static std::map<std::pair<std::size_t, std::size_t>, std::unique_ptr<GemvAllReduce>> ops;
  auto& op = ops[{m, k}];
  if (!op) op = std::make_unique<GemvAllReduce>(fuzz::self_comm(), fuzz::small_device(), m, k);
  constexpr std::size_t kArena = 256;
  std::vector<float> arena(kArena);
  for (std::size_t i = 0; i < kArena; ++i)
    arena[i] = fuzz::small_int(i);
  // Each buffer: null (rarely), or at an offset that keeps its extent inside the arena.
  auto place = [&](std::size_t extent) -> float* {
    if (in.byte() < 16) return nullptr;
    return arena.data() + in.byte() % (kArena - extent + 1);
  };
  const float* w = place(m * k);
  const float* x = place(k);
  float* y = place(m);
  const Mode mode = static_cast<Mode>(in.byte() % 5);  // 4: not a Mode
  const std::vector<float> before = arena;
  // The reference, from the inputs as they are before the call.
  std::vector<float> ref(m, 0.0f);
  if (w && x)
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t j = 0; j < k; ++j)
        ref[i] += w[i * k + j] * x[j];
  try {
    op->run(w, x, y, mode);
  } catch (const Error& e) {
    fuzz::require(e.code() == ErrorCode::InvalidArgument, "error code is InvalidArgument");
    fuzz::require(e.message().rfind("GemvAllReduce", 0) == 0, "error names the operator");
    fuzz::require(arena == before, "nothing written on error");
    return 0;
  }
  // Accepted: buffers non-null where used, y disjoint from w and x, results exact.
  fuzz::require(m * k == 0 || w != nullptr, "w non-null when used");
  fuzz::require(k == 0 || x != nullptr, "x non-null when used");
  fuzz::require(m == 0 || y != nullptr, "y non-null when used");
  auto disjoint = [](const float* a, std::size_t na, const float* b, std::size_t nb) {
    return na == 0 || nb == 0 || a + na <= b || b + nb <= a;
  };
  if (m > 0) {
    fuzz::require(disjoint(y, m, w, m * k) && disjoint(y, m, x, k), "y disjoint from w and x");
    fuzz::require(static_cast<unsigned>(mode) <= static_cast<unsigned>(Mode::Auto), "mode valid");
  }
  for (std::size_t i = 0; i < kArena; ++i) {
    const float* p = arena.data() + i;
    const bool in_y = m > 0 && p >= y && p < y + m;
    if (in_y)
      fuzz::require(*p == ref[static_cast<std::size_t>(p - y)], "y equals W x");
    else
      fuzz::require(arena[i] == before[i], "nothing written outside y");
  }
  return 0;
}
