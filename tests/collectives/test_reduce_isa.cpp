// Every reduce kernel this CPU can run (scalar, AVX2, AVX-512, called directly rather than through
// TILECOMM_ISA) returns bitwise the scalar kernel's results: every dtype and op, 1..5 sources,
// counts around the register widths and the 4-register steps, dst aliasing srcs[0], and values
// that exercise the corner cases (NaN, infinities, signed zeros, subnormals, bfloat16 rounding
// ties). The kernel reduce_n dispatches to is the one for active_isa().
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <type_traits>
#include <vector>

#include "collectives/reduce.hpp"
#include "tilecomm/isa.hpp"
#include "tilecomm/types.hpp"

namespace {

using tilecomm::bfloat16;
using tilecomm::DataType;
using tilecomm::Isa;
using tilecomm::ReduceOp;
namespace detail = tilecomm::detail;

std::vector<Isa> runnable_isas() {
  std::vector<Isa> out;
  for (Isa i : {Isa::Scalar, Isa::Avx2, Isa::Avx512})
    if (static_cast<int>(i) <= static_cast<int>(tilecomm::detected_isa())) out.push_back(i);
  return out;
}

float float_of_bits(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Mostly ordinary values; about one in eight is a corner case.
template <class T>
T random_value(std::mt19937& rng) {
  std::uniform_real_distribution<double> u(-100.0, 100.0);
  const bool special = rng() % 8 == 0;
  if constexpr (std::is_integral_v<T>) {
    if (special)
      return rng() % 2 ? std::numeric_limits<T>::max() - T(rng() % 3)
                       : std::numeric_limits<T>::min() + T(rng() % 3);
    return static_cast<T>(static_cast<T>(rng()) >> 2);
  } else {
    using F = std::conditional_t<std::is_same_v<T, double>, double, float>;
    F x = static_cast<F>(u(rng));
    if (special) {
      const F corners[] = {F(0),
                           -F(0),
                           std::numeric_limits<F>::infinity(),
                           -std::numeric_limits<F>::infinity(),
                           std::numeric_limits<F>::quiet_NaN(),
                           std::numeric_limits<F>::denorm_min() * F(rng() % 1000),
                           -std::numeric_limits<F>::min() / F(3),
                           std::numeric_limits<F>::max(),
                           F(1.0f + 0x1p-8f)};  // a bfloat16 rounding tie
      x = corners[rng() % (sizeof(corners) / sizeof(corners[0]))];
    }
    if constexpr (std::is_same_v<T, bfloat16>) {
      // Also raw patterns: subnormal bfloat16 values and NaNs with low payload bits.
      if (special && rng() % 4 == 0)
        return bfloat16(float_of_bits(rng() % 2 ? 0x7f810000u : 0x00050000u));
      return bfloat16(x);
    } else {
      return x;
    }
  }
}

template <class T>
bool is_nan(T x) {
  if constexpr (std::is_integral_v<T>)
    return false;
  else
    return std::isnan(static_cast<double>(static_cast<float>(x)));
}

// Bitwise equal, except that two NaNs are equal whatever their payloads: when a Sum meets two NaNs
// with different payloads, which payload survives depends on the operand order the compiler picked
// for the scalar `acc + x` (x86 returns the first operand's), not on the kernel's order.
template <class T>
std::size_t count_different(const std::vector<T>& got, const std::vector<T>& want) {
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    wrong += std::memcmp(&got[i], &want[i], sizeof(T)) != 0 && !(is_nan(got[i]) && is_nan(want[i]));
  return wrong;
}

template <class T>
void check_dtype(Isa isa) {
  const DataType dt = tilecomm::data_type_of<T>();
  const detail::ReduceKernel kernel = detail::reduce_kernel(isa);
  std::mt19937 rng(11);
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min})
    for (int n = 1; n <= 5; ++n)
      for (std::size_t count : {0, 1, 3, 7, 8, 15, 16, 17, 31, 33, 64, 65, 1000, 4099}) {
        std::vector<std::vector<T>> src(n, std::vector<T>(count));
        for (auto& s : src)
          for (auto& x : s)
            x = random_value<T>(rng);
        std::vector<const void*> ptrs;
        for (auto& s : src)
          ptrs.push_back(s.data());
        std::vector<T> want(count), got(count);
        detail::reduce_n_scalar(want.data(), ptrs.data(), n, count, dt, op);
        kernel(got.data(), ptrs.data(), n, count, dt, op);
        const auto what = [&] {
          return testing::Message()
                 << tilecomm::to_string(isa) << " " << tilecomm::to_string(dt) << " "
                 << tilecomm::to_string(op) << " n=" << n << " count=" << count;
        };
        ASSERT_EQ(count_different(got, want), 0u) << what();
        std::vector<T> first = src[0];  // dst may alias srcs[0]
        ptrs[0] = first.data();
        kernel(first.data(), ptrs.data(), n, count, dt, op);
        ASSERT_EQ(count_different(first, want), 0u) << "aliased dst, " << what();
      }
}

TEST(ReduceIsa, EveryRunnablePathEqualsScalarBitwise) {
  for (Isa isa : runnable_isas()) {
    check_dtype<float>(isa);
    check_dtype<double>(isa);
    check_dtype<std::int32_t>(isa);
    check_dtype<std::int64_t>(isa);
    check_dtype<bfloat16>(isa);
  }
}

TEST(ReduceIsa, MaxMinKeepTheScalarNaNAndZeroRules) {
  // std::max(acc, x): a NaN already in acc stays, a NaN in x is dropped; max(-0, +0) is -0.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> a{nan, 1.0f, -0.0f, 0.0f}, b{1.0f, nan, 0.0f, -0.0f};
  for (Isa isa : runnable_isas())
    for (ReduceOp op : {ReduceOp::Max, ReduceOp::Min}) {
      const void* srcs[] = {a.data(), b.data()};
      std::vector<float> out(4, 7.0f);
      detail::reduce_kernel(isa)(out.data(), srcs, 2, 4, DataType::Float32, op);
      EXPECT_TRUE(std::isnan(out[0])) << tilecomm::to_string(isa);
      EXPECT_EQ(out[1], 1.0f) << tilecomm::to_string(isa);
      EXPECT_TRUE(std::signbit(out[2])) << tilecomm::to_string(isa);
      EXPECT_FALSE(std::signbit(out[3])) << tilecomm::to_string(isa);
    }
}

TEST(ReduceIsa, EachIsaHasItsKernel) {
  EXPECT_EQ(detail::reduce_kernel(Isa::Scalar), &detail::reduce_n_scalar);
#if defined(__x86_64__)
  EXPECT_EQ(detail::reduce_kernel(Isa::Avx2), &detail::reduce_n_avx2);
  EXPECT_EQ(detail::reduce_kernel(Isa::Avx512), &detail::reduce_n_avx512);
#endif
  EXPECT_LE(static_cast<int>(tilecomm::active_isa()), static_cast<int>(tilecomm::detected_isa()));
}

}  // namespace
