// gemm_perf: GFLOP/s of C[M x N] = A[M x K] B[K x N] on one core, at the MoE expert shapes of
// issue 14 (M x N x K: 1024^3, 2048 x 4096 x 1024, 2048 x 336 x 256):
//   sgemm/M/N/K                      OpenBLAS cblas_sgemm on the whole matrix (the roofline)
//   sgemm_tiles/M/N/K/rows/cols      OpenBLAS once per tile of rows x cols (cols 0: all of N),
//                                    tiles row by row, as the operators did before the kernel
//   gemm_tiles/M/N/K/rows/cols/isa   tilecomm::kernels: B packed once per iteration (as per call in
//                                    the operators; included in the time), then gemm_tile per tile,
//                                    column block by column block as GemmAllToAll orders its tiles
//                                    (isa: 1 avx2, 2 avx512; 0 scalar at 2048 x 336 x 256 only)
//   pack/K/N                         PackedWeights::pack of one K x N matrix alone
// GFLOPs = 2 M N K per CPU second (1e9; CPU time: the machine may be shared). Run on one core:
//   taskset -c 1 env OPENBLAS_NUM_THREADS=1 build/bench/kernels/gemm_perf
//       --benchmark_repetitions=3 --benchmark_report_aggregates_only=true --benchmark_min_time=0.3
// Figures: docs/kernels.md ("GEMM kernel"); bench/kernels/torch_gemm.py times torch.mm.
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "ops/kernels/gemm.hpp"

namespace {

using tilecomm::Isa;
namespace kn = tilecomm::kernels;

struct Inputs {
  std::vector<float> a, b, c;
};

/// Random inputs of one shape, made once per shape and reused by every benchmark.
Inputs& inputs(std::size_t m, std::size_t n, std::size_t k) {
  static std::size_t cm = 0, cn = 0, ck = 0;
  static Inputs in;
  if (m != cm || n != cn || k != ck) {
    std::mt19937 rng(42);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    in.a.resize(m * k);
    in.b.resize(k * n);
    for (float& v : in.a)
      v = dist(rng);
    for (float& v : in.b)
      v = dist(rng);
    in.c.assign(m * n, 0.0f);
    cm = m;
    cn = n;
    ck = k;
  }
  return in;
}

void set_rate(benchmark::State& state, double flops_per_iteration) {
  state.counters["GFLOPs"] =
      benchmark::Counter(flops_per_iteration * static_cast<double>(state.iterations()) / 1e9,
                         benchmark::Counter::kIsRate);
}

struct Shape {
  std::size_t m, n, k, rows, cols;
  explicit Shape(const benchmark::State& s)
      : m(static_cast<std::size_t>(s.range(0))),
        n(static_cast<std::size_t>(s.range(1))),
        k(static_cast<std::size_t>(s.range(2))),
        rows(s.range(3) > 0 ? static_cast<std::size_t>(s.range(3)) : m),
        cols(s.range(4) > 0 ? std::min(n, static_cast<std::size_t>(s.range(4))) : n) {}
  double flops() const { return 2.0 * static_cast<double>(m) * static_cast<double>(n) * k; }
};

void sgemm(const float* a, const float* b, float* c, const Shape& s, std::size_t rows,
           std::size_t cols) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(rows),
              static_cast<int>(cols), static_cast<int>(s.k), 1.0f, a, static_cast<int>(s.k), b,
              static_cast<int>(s.n), 0.0f, c, static_cast<int>(s.n));
}

void BM_sgemm(benchmark::State& state) {
  const Shape s(state);
  Inputs& in = inputs(s.m, s.n, s.k);
  for (auto _ : state) {
    sgemm(in.a.data(), in.b.data(), in.c.data(), s, s.m, s.n);
    benchmark::ClobberMemory();
  }
  set_rate(state, s.flops());
}

void BM_sgemm_tiles(benchmark::State& state) {
  const Shape s(state);
  Inputs& in = inputs(s.m, s.n, s.k);
  for (auto _ : state) {
    for (std::size_t r = 0; r < s.m; r += s.rows)
      for (std::size_t c = 0; c < s.n; c += s.cols)
        sgemm(in.a.data() + r * s.k, in.b.data() + c, in.c.data() + r * s.n + c, s,
              std::min(s.rows, s.m - r), std::min(s.cols, s.n - c));
    benchmark::ClobberMemory();
  }
  set_rate(state, s.flops());
}

void BM_gemm_tiles(benchmark::State& state) {
  const Shape s(state);
  const auto isa = static_cast<Isa>(state.range(5));
  if (isa > tilecomm::detected_isa()) {
    state.SkipWithError("this CPU cannot run the path");
    return;
  }
  const kn::GemmKernels path = kn::gemm_kernels_for(isa);
  Inputs& in = inputs(s.m, s.n, s.k);
  kn::PackedWeights w;
  w.reset(1, s.k, s.n);
  for (auto _ : state) {
    w.pack(0, in.b.data(), s.n, 0, w.panels());
    for (std::size_t c = 0; c < s.n; c += s.cols)
      for (std::size_t r = 0; r < s.m; r += s.rows)
        kn::gemm_tile(path, in.a.data() + r * s.k, s.k, std::min(s.rows, s.m - r), w, 0, c,
                      std::min(s.cols, s.n - c), in.c.data() + r * s.n + c, s.n);
    benchmark::ClobberMemory();
  }
  state.SetLabel(std::string(tilecomm::to_string(path.isa)));
  set_rate(state, s.flops());
}

void BM_pack(benchmark::State& state) {
  const auto k = static_cast<std::size_t>(state.range(0)),
             n = static_cast<std::size_t>(state.range(1));
  Inputs& in = inputs(1, n, k);
  kn::PackedWeights w;
  w.reset(1, k, n);
  for (auto _ : state) {
    w.pack(0, in.b.data(), n, 0, w.panels());
    benchmark::ClobberMemory();
  }
  state.counters["GBps"] = benchmark::Counter(
      static_cast<double>(k * n * sizeof(float)) * static_cast<double>(state.iterations()) / 1e9,
      benchmark::Counter::kIsRate);
}

/// The micro-kernel alone, its operands hot in L1: A 6 x kc, a kc x 16 panel, C 6 x 16.
void BM_micro(benchmark::State& state) {
  const auto isa = static_cast<Isa>(state.range(0));
  if (isa > tilecomm::detected_isa()) {
    state.SkipWithError("this CPU cannot run the path");
    return;
  }
  const auto kc = static_cast<std::size_t>(state.range(1));
  const kn::GemmKernels path = kn::gemm_kernels_for(isa);
  std::vector<float> a(kc * kn::kGemmMr, 0.5f), c(kn::kGemmMr * kn::kGemmNr);
  alignas(64) static float b[512 * kn::kGemmNr];
  for (auto _ : state) {
    path.micro[kn::kGemmMr - 1](kc, a.data(), kc, b, c.data(), kn::kGemmNr, true);
    benchmark::ClobberMemory();
  }
  set_rate(state, 2.0 * kc * kn::kGemmMr * kn::kGemmNr);
}

void register_all() {
  for (std::int64_t isa : {1, 2})
    benchmark::RegisterBenchmark("micro", BM_micro)->Args({isa, 256});
  const std::vector<std::vector<std::int64_t>> shapes = {
      {1024, 1024, 1024}, {2048, 4096, 1024}, {2048, 336, 256}};
  for (const auto& s : shapes) {
    benchmark::RegisterBenchmark("sgemm", BM_sgemm)->Args({s[0], s[1], s[2], 0, 0});
    for (std::int64_t rows : {32, 64, 128, 256})
      for (std::int64_t cols : {256, 0}) {
        benchmark::RegisterBenchmark("sgemm_tiles", BM_sgemm_tiles)
            ->Args({s[0], s[1], s[2], rows, cols});
        for (std::int64_t isa : {2, 1})
          benchmark::RegisterBenchmark("gemm_tiles", BM_gemm_tiles)
              ->Args({s[0], s[1], s[2], rows, cols, isa});
      }
    benchmark::RegisterBenchmark("pack", BM_pack)->Args({s[2], s[1]});
  }
  // The scalar reference path, at the smallest shape only (std::fma per element: slow).
  benchmark::RegisterBenchmark("gemm_tiles", BM_gemm_tiles)->Args({2048, 336, 256, 32, 256, 0});
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
