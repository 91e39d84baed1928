// gemv_perf: GB/s of W streamed by one core for y = W x, at decode shapes (issue 14):
//   sgemv/M/K            OpenBLAS cblas_sgemv (fp32; run with OPENBLAS_NUM_THREADS=1)
//   gemv_f32/M/K/isa     tilecomm::kernels fp32 path `isa` (0 scalar, 1 avx2, 2 avx512)
//   gemv_bf16/M/K/isa    the same with bfloat16 W (half the bytes)
//   gemv_batch/M/K/n/v   n vectors at once (decode of n tokens), v: 0 the batched bf16 kernel
//                        (dispatched path), 1 the one-vector bf16 kernel once per column, 2
//                        OpenBLAS cblas_sgemm on fp32 W (M x K times K x n)
//   stream_read/MiB      the roofline: sum a large float array (bytes read per second)
// Counter GBps = bytes of W (or of the array) per CPU second, 1e9 bytes (CPU time: the machine may
// be shared). Medians of 3 runs (docs/kernels.md, "GEMV kernel"):
//   OPENBLAS_NUM_THREADS=1 build/bench/kernels/gemv_perf --benchmark_repetitions=3 \
//     --benchmark_report_aggregates_only=true --benchmark_min_time=0.3
#include <benchmark/benchmark.h>
#include <cblas.h>
#include <emmintrin.h>

#include <cstdint>
#include <random>
#include <vector>

#include "ops/kernels/gemv.hpp"
#include "tilecomm/types.hpp"

namespace {

using tilecomm::Isa;
namespace kernels = tilecomm::kernels;

constexpr std::size_t kMaxBatch = 8;  // x holds k x 8 floats, y m x 8

struct Inputs {
  std::vector<float> w, x, y;
  std::vector<std::uint16_t> w16;
};

/// Random inputs of one shape, made once per shape and reused by every benchmark.
Inputs& inputs(std::size_t m, std::size_t k) {
  static std::size_t cached_m = 0, cached_k = 0;
  static Inputs in;
  if (m != cached_m || k != cached_k) {
    std::mt19937 rng(42);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    in.w.assign(m * k, 0.0f);
    in.w16.assign(m * k, 0);
    for (std::size_t i = 0; i < m * k; ++i)
      in.w[i] = dist(rng);
    for (std::size_t i = 0; i < m * k; ++i)
      in.w16[i] = tilecomm::bfloat16(in.w[i]).bits;
    in.x.resize(k * kMaxBatch);
    for (float& v : in.x)
      v = dist(rng);
    in.y.assign(m * kMaxBatch, 0.0f);
    cached_m = m;
    cached_k = k;
  }
  return in;
}

void set_rate(benchmark::State& state, double bytes_per_iteration) {
  state.counters["GBps"] =
      benchmark::Counter(bytes_per_iteration * static_cast<double>(state.iterations()) / 1e9,
                         benchmark::Counter::kIsRate);
}

void BM_sgemv(benchmark::State& state) {
  const auto m = static_cast<std::size_t>(state.range(0)),
             k = static_cast<std::size_t>(state.range(1));
  Inputs& in = inputs(m, k);
  for (auto _ : state) {
    cblas_sgemv(CblasRowMajor, CblasNoTrans, static_cast<int>(m), static_cast<int>(k), 1.0f,
                in.w.data(), static_cast<int>(k), in.x.data(), 1, 0.0f, in.y.data(), 1);
    benchmark::ClobberMemory();
  }
  set_rate(state, static_cast<double>(m * k * sizeof(float)));
}

template <bool kBf16>
void BM_gemv(benchmark::State& state) {
  const auto m = static_cast<std::size_t>(state.range(0)),
             k = static_cast<std::size_t>(state.range(1));
  const auto isa = static_cast<Isa>(state.range(2));
  if (isa > tilecomm::detected_isa()) {
    state.SkipWithError("this CPU cannot run the path");
    return;
  }
  const kernels::GemvKernels path = kernels::gemv_kernels_for(isa);
  Inputs& in = inputs(m, k);
  for (auto _ : state) {
    if constexpr (kBf16)
      path.bf16(in.w16.data(), m, k, in.x.data(), in.y.data());
    else
      path.f32(in.w.data(), m, k, in.x.data(), in.y.data());
    benchmark::ClobberMemory();
  }
  state.SetLabel(std::string(tilecomm::to_string(path.isa)));
  set_rate(state, static_cast<double>(m * k * (kBf16 ? 2 : 4)));
}

/// n vectors: X [k x n] and Y [m x n] row-major (GemvAllReduce's batch layout).
void BM_gemv_batch(benchmark::State& state) {
  const auto m = static_cast<std::size_t>(state.range(0)),
             k = static_cast<std::size_t>(state.range(1)),
             n = static_cast<std::size_t>(state.range(2));
  const auto variant = state.range(3);
  Inputs& in = inputs(m, k);
  std::vector<float> column(k), result(m);
  for (auto _ : state) {
    if (variant == 0) {
      kernels::gemv_bf16_batch(in.w16.data(), m, k, n, in.x.data(), in.y.data());
    } else if (variant == 1) {
      for (std::size_t c = 0; c < n; ++c) {  // as GemvAllReduce does for n < 4
        for (std::size_t j = 0; j < k; ++j)
          column[j] = in.x[j * n + c];
        kernels::gemv_bf16(in.w16.data(), m, k, column.data(), result.data());
        for (std::size_t i = 0; i < m; ++i)
          in.y[i * n + c] = result[i];
      }
    } else {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(m),
                  static_cast<int>(n), static_cast<int>(k), 1.0f, in.w.data(), static_cast<int>(k),
                  in.x.data(), static_cast<int>(n), 0.0f, in.y.data(), static_cast<int>(n));
    }
    benchmark::ClobberMemory();
  }
  state.SetLabel(variant == 0   ? "batched bf16"
                 : variant == 1 ? "n x one-vector bf16"
                                : "sgemm fp32");
  set_rate(state, static_cast<double>(m * k * (variant == 2 ? 4 : 2)));
}

/// The roofline: sum a float array far larger than the caches (SSE2, 8 independent accumulators:
/// far more than the core's read bandwidth in instructions, so the loads are the limit).
void BM_stream_read(benchmark::State& state) {
  const std::size_t n = static_cast<std::size_t>(state.range(0)) * (1u << 20) / sizeof(float);
  std::vector<float> a(n, 1.0f);
  for (auto _ : state) {
    __m128 s[8];
    for (__m128& v : s)
      v = _mm_setzero_ps();
    for (std::size_t i = 0; i + 32 <= n; i += 32)
      for (int u = 0; u < 8; ++u)
        s[u] = _mm_add_ps(s[u], _mm_loadu_ps(a.data() + i + 4 * u));
    for (int u = 1; u < 8; ++u)
      s[0] = _mm_add_ps(s[0], s[u]);
    benchmark::DoNotOptimize(s[0]);
  }
  set_rate(state, static_cast<double>(n * sizeof(float)));
}

const std::vector<std::vector<std::int64_t>> kShapes = {
    {4096, 4096}, {8192, 2048}, {262144, 76}, {1024, 1024}};

void register_all() {
  for (const auto& s : kShapes) {
    benchmark::RegisterBenchmark("sgemv", BM_sgemv)->Args({s[0], s[1]});
    for (std::int64_t isa : {2, 1}) {
      benchmark::RegisterBenchmark("gemv_f32", BM_gemv<false>)->Args({s[0], s[1], isa});
      benchmark::RegisterBenchmark("gemv_bf16", BM_gemv<true>)->Args({s[0], s[1], isa});
    }
  }
  for (const auto& s : {kShapes[0], kShapes[1]})
    for (std::int64_t n = 1; n <= static_cast<std::int64_t>(kMaxBatch); ++n)
      for (std::int64_t v : {0, 1, 2})
        benchmark::RegisterBenchmark("gemv_batch", BM_gemv_batch)->Args({s[0], s[1], n, v});
  benchmark::RegisterBenchmark("stream_read", BM_stream_read)->Arg(512);
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
