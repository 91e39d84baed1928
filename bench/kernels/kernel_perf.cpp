// kernel_perf: the compute kernels on one core (Google Benchmark). GB/s counters are bytes of rows
// gathered (indices x dim x element size) per second, 1e9 bytes. Figures and commands:
// docs/kernels.md ("Embedding pooling kernel").
//   BM_Pool     embedding pooling, per ISA path: every table's 4096 bags pooled into the operator's
//               send layout ([bag][table][dim]); 4 tables x 100k rows, or one table of 256 MiB
//               (larger than the L3); uniform or power-law (Zipf s = 1.05, hot rows scattered).
//   BM_Gather   the gather roofline: random 256-byte rows read a cache line at a time (one 8-byte
//               load per line), 16 rows prefetched ahead, over a working set like BM_Pool's.
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "ops/kernels/embedding_pool.hpp"
#include "tilecomm/isa.hpp"

namespace {

using tilecomm::Isa;
namespace kn = tilecomm::kernels;

constexpr std::size_t kBatch = 4096;
constexpr std::size_t kSmallRows = 100000, kSmallTables = 4;
constexpr std::size_t kBigBytes = std::size_t{256} << 20;

/// n elements whose first is 64-byte aligned, as PyTorch allocates tensors (a std::vector's data
/// is 16 bytes past a page boundary for large sizes: 256-byte rows would span 5 cache lines).
template <class T>
class Aligned {
 public:
  explicit Aligned(std::size_t n) : buf_(n + 64 / sizeof(T)) {
    const auto address = reinterpret_cast<std::uintptr_t>(buf_.data());
    offset_ = ((64 - address % 64) % 64) / sizeof(T);
  }
  T* data() { return buf_.data() + offset_; }
  const T* data() const { return buf_.data() + offset_; }
  T& operator[](std::size_t i) { return data()[i]; }

 private:
  std::vector<T> buf_;
  std::size_t offset_ = 0;
};

/// Tables of one shape, kept between benchmarks of that shape (filling 100s of MB takes time).
struct Tables {
  std::size_t count = 0, rows = 0, dim = 0;
  std::vector<Aligned<float>> f32;
  std::vector<Aligned<std::uint16_t>> bf16;
};

const Tables& tables(std::size_t count, std::size_t rows, std::size_t dim) {
  static Tables t;
  if (t.count == count && t.rows == rows && t.dim == dim) return t;
  t = Tables{count, rows, dim, {}, {}};
  std::uint32_t x = 12345;
  for (std::size_t i = 0; i < count; ++i) {
    t.f32.emplace_back(rows * dim);
    t.bf16.emplace_back(rows * dim);
    for (std::size_t e = 0; e < rows * dim; ++e) {
      x = x * 1664525u + 1013904223u;
      const float v = static_cast<float>(x >> 8) * 0x1p-24f - 0.5f;
      t.f32[i][e] = v;
      std::uint32_t bits;
      std::memcpy(&bits, &v, 4);
      t.bf16[i][e] = static_cast<std::uint16_t>(bits >> 16);
    }
  }
  return t;
}

/// kBatch bags of `pool` indices in [0, rows): uniform, or Zipf(1.05) ranks mapped to rows by a
/// multiplicative hash so the hot rows are scattered over the table.
std::vector<std::int64_t> make_indices(std::size_t rows, std::size_t pool, bool zipf,
                                       std::uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::int64_t> idx(kBatch * pool);
  if (!zipf) {
    std::uniform_int_distribution<std::int64_t> u(0, static_cast<std::int64_t>(rows) - 1);
    for (auto& i : idx)
      i = u(rng);
    return idx;
  }
  std::vector<double> cdf(rows);
  double sum = 0;
  for (std::size_t r = 0; r < rows; ++r)
    cdf[r] = sum += std::pow(static_cast<double>(r + 1), -1.05);
  std::uniform_real_distribution<double> u(0.0, sum);
  for (auto& i : idx) {
    const auto r =
        static_cast<std::size_t>(std::lower_bound(cdf.begin(), cdf.end(), u(rng)) - cdf.begin());
    i = static_cast<std::int64_t>((r * 2654435761u) % rows);
  }
  return idx;
}

bool runnable(Isa isa) {
  return isa <= tilecomm::detected_isa();
}

// Args: isa (0 scalar, 1 avx2, 2 avx512), dim, pool, zipf (0/1), big (0: 4 x 100k, 1: 256 MiB),
// bf16 (0/1), prefetch (rows ahead; 0 = none).
void BM_Pool(benchmark::State& state) {
  const auto isa = static_cast<Isa>(state.range(0));
  const auto dim = static_cast<std::size_t>(state.range(1));
  const auto pool = static_cast<std::size_t>(state.range(2));
  const bool zipf = state.range(3) != 0, big = state.range(4) != 0, bf16 = state.range(5) != 0;
  const auto prefetch = static_cast<std::size_t>(state.range(6));
  if (!runnable(isa)) {
    state.SkipWithError("this CPU cannot run this ISA path");
    return;
  }
  const std::size_t count = big ? 1 : kSmallTables;
  const std::size_t rows = big ? kBigBytes / (dim * sizeof(float)) : kSmallRows;
  const Tables& t = tables(count, rows, dim);
  std::vector<std::vector<std::int64_t>> indices;
  for (std::size_t i = 0; i < count; ++i)
    indices.push_back(make_indices(rows, pool, zipf, static_cast<std::uint32_t>(i + 1)));
  std::vector<std::int64_t> offsets(kBatch + 1);
  for (std::size_t g = 0; g <= kBatch; ++g)
    offsets[g] = static_cast<std::int64_t>(g * pool);
  std::vector<float> out(kBatch * count * dim);
  const kn::EmbeddingPoolKernels k = kn::embedding_pool_for(isa);
  for (auto _ : state) {
    for (std::size_t i = 0; i < count; ++i) {
      kn::PoolJob job;
      job.indices = indices[i].data();
      job.offsets = offsets.data();
      job.bag1 = kBatch;
      job.dim = dim;
      job.dst = out.data() + i * dim;
      job.stride = count * dim;
      job.prefetch = prefetch;
      if (bf16)
        k.bf16(t.bf16[i].data(), job);
      else
        k.f32(t.f32[i].data(), job);
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  const double bytes = static_cast<double>(count * kBatch * pool * dim) * (bf16 ? 2 : 4);
  state.counters["GB/s"] = benchmark::Counter(bytes * static_cast<double>(state.iterations()) / 1e9,
                                              benchmark::Counter::kIsRate);
}

// Args: working set in MiB, prefetch (0/1).
void BM_Gather(benchmark::State& state) {
  const std::size_t bytes = static_cast<std::size_t>(state.range(0)) << 20;
  const bool prefetch = state.range(1) != 0;
  constexpr std::size_t kRow = 256, kReads = 1 << 20;
  Aligned<std::uint64_t> data(bytes / 8);
  for (std::size_t i = 0; i < bytes / 8; ++i)
    data[i] = 1;
  std::mt19937_64 rng(99);
  std::uniform_int_distribution<std::size_t> u(0, bytes / kRow - 1);
  std::vector<std::size_t> rows(kReads);
  for (auto& r : rows)
    r = u(rng) * (kRow / 8);
  for (auto _ : state) {
    std::uint64_t sum = 0;
    for (std::size_t i = 0; i < kReads; ++i) {
      if (prefetch && i + 16 < kReads) {
        const char* p = reinterpret_cast<const char*>(data.data() + rows[i + 16]);
        for (std::size_t l = 0; l < kRow; l += 64)
          _mm_prefetch(p + l, _MM_HINT_T0);
      }
      const std::uint64_t* row = data.data() + rows[i];
      for (std::size_t l = 0; l < kRow / 8; l += 8)
        sum += row[l];
    }
    benchmark::DoNotOptimize(sum);
  }
  state.counters["GB/s"] = benchmark::Counter(
      static_cast<double>(kReads * kRow * state.iterations()) / 1e9, benchmark::Counter::kIsRate);
}

void pool_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"isa", "dim", "pool", "zipf", "big", "bf16", "prefetch"});
  const int pf = static_cast<int>(kn::kPrefetchRowsAhead);
  // Grouped by table shape (outermost), so each shape's tables are filled once.
  for (int big : {0, 1})
    for (int dim : {64, 128})
      for (int zipf : {0, 1})
        for (int pool : {1, 8, 32, 100})
          for (int bf16 : {0, 1})
            for (int isa : {0, 1, 2})
              if (!bf16 || (!big && !zipf)) b->Args({isa, dim, pool, zipf, big, bf16, pf});
  // The prefetch distance, AVX-512, float32, uniform indices.
  for (int big : {0, 1})
    for (int dim : {64, 128})
      for (int pool : {8, 32})
        for (int ahead : {0, 4, 8, 16, 32})
          b->Args({2, dim, pool, 0, big, 0, ahead});
}

}  // namespace

// CPU time (the default): the machine is shared, and a memory stall is CPU time of this thread.
BENCHMARK(BM_Pool)->Apply(pool_args)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Gather)
    ->ArgNames({"MiB", "prefetch"})
    ->ArgsProduct({{100, 256}, {0, 1}})
    ->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
