// Unit tests without MPI: detail::reduce_n (every dtype and op, source order, block boundaries,
// aliasing, integer wrap-around, bfloat16 accumulated in float and rounded once) and bfloat16
// conversions (round to nearest even, NaN, infinities, signed zero, exact round trips); and
// detail::validate_layout on extents near the address-space limits (found by fuzz_collective_args);
// verify mode's call kinds (detail::register_call_kind, detail::describe).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <type_traits>
#include <vector>

#include "collectives/reduce.hpp"
#include "collectives/validate.hpp"
#include "collectives/verify.hpp"
#include "tilecomm/error.hpp"
#include "tilecomm/types.hpp"

namespace {

using tilecomm::bfloat16;
using tilecomm::DataType;
using tilecomm::ReduceOp;
using tilecomm::detail::reduce_n;

std::uint16_t bits_of(float f) {
  return bfloat16(f).bits;
}
float from_bits(std::uint16_t b) {
  bfloat16 h;
  h.bits = b;
  return static_cast<float>(h);
}

TEST(BFloat16, RoundsToNearestEven) {
  EXPECT_EQ(bits_of(1.0f), 0x3F80);
  EXPECT_EQ(bits_of(1.0f + 0x1p-8f), 0x3F80);             // tie -> even (down)
  EXPECT_EQ(bits_of(1.0f + 3 * 0x1p-8f), 0x3F82);         // tie -> even (up)
  EXPECT_EQ(bits_of(1.0f + 0x1p-8f + 0x1p-20f), 0x3F81);  // above the tie -> up
  EXPECT_EQ(bits_of(-1.0f - 0x1p-8f), 0xBF80);
  EXPECT_EQ(bits_of(3.0e38f), 0x7F62);                            // large finite stays finite
  EXPECT_EQ(bits_of(std::numeric_limits<float>::max()), 0x7F80);  // rounds up to +inf
}

TEST(BFloat16, SpecialValues) {
  EXPECT_EQ(bits_of(0.0f), 0x0000);
  EXPECT_EQ(bits_of(-0.0f), 0x8000);
  EXPECT_EQ(bits_of(std::numeric_limits<float>::infinity()), 0x7F80);
  EXPECT_EQ(bits_of(-std::numeric_limits<float>::infinity()), 0xFF80);
  EXPECT_TRUE(std::isnan(from_bits(bits_of(std::numeric_limits<float>::quiet_NaN()))));
  // A NaN whose payload sits only in the low 16 bits must not become infinity.
  std::uint32_t u = 0x7F800001u;
  float snan;
  std::memcpy(&snan, &u, 4);
  EXPECT_TRUE(std::isnan(from_bits(bits_of(snan))));
  EXPECT_EQ(bits_of(0x1p-133f), 0x0001);  // smallest bf16 subnormal
}

TEST(BFloat16, EveryNonNaNPatternRoundTrips) {
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    const float f = from_bits(static_cast<std::uint16_t>(b));
    if (std::isnan(f)) continue;
    ASSERT_EQ(bits_of(f), b) << "pattern " << b;
  }
}

// The reference: sources combined left to right in the accumulator type, stored once.
template <class T, class Acc>
T reference(const std::vector<std::vector<T>>& src, std::size_t i, ReduceOp op) {
  auto load = [](T v) -> Acc {
    if constexpr (std::is_same_v<T, bfloat16>)
      return static_cast<float>(v);
    else
      return v;
  };
  Acc acc = load(src[0][i]);
  for (std::size_t s = 1; s < src.size(); ++s) {
    const Acc x = load(src[s][i]);
    if (op == ReduceOp::Sum) {
      if constexpr (std::is_integral_v<Acc>)
        acc = static_cast<Acc>(static_cast<std::make_unsigned_t<Acc>>(acc) +
                               static_cast<std::make_unsigned_t<Acc>>(x));
      else
        acc = acc + x;
    } else if (op == ReduceOp::Max) {
      acc = std::max(acc, x);
    } else {
      acc = std::min(acc, x);
    }
  }
  if constexpr (std::is_same_v<T, bfloat16>)
    return bfloat16(acc);
  else
    return acc;
}

template <class T>
T random_value(std::mt19937& rng) {
  std::uniform_real_distribution<double> u(-100.0, 100.0);
  if constexpr (std::is_same_v<T, bfloat16>)
    return bfloat16(static_cast<float>(u(rng)));
  else if constexpr (std::is_integral_v<T>)
    return static_cast<T>(rng()) >> 2;
  else
    return static_cast<T>(u(rng));
}

template <class T, class Acc>
void check_dtype() {
  const DataType dt = tilecomm::data_type_of<T>();
  std::mt19937 rng(7);
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min})
    for (int n : {1, 2, 3, 5})
      for (std::size_t count : {0, 1, 1023, 1024, 1025, 3001}) {
        std::vector<std::vector<T>> src(n, std::vector<T>(count));
        for (auto& s : src)
          for (auto& x : s)
            x = random_value<T>(rng);
        std::vector<const void*> ptrs;
        for (auto& s : src)
          ptrs.push_back(s.data());
        std::vector<T> dst(count);
        reduce_n(dst.data(), ptrs.data(), n, count, dt, op);
        std::size_t wrong = 0;
        for (std::size_t i = 0; i < count; ++i) {
          const T want = reference<T, Acc>(src, i, op);
          wrong += std::memcmp(&dst[i], &want, sizeof(T)) != 0;
        }
        EXPECT_EQ(wrong, 0u) << tilecomm::to_string(dt) << " " << tilecomm::to_string(op)
                             << " n=" << n << " count=" << count;
        // dst may alias the first source.
        std::vector<T> first = src[0];
        ptrs[0] = first.data();
        reduce_n(first.data(), ptrs.data(), n, count, dt, op);
        EXPECT_TRUE(count == 0 || std::memcmp(first.data(), dst.data(), count * sizeof(T)) == 0)
            << "aliased dst, " << tilecomm::to_string(dt) << " " << tilecomm::to_string(op);
      }
}

TEST(ReduceN, Float32) {
  check_dtype<float, float>();
}
TEST(ReduceN, Float64) {
  check_dtype<double, double>();
}
TEST(ReduceN, Int32) {
  check_dtype<std::int32_t, std::int32_t>();
}
TEST(ReduceN, Int64) {
  check_dtype<std::int64_t, std::int64_t>();
}
TEST(ReduceN, BFloat16) {
  check_dtype<bfloat16, float>();
}

TEST(ReduceN, SourceOrderIsTheGivenOrder) {
  // (1e8 + 1) - 1e8 = 0 in float, 1e8 + (1 - 1e8) ... order matters; reduce_n must go left to
  // right.
  std::vector<float> a{1e8f}, b{1.0f}, c{-1e8f};
  const void* abc[] = {a.data(), b.data(), c.data()};
  const void* cab[] = {c.data(), a.data(), b.data()};
  float r1 = -1, r2 = -1;
  reduce_n(&r1, abc, 3, 1, DataType::Float32, ReduceOp::Sum);
  reduce_n(&r2, cab, 3, 1, DataType::Float32, ReduceOp::Sum);
  EXPECT_EQ(r1, (1e8f + 1.0f) + -1e8f);
  EXPECT_EQ(r2, (-1e8f + 1e8f) + 1.0f);
  EXPECT_NE(r1, r2);
}

TEST(ReduceN, BFloat16AccumulatesInFloatAndRoundsOnce) {
  // 1 + 2^-8 + 2^-8 = 1 + 2^-7: exact in bf16 only if the sum is not rounded after each step
  // (1 + 2^-8 alone is a tie that rounds to 1).
  std::vector<bfloat16> one{bfloat16(1.0f)}, tiny{bfloat16(0x1p-8f)};
  const void* srcs[] = {one.data(), tiny.data(), tiny.data()};
  bfloat16 out;
  reduce_n(&out, srcs, 3, 1, DataType::BFloat16, ReduceOp::Sum);
  EXPECT_EQ(out.bits, 0x3F81);
}

TEST(ReduceN, IntegerSumWrapsLikeMpi) {
  std::int32_t a = std::numeric_limits<std::int32_t>::max(), b = 1, r = 0;
  const void* s32[] = {&a, &b};
  reduce_n(&r, s32, 2, 1, DataType::Int32, ReduceOp::Sum);
  EXPECT_EQ(r, std::numeric_limits<std::int32_t>::min());
  std::int64_t c = std::numeric_limits<std::int64_t>::min(), d = -1, q = 0;
  const void* s64[] = {&c, &d};
  reduce_n(&q, s64, 2, 1, DataType::Int64, ReduceOp::Sum);
  EXPECT_EQ(q, std::numeric_limits<std::int64_t>::max());
}

}  // namespace

// Regression (fuzz_collective_args, UBSan pointer-overflow): the in-place address of
// reduce_scatter (recv - rank blocks) and allgather (recv + rank blocks) was formed with pointer
// arithmetic before anything bounded it by the address space; a large count on rank > 0 wrapped.
// Validation must reject (or accept) such calls without UB.
TEST(CheckLayout, InPlaceAddressNearTheAddressSpaceLimits) {
  using tilecomm::Collective;
  using tilecomm::detail::CollArgs;
  auto at = [](std::uintptr_t a) { return reinterpret_cast<void*>(a); };
  CollArgs rs;
  rs.coll = Collective::ReduceScatter;
  rs.dtype = DataType::Float32;
  rs.count = std::size_t{1} << 56;  // 2^58 bytes per rank, 2^59 send bytes on 2 ranks
  rs.recv = at(0x1000);
  rs.send = at(0x2000);
  EXPECT_THROW(tilecomm::detail::validate_layout(rs, 1, 2), tilecomm::Error);  // overlap
  EXPECT_FALSE(rs.in_place);
  CollArgs ag;
  ag.coll = Collective::AllGather;
  ag.dtype = DataType::Float32;
  ag.count = std::size_t{1} << 56;
  ag.recv = at(UINTPTR_MAX - 0xfff);
  ag.send = at(UINTPTR_MAX - 0xfff + 0x10);
  EXPECT_THROW(tilecomm::detail::validate_layout(ag, 1, 2), tilecomm::Error);  // overlap
  EXPECT_FALSE(ag.in_place);
  // The ordinary in-place cases are unchanged.
  std::vector<float> buf(8);
  CollArgs ip;
  ip.coll = Collective::ReduceScatter;
  ip.count = 4;
  ip.send = buf.data();
  ip.recv = buf.data() + 4;
  EXPECT_NO_THROW(tilecomm::detail::validate_layout(ip, 1, 2));
  EXPECT_TRUE(ip.in_place);
  ip.coll = Collective::AllGather;
  ip.in_place = false;
  ip.send = buf.data() + 4;
  ip.recv = buf.data();
  EXPECT_NO_THROW(tilecomm::detail::validate_layout(ip, 1, 2));
  EXPECT_TRUE(ip.in_place);
}

// Verify mode's call kinds: operators register theirs; the id depends on the name alone (so it is
// the same in every process whatever order operators first run in), registering again is a no-op,
// and a clash is an internal error.
TEST(CallKinds, RegistrationIsIdempotentAndNamesTheOperator) {
  using namespace tilecomm::detail;
  const CallKindId id = register_call_kind("UnitTestOperator", {"rows", "cols", nullptr});
  EXPECT_GE(id, kFirstOperatorKind);
  EXPECT_EQ(register_call_kind("UnitTestOperator", {"rows", "cols", ""}), id);
  CallFingerprint fp;
  fp.kind = id;
  fp.shape[0] = 3;
  fp.shape[1] = 4;
  std::memcpy(fp.algo, "fused", 5);
  EXPECT_EQ(describe(fp), "UnitTestOperator rows=3 cols=4 mode=fused");
  EXPECT_THROW(register_call_kind("UnitTestOperator", {"m", "", ""}), tilecomm::Error);
}

TEST(CallKinds, CollectivesKeepTheirNames) {
  using namespace tilecomm::detail;
  CallFingerprint fp;
  fp.kind = static_cast<CallKindId>(tilecomm::Collective::ReduceScatter);
  fp.dtype = static_cast<std::uint8_t>(DataType::BFloat16);
  fp.op = static_cast<std::uint8_t>(ReduceOp::Max);
  fp.shape[0] = 7;
  std::memcpy(fp.algo, "auto", 4);
  EXPECT_EQ(describe(fp), "reduce_scatter bfloat16 max recv_count=7 algo=auto");
}
