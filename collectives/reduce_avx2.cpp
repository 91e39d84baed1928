// reduce_n with AVX2: compiled with -mavx2 -mfma (collectives/CMakeLists.txt); reduce_n calls it
// only when active_isa() is Avx2 (or the tests call it directly on a CPU that has AVX2).
#include "collectives/reduce.hpp"

#if defined(__x86_64__)
#include <immintrin.h>

#include <cstdint>

#include "collectives/reduce_simd.hpp"

namespace tilecomm::detail {
namespace {

// Max/Min: std::max(a, b) is (a < b) ? b : a and VMAXPS(x, y) is (x > y) ? x : y, so
// std::max(acc, v) == VMAXPS(v, acc), NaNs and signed zeros included; likewise for min.
struct F32 {
  using T = float;
  using Reg = __m256;
  static constexpr std::size_t kLanes = 8;
  static Reg load(const T* p) { return _mm256_loadu_ps(p); }
  static void store(T* p, Reg v) { _mm256_storeu_ps(p, v); }
  template <ReduceOp Op>
  static Reg apply(Reg acc, Reg v) {
    if constexpr (Op == ReduceOp::Sum) return _mm256_add_ps(acc, v);
    if constexpr (Op == ReduceOp::Max) return _mm256_max_ps(v, acc);
    if constexpr (Op == ReduceOp::Min) return _mm256_min_ps(v, acc);
  }
};

struct F64 {
  using T = double;
  using Reg = __m256d;
  static constexpr std::size_t kLanes = 4;
  static Reg load(const T* p) { return _mm256_loadu_pd(p); }
  static void store(T* p, Reg v) { _mm256_storeu_pd(p, v); }
  template <ReduceOp Op>
  static Reg apply(Reg acc, Reg v) {
    if constexpr (Op == ReduceOp::Sum) return _mm256_add_pd(acc, v);
    if constexpr (Op == ReduceOp::Max) return _mm256_max_pd(v, acc);
    if constexpr (Op == ReduceOp::Min) return _mm256_min_pd(v, acc);
  }
};

// Integers: additions wrap (two's complement, as the scalar kernel's unsigned sum).
struct I32 {
  using T = std::int32_t;
  using Reg = __m256i;
  static constexpr std::size_t kLanes = 8;
  static Reg load(const T* p) { return _mm256_loadu_si256(reinterpret_cast<const Reg*>(p)); }
  static void store(T* p, Reg v) { _mm256_storeu_si256(reinterpret_cast<Reg*>(p), v); }
  template <ReduceOp Op>
  static Reg apply(Reg acc, Reg v) {
    if constexpr (Op == ReduceOp::Sum) return _mm256_add_epi32(acc, v);
    if constexpr (Op == ReduceOp::Max) return _mm256_max_epi32(acc, v);
    if constexpr (Op == ReduceOp::Min) return _mm256_min_epi32(acc, v);
  }
};

// AVX2 has no 64-bit max/min: compare and blend (equal values are identical, so which is kept
// does not matter).
struct I64 {
  using T = std::int64_t;
  using Reg = __m256i;
  static constexpr std::size_t kLanes = 4;
  static Reg load(const T* p) { return _mm256_loadu_si256(reinterpret_cast<const Reg*>(p)); }
  static void store(T* p, Reg v) { _mm256_storeu_si256(reinterpret_cast<Reg*>(p), v); }
  template <ReduceOp Op>
  static Reg apply(Reg acc, Reg v) {
    if constexpr (Op == ReduceOp::Sum) return _mm256_add_epi64(acc, v);
    const Reg acc_greater = _mm256_cmpgt_epi64(acc, v);
    if constexpr (Op == ReduceOp::Max) return _mm256_blendv_epi8(v, acc, acc_greater);
    if constexpr (Op == ReduceOp::Min) return _mm256_blendv_epi8(acc, v, acc_greater);
  }
};

// bfloat16: widened exactly to float32 (bits << 16), reduced as F32, rounded once when stored with
// bfloat16(float)'s integer rounding (nearest even; a NaN keeps its upper bits and is made quiet).
struct BF16 {
  using T = std::uint16_t;
  using Reg = __m256;
  static constexpr std::size_t kLanes = 8;
  static Reg load(const T* p) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
  }
  static void store(T* p, Reg v) {
    const __m256i u = _mm256_castps_si256(v);
    const __m256i hi = _mm256_srli_epi32(u, 16);
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)),
                                           _mm256_set1_epi32(0x7f800000));
    const __m256i odd = _mm256_and_si256(hi, _mm256_set1_epi32(1));
    const __m256i up = _mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), odd));
    const __m256i rounded = _mm256_srli_epi32(up, 16);
    const __m256i quiet = _mm256_or_si256(hi, _mm256_set1_epi32(0x40));
    const __m256i bits = _mm256_blendv_epi8(rounded, quiet, nan);  // all in 0..0xffff
    const __m128i packed =
        _mm_packus_epi32(_mm256_castsi256_si128(bits), _mm256_extracti128_si256(bits, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), packed);
  }
  template <ReduceOp Op>
  static Reg apply(Reg acc, Reg v) {
    return F32::apply<Op>(acc, v);
  }
};

}  // namespace

void reduce_n_avx2(void* dst, const void* const* srcs, int n, std::size_t count, DataType dtype,
                   ReduceOp op) {
  switch (dtype) {
    case DataType::Float32:
      return simd::reduce_op<F32>(dst, srcs, n, count, op);
    case DataType::Float64:
      return simd::reduce_op<F64>(dst, srcs, n, count, op);
    case DataType::Int32:
      return simd::reduce_op<I32>(dst, srcs, n, count, op);
    case DataType::Int64:
      return simd::reduce_op<I64>(dst, srcs, n, count, op);
    case DataType::BFloat16:
      return simd::reduce_op<BF16>(dst, srcs, n, count, op);
  }
  reduce_n_scalar(dst, srcs, n, count, dtype, op);  // not a DataType: the scalar kernel reports it
}

}  // namespace tilecomm::detail

#else  // not x86-64: never selected (reduce_kernel), defined so the library links everywhere

namespace tilecomm::detail {
void reduce_n_avx2(void* dst, const void* const* srcs, int n, std::size_t count, DataType dtype,
                   ReduceOp op) {
  reduce_n_scalar(dst, srcs, n, count, dtype, op);
}
}  // namespace tilecomm::detail

#endif
