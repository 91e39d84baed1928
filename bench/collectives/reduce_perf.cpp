// reduce_perf: detail::reduce_n on one core, every kernel this CPU can run, next to the copy
// bandwidth roofline measured by the same binary (Google Benchmark).
//
//   Copy/bytes:B                 memcpy of B bytes; bytes_per_second counts B read + B written
//   Reduce/isa:I/p:P/bytes:B     float32 Sum of P sources of B bytes each into a separate dst;
//                                bytes_per_second counts P * B read + B written
//
// I: 0 scalar, 1 avx2, 2 avx512 (a kernel the CPU cannot run is skipped). The bar: P = 2
// and 4 at >= 80 % of Copy at the same B. Typical run (docs/collectives.md has the figures):
//   taskset -c 0 build/bench/collectives/reduce_perf --benchmark_repetitions=3
//     --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "collectives/reduce.hpp"
#include "tilecomm/isa.hpp"

namespace {

using tilecomm::Isa;

struct FreeDeleter {
  void operator()(float* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<float, FreeDeleter>;

/// A 64-byte-aligned buffer of `bytes` bytes (a multiple of 64), filled with small values.
Buffer make_buffer(std::size_t bytes, float seed) {
  Buffer b(static_cast<float*>(std::aligned_alloc(64, bytes)));
  for (std::size_t i = 0; i < bytes / sizeof(float); ++i)
    b.get()[i] = seed + static_cast<float>(i % 97);
  return b;
}

void Copy(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  Buffer src = make_buffer(bytes, 1.0f), dst = make_buffer(bytes, 0.0f);
  for (auto _ : state) {
    std::memcpy(dst.get(), src.get(), bytes);
    benchmark::DoNotOptimize(dst.get());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * 2 * bytes));
}

void Reduce(benchmark::State& state) {
  const auto isa = static_cast<Isa>(state.range(0));
  const int p = static_cast<int>(state.range(1));
  const auto bytes = static_cast<std::size_t>(state.range(2));
  if (static_cast<int>(isa) > static_cast<int>(tilecomm::detected_isa())) {
    state.SkipWithError("this CPU cannot run this kernel");
    return;
  }
  const tilecomm::detail::ReduceKernel kernel = tilecomm::detail::reduce_kernel(isa);
  std::vector<Buffer> srcs;
  std::vector<const void*> ptrs;
  for (int s = 0; s < p; ++s) {
    srcs.push_back(make_buffer(bytes, static_cast<float>(s)));
    ptrs.push_back(srcs.back().get());
  }
  Buffer dst = make_buffer(bytes, 0.0f);
  const std::size_t count = bytes / sizeof(float);
  for (auto _ : state) {
    kernel(dst.get(), ptrs.data(), p, count, tilecomm::DataType::Float32, tilecomm::ReduceOp::Sum);
    benchmark::DoNotOptimize(dst.get());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * (p + 1) * bytes));
  state.SetLabel(std::string(tilecomm::to_string(isa)));
}

constexpr std::int64_t kSizes[] = {64 << 10, 1 << 20, 16 << 20};

BENCHMARK(Copy)->ArgName("bytes")->Arg(kSizes[0])->Arg(kSizes[1])->Arg(kSizes[2]);
BENCHMARK(Reduce)
    ->ArgNames({"isa", "p", "bytes"})
    ->ArgsProduct({{0, 1, 2}, {2, 4}, {kSizes[0], kSizes[1], kSizes[2]}});

}  // namespace

BENCHMARK_MAIN();
