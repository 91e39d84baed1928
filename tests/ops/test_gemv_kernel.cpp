// The GEMV kernels (ops/kernels/gemv.hpp), one process, no MPI: every ISA path this CPU runs
// equals the scalar reference bitwise (the paths share one summation order), for fp32 and bf16
// weights, K tails 1..127 and row counts 1..9 (the 4-row blocks and their remainders), and the
// reference equals a float64 dot product to within float rounding.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "ops/kernels/gemv.hpp"
#include "tilecomm/types.hpp"

namespace tilecomm::kernels {
namespace {

struct Data {
  std::vector<float> w, x;
  std::vector<std::uint16_t> w16;
};

Data random_data(std::size_t rows, std::size_t k, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  Data d;
  for (std::size_t i = 0; i < rows * k; ++i) {
    d.w16.push_back(bfloat16(dist(rng)).bits);
    d.w.push_back(dist(rng));
  }
  for (std::size_t j = 0; j < k; ++j)
    d.x.push_back(dist(rng));
  return d;
}

std::vector<Isa> runnable_paths() {
  std::vector<Isa> paths;
  for (Isa isa : {Isa::Avx2, Isa::Avx512})
    if (isa <= detected_isa()) paths.push_back(isa);
  return paths;
}

float widen(std::uint16_t bits) {
  bfloat16 b;
  b.bits = bits;
  return static_cast<float>(b);
}

bool same_bits(float a, float b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

constexpr std::size_t kTails[] = {0, 1, 3, 15, 16, 17, 76, 127, 2048 + 5};

TEST(GemvKernel, EveryPathEqualsScalarBitwise) {
  const GemvKernels ref = gemv_kernels_for(Isa::Scalar);
  for (Isa isa : runnable_paths()) {
    const GemvKernels path = gemv_kernels_for(isa);
    ASSERT_EQ(path.isa, isa);
    for (std::size_t k : kTails)
      for (std::size_t rows = 1; rows <= 9; ++rows) {
        const Data d = random_data(rows, k, static_cast<unsigned>(k * 16 + rows));
        std::vector<float> want(rows), got(rows, -1.0f), want16(rows), got16(rows, -1.0f);
        ref.f32(d.w.data(), rows, k, d.x.data(), want.data());
        path.f32(d.w.data(), rows, k, d.x.data(), got.data());
        ref.bf16(d.w16.data(), rows, k, d.x.data(), want16.data());
        path.bf16(d.w16.data(), rows, k, d.x.data(), got16.data());
        for (std::size_t i = 0; i < rows; ++i) {
          EXPECT_TRUE(same_bits(got[i], want[i]))
              << to_string(isa) << " fp32 k " << k << " rows " << rows << " row " << i << ": "
              << got[i] << " != " << want[i];
          EXPECT_TRUE(same_bits(got16[i], want16[i]))
              << to_string(isa) << " bf16 k " << k << " rows " << rows << " row " << i << ": "
              << got16[i] << " != " << want16[i];
        }
      }
  }
}

// The batched bf16 kernel: every path (scalar included) equals a plain chain of std::fma per
// output element, bitwise, for n below, at and past a vector of 8 columns, rows around the 8-row
// blocks, and several K.
TEST(GemvKernel, Bf16BatchIsTheFmaChainOnEveryPath) {
  std::vector<Isa> paths = runnable_paths();
  paths.insert(paths.begin(), Isa::Scalar);
  for (std::size_t n : {2, 3, 8, 9, 17})
    for (std::size_t k : {1, 17, 300})
      for (std::size_t rows : {1, 7, 8, 9, 19}) {
        const Data d = random_data(rows, k * n, static_cast<unsigned>(n * 1000 + k * 10 + rows));
        // W: the first rows x k bf16 weights; x: k x n random floats
        const std::vector<float> x(d.w.begin(), d.w.begin() + static_cast<std::ptrdiff_t>(k * n));
        std::vector<float> want(rows * n);
        for (std::size_t i = 0; i < rows; ++i)
          for (std::size_t c = 0; c < n; ++c) {
            float acc = 0.0f;
            for (std::size_t j = 0; j < k; ++j)
              acc = std::fma(widen(d.w16[i * k + j]), x[j * n + c], acc);
            want[i * n + c] = acc;
          }
        for (Isa isa : paths) {
          std::vector<float> got(rows * n + 1, -1.0f);  // + 1: nothing written past the end
          gemv_kernels_for(isa).bf16_batch(d.w16.data(), rows, k, n, x.data(), got.data());
          int wrong = 0;
          for (std::size_t i = 0; i < want.size(); ++i)
            wrong += !same_bits(got[i], want[i]);
          EXPECT_EQ(wrong, 0) << to_string(isa) << " n " << n << " k " << k << " rows " << rows;
          EXPECT_EQ(got.back(), -1.0f) << to_string(isa) << " wrote past out";
        }
      }
}

TEST(GemvKernel, ScalarIsCloseToDoublePrecision) {
  const GemvKernels ref = gemv_kernels_for(Isa::Scalar);
  for (std::size_t k : kTails) {
    const std::size_t rows = 5;
    const Data d = random_data(rows, k, static_cast<unsigned>(k + 1));
    std::vector<float> y(rows), y16(rows);
    ref.f32(d.w.data(), rows, k, d.x.data(), y.data());
    ref.bf16(d.w16.data(), rows, k, d.x.data(), y16.data());
    for (std::size_t i = 0; i < rows; ++i) {
      double exact = 0, exact16 = 0, magnitude = 0;
      for (std::size_t j = 0; j < k; ++j) {
        exact += double(d.w[i * k + j]) * d.x[j];
        exact16 += double(widen(d.w16[i * k + j])) * d.x[j];
        magnitude += std::fabs(double(d.w[i * k + j]) * d.x[j]);
      }
      const double tol = 1e-6 * (magnitude + 1.0) * std::log2(double(k) + 2.0);
      EXPECT_NEAR(y[i], exact, tol) << "k " << k << " row " << i;
      EXPECT_NEAR(y16[i], exact16, 4 * tol + 1e-5) << "k " << k << " row " << i;
    }
  }
}

TEST(GemvKernel, SmallIntegersAreExactAndDispatchedPathIsActive) {
  EXPECT_EQ(gemv_kernels().isa, active_isa());
  const std::size_t rows = 7, k = 37;
  std::vector<float> w(rows * k), x(k), y(rows), y16(rows);
  std::vector<std::uint16_t> w16(rows * k);
  for (std::size_t i = 0; i < w.size(); ++i) {
    w[i] = static_cast<float>(static_cast<int>(i % 7) - 3);
    w16[i] = bfloat16(w[i]).bits;
  }
  for (std::size_t j = 0; j < k; ++j)
    x[j] = static_cast<float>(static_cast<int>(j % 5) - 2);
  gemv_f32(w.data(), rows, k, x.data(), y.data());
  gemv_bf16(w16.data(), rows, k, x.data(), y16.data());
  for (std::size_t i = 0; i < rows; ++i) {
    float exact = 0;
    for (std::size_t j = 0; j < k; ++j)
      exact += w[i * k + j] * x[j];
    EXPECT_EQ(y[i], exact) << "row " << i;
    EXPECT_EQ(y16[i], exact) << "row " << i;
  }
}

}  // namespace
}  // namespace tilecomm::kernels
