// reduce_n with AVX-512 F/BW/VL: compiled with -mavx512f -mavx512bw -mavx512vl
// (collectives/CMakeLists.txt); reduce_n calls it only when active_isa() is Avx512.
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
  using Reg = __m512;
  static constexpr std::size_t kLanes = 16;
  static Reg load(const T* p) { return _mm512_loadu_ps(p); }
  static void store(T* p, Reg v) { _mm512_storeu_ps(p, v); }
  template <ReduceOp Op>
  static Reg apply(Reg acc, Reg v) {
    if constexpr (Op == ReduceOp::Sum) return _mm512_add_ps(acc, v);
    if constexpr (Op == ReduceOp::Max) return _mm512_max_ps(v, acc);
    if constexpr (Op == ReduceOp::Min) return _mm512_min_ps(v, acc);
  }
};

struct F64 {
  using T = double;
  using Reg = __m512d;
  static constexpr std::size_t kLanes = 8;
  static Reg load(const T* p) { return _mm512_loadu_pd(p); }
  static void store(T* p, Reg v) { _mm512_storeu_pd(p, v); }
  template <ReduceOp Op>
  static Reg apply(Reg acc, Reg v) {
    if constexpr (Op == ReduceOp::Sum) return _mm512_add_pd(acc, v);
    if constexpr (Op == ReduceOp::Max) return _mm512_max_pd(v, acc);
    if constexpr (Op == ReduceOp::Min) return _mm512_min_pd(v, acc);
  }
};

// Integers: additions wrap (two's complement, as the scalar kernel's unsigned sum).
struct I32 {
  using T = std::int32_t;
  using Reg = __m512i;
  static constexpr std::size_t kLanes = 16;
  static Reg load(const T* p) { return _mm512_loadu_si512(p); }
  static void store(T* p, Reg v) { _mm512_storeu_si512(p, v); }
  template <ReduceOp Op>
  static Reg apply(Reg acc, Reg v) {
    if constexpr (Op == ReduceOp::Sum) return _mm512_add_epi32(acc, v);
    if constexpr (Op == ReduceOp::Max) return _mm512_max_epi32(acc, v);
    if constexpr (Op == ReduceOp::Min) return _mm512_min_epi32(acc, v);
  }
};

struct I64 {
  using T = std::int64_t;
  using Reg = __m512i;
  static constexpr std::size_t kLanes = 8;
  static Reg load(const T* p) { return _mm512_loadu_si512(p); }
  static void store(T* p, Reg v) { _mm512_storeu_si512(p, v); }
  template <ReduceOp Op>
  static Reg apply(Reg acc, Reg v) {
    if constexpr (Op == ReduceOp::Sum) return _mm512_add_epi64(acc, v);
    if constexpr (Op == ReduceOp::Max) return _mm512_max_epi64(acc, v);
    if constexpr (Op == ReduceOp::Min) return _mm512_min_epi64(acc, v);
  }
};

// bfloat16: widened exactly to float32 (bits << 16), reduced as F32, rounded once when stored with
// bfloat16(float)'s integer rounding (nearest even; a NaN keeps its upper bits and is made quiet).
// Not VCVTNEPS2BF16: it flushes subnormals to zero, bfloat16(float) does not.
struct BF16 {
  using T = std::uint16_t;
  using Reg = __m512;
  static constexpr std::size_t kLanes = 16;
  static Reg load(const T* p) {
    const __m512i w =
        _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
  }
  static void store(T* p, Reg v) {
    const __m512i u = _mm512_castps_si512(v);
    const __m512i hi = _mm512_srli_epi32(u, 16);
    const __mmask16 nan = _mm512_cmpgt_epi32_mask(
        _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
    const __m512i odd = _mm512_and_si512(hi, _mm512_set1_epi32(1));
    const __m512i up = _mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), odd));
    const __m512i rounded = _mm512_srli_epi32(up, 16);
    const __m512i quiet = _mm512_or_si512(hi, _mm512_set1_epi32(0x40));
    const __m512i bits = _mm512_mask_blend_epi32(nan, rounded, quiet);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi32_epi16(bits));
  }
  template <ReduceOp Op>
  static Reg apply(Reg acc, Reg v) {
    return F32::apply<Op>(acc, v);
  }
};

}  // namespace

void reduce_n_avx512(void* dst, const void* const* srcs, int n, std::size_t count, DataType dtype,
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
void reduce_n_avx512(void* dst, const void* const* srcs, int n, std::size_t count, DataType dtype,
                     ReduceOp op) {
  reduce_n_scalar(dst, srcs, n, count, dtype, op);
}
}  // namespace tilecomm::detail

#endif
