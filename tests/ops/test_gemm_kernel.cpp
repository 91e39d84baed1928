// The GEMM kernel (ops/kernels/gemm.hpp), one process, no MPI: every ISA path this CPU runs equals
// the documented order bitwise (per element one fma chain in increasing k from +0, computed here by
// a plain loop), at odd shapes (M, N, K in 1, 3, 17, 65, 127, ...), across the K, row and column
// blocks of the driver, for any tiling of the matrix; a tile writes nothing outside itself; a
// re-pack follows the new weights; small integers are exact.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "ops/kernels/gemm.hpp"

namespace tilecomm::kernels {
namespace {

struct Problem {
  std::size_t m, n, k;
  std::vector<float> a, b;
};

Problem random_problem(std::size_t m, std::size_t n, std::size_t k, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  Problem p{m, n, k, std::vector<float>(m * k), std::vector<float>(k * n)};
  for (float& v : p.a)
    v = dist(rng);
  for (float& v : p.b)
    v = dist(rng);
  return p;
}

/// gemm.hpp's order, written out: c = fma(a[i][k], b[k][j], c) for k = 0.. K-1, from +0.
std::vector<float> reference(const Problem& p) {
  std::vector<float> c(p.m * p.n);
  for (std::size_t i = 0; i < p.m; ++i)
    for (std::size_t j = 0; j < p.n; ++j) {
      float acc = 0.0f;
      for (std::size_t k = 0; k < p.k; ++k)
        acc = std::fma(p.a[i * p.k + k], p.b[k * p.n + j], acc);
      c[i * p.n + j] = acc;
    }
  return c;
}

/// Every path the CPU runs: scalar, AVX2, AVX-512 (each as gemm_kernels_for gives it).
std::vector<GemmKernels> runnable_paths() {
  std::vector<GemmKernels> paths;
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512})
    if (isa <= detected_isa()) paths.push_back(gemm_kernels_for(isa));
  return paths;
}

/// C through gemm_tile over tiles of `rows` x `cols` (cols a multiple of kGemmNr), C's row stride
/// ldc >= n; C's padding columns keep the value -7.
std::vector<float> tiled(const GemmKernels& path, const Problem& p, std::size_t rows,
                         std::size_t cols, std::size_t ldc) {
  PackedWeights w;
  w.reset(1, p.k, p.n);
  w.pack(0, p.b.data(), p.n, 0, w.panels());
  std::vector<float> c(p.m * ldc, -7.0f);
  for (std::size_t r = 0; r < p.m; r += rows)
    for (std::size_t col = 0; col < p.n; col += cols)
      gemm_tile(path, p.a.data() + r * p.k, p.k, std::min(rows, p.m - r), w, 0, col,
                std::min(cols, p.n - col), c.data() + r * ldc + col, ldc);
  return c;
}

bool same_bits(float x, float y) {
  return std::memcmp(&x, &y, sizeof x) == 0;
}

/// Number of elements of c (row stride ldc) that differ from want bitwise, or whose padding
/// column changed.
std::size_t wrong(const std::vector<float>& c, const std::vector<float>& want, std::size_t m,
                  std::size_t n, std::size_t ldc) {
  std::size_t bad = 0;
  for (std::size_t i = 0; i < m; ++i) {
    for (std::size_t j = 0; j < n; ++j)
      bad += !same_bits(c[i * ldc + j], want[i * n + j]);
    for (std::size_t j = n; j < ldc; ++j)
      bad += c[i * ldc + j] != -7.0f;
  }
  return bad;
}

constexpr std::size_t kSizes[] = {1, 3, 17, 65, 127};

TEST(GemmKernel, EveryPathFollowsTheOrderBitwiseAtOddShapes) {
  for (const GemmKernels& path : runnable_paths())
    for (std::size_t m : kSizes)
      for (std::size_t n : kSizes)
        for (std::size_t k : kSizes) {
          const Problem p = random_problem(m, n, k, static_cast<unsigned>(m * 10007 + n * 101 + k));
          const std::vector<float> want = reference(p);
          EXPECT_EQ(wrong(tiled(path, p, m, n, n + 3), want, m, n, n + 3), 0u)
              << to_string(path.isa) << " M " << m << " N " << n << " K " << k;
        }
}

TEST(GemmKernel, ResultDoesNotDependOnTheTiling) {
  // K 1100 crosses two K blocks, M 100 three row blocks, N 300 two column blocks of the driver.
  const Problem p = random_problem(100, 300, 1100, 7);
  const std::vector<float> want = reference(p);
  struct Tiling {
    std::size_t rows, cols;
  };
  for (const GemmKernels& path : runnable_paths())
    for (Tiling t : {Tiling{100, 300}, Tiling{1, 16}, Tiling{5, 32}, Tiling{6, 48}, Tiling{7, 256},
                     Tiling{32, 256}, Tiling{50, 64}, Tiling{64, 300}})
      EXPECT_EQ(wrong(tiled(path, p, t.rows, t.cols, 301), want, p.m, p.n, 301), 0u)
          << to_string(path.isa) << " tile " << t.rows << " x " << t.cols;
}

TEST(GemmKernel, ZeroKWritesZerosAndEmptyTilesNothing) {
  PackedWeights w;
  w.reset(1, 0, 20);
  w.pack(0, nullptr, 20, 0, w.panels());
  for (const GemmKernels& path : runnable_paths()) {
    std::vector<float> c(3 * 21, -7.0f);
    gemm_tile(path, nullptr, 0, 3, w, 0, 0, 20, c.data(), 21);
    EXPECT_EQ(wrong(c, std::vector<float>(3 * 20, 0.0f), 3, 20, 21), 0u) << to_string(path.isa);
    gemm_tile(path, nullptr, 0, 0, w, 0, 0, 20, c.data(), 21);
    EXPECT_EQ(wrong(c, std::vector<float>(3 * 20, 0.0f), 3, 20, 21), 0u) << to_string(path.isa);
  }
}

TEST(GemmKernel, RepackFollowsTheWeightsAndIndicesStaySeparate) {
  Problem p = random_problem(9, 40, 33, 3), q = random_problem(9, 40, 33, 4);
  q.a = p.a;
  PackedWeights w;
  w.reset(2, p.k, p.n);
  w.pack(0, p.b.data(), p.n, 0, w.panels());
  w.pack(1, q.b.data(), q.n, 0, 1);  // panels packed in two parts
  w.pack(1, q.b.data(), q.n, 1, w.panels());
  std::vector<float> c(p.m * p.n);
  gemm_tile(p.a.data(), p.k, p.m, w, 1, 0, p.n, c.data(), p.n);
  EXPECT_EQ(wrong(c, reference(q), p.m, p.n, p.n), 0u);
  gemm_tile(p.a.data(), p.k, p.m, w, 0, 0, p.n, c.data(), p.n);
  EXPECT_EQ(wrong(c, reference(p), p.m, p.n, p.n), 0u);
  // The caller rewrites its buffer in place: a re-pack is what makes the kernel see it.
  p.b[5] += 1.0f;
  gemm_tile(p.a.data(), p.k, p.m, w, 0, 0, p.n, c.data(), p.n);
  EXPECT_NE(wrong(c, reference(p), p.m, p.n, p.n), 0u);
  w.pack(0, p.b.data(), p.n, 0, w.panels());
  gemm_tile(p.a.data(), p.k, p.m, w, 0, 0, p.n, c.data(), p.n);
  EXPECT_EQ(wrong(c, reference(p), p.m, p.n, p.n), 0u);
}

TEST(GemmKernel, SmallIntegersAreExactAndDispatchedPathIsActive) {
  // Every ISA has its own micro-kernels: the dispatch runs the active (widest allowed) path.
  EXPECT_EQ(gemm_kernels().isa, active_isa());
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512})
    EXPECT_EQ(gemm_kernels_for(isa).isa, isa) << to_string(isa);
  Problem p{13, 37, 29, std::vector<float>(13 * 29), std::vector<float>(29 * 37)};
  for (std::size_t i = 0; i < p.a.size(); ++i)
    p.a[i] = static_cast<float>(static_cast<int>(i % 7) - 3);
  for (std::size_t i = 0; i < p.b.size(); ++i)
    p.b[i] = static_cast<float>(static_cast<int>(i % 5) - 2);
  PackedWeights w;
  w.reset(1, p.k, p.n);
  w.pack(0, p.b.data(), p.n, 0, w.panels());
  std::vector<float> c(p.m * p.n);
  gemm_tile(p.a.data(), p.k, p.m, w, 0, 0, p.n, c.data(), p.n);
  for (std::size_t i = 0; i < p.m; ++i)
    for (std::size_t j = 0; j < p.n; ++j) {
      int exact = 0;
      for (std::size_t k = 0; k < p.k; ++k)
        exact += static_cast<int>(p.a[i * p.k + k]) * static_cast<int>(p.b[k * p.n + j]);
      EXPECT_EQ(c[i * p.n + j], static_cast<float>(exact)) << i << ", " << j;
    }
}

}  // namespace
}  // namespace tilecomm::kernels
