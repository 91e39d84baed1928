// GEMV kernels, AVX-512 path (compiled with -mavx512f -mavx512bw -mavx512vl; ops/CMakeLists.txt).
// Four rows at a time share each load of x; the K tail is a masked load (zeros, as the reference
// pads), so the order is that of gemv.hpp. bf16 weights are widened exactly (shift or mask);
// avx512_bf16's dot product is not used: it would round x to bf16, changing the result.
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), which its -Wuninitialized flags
// falsely (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wuninitialized"
#if defined(__GNUC__) && !defined(__clang__)  // a GCC-only warning group (the fuzz build is clang)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <vector>

#include "ops/kernels/gemv.hpp"

namespace tilecomm::kernels::detail {
namespace {

constexpr std::size_t kRows = 4;  // the row loops below are unrolled: accumulators in registers

/// The fixed tree of gemv.hpp: (i, i+8), (i, i+4), (i, i+2), (0, 1).
inline float tree_sum(__m512 a) {
  const __m256 lo = _mm512_castps512_ps256(a);
  const __m256 hi = _mm512_castps512_ps256(_mm512_shuffle_f32x4(a, a, 0xee));
  const __m256 s8 = _mm256_add_ps(lo, hi);
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

/// fp32: out[0..R) for R rows starting at w (row stride k); lane l holds elements j = l mod 16.
template <std::size_t R>
inline void row_block(const float* w, std::size_t k, const float* x, float* out) {
  __m512 acc[R];
#pragma GCC unroll 8
  for (std::size_t r = 0; r < R; ++r)
    acc[r] = _mm512_setzero_ps();
  std::size_t j = 0;
  for (; j + 16 <= k; j += 16) {
    const __m512 xv = _mm512_loadu_ps(x + j);
#pragma GCC unroll 8
    for (std::size_t r = 0; r < R; ++r) {
      acc[r] = _mm512_fmadd_ps(_mm512_loadu_ps(w + r * k + j), xv, acc[r]);
    }
  }
  if (j < k) {
    const auto m = static_cast<__mmask16>((1u << (k - j)) - 1u);
    const __m512 xv = _mm512_maskz_loadu_ps(m, x + j);
#pragma GCC unroll 8
    for (std::size_t r = 0; r < R; ++r)
      acc[r] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, w + r * k + j), xv, acc[r]);
  }
#pragma GCC unroll 8
  for (std::size_t r = 0; r < R; ++r)
    out[r] = tree_sum(acc[r]);
}

/// bf16: 32 elements per step, the even ones (a 16-bit shift) into lanes of `even`, the odd ones
/// (masking the low half) into `odd`: two cheap in-lane ops per 32 weights. x comes split to
/// match (split_x: xe[16 s + l] = x[32 s + 2 l], xo[16 s + l] = x[32 s + 2 l + 1], zero past k),
/// once per call instead of two permutes per step and row block.
template <std::size_t R>
inline void row_block(const std::uint16_t* w, std::size_t k, const float* xe, const float* xo,
                      float* out) {
  const __m512i high = _mm512_set1_epi32(static_cast<int>(0xffff0000u));
  __m512 even[R], odd[R];
#pragma GCC unroll 8
  for (std::size_t r = 0; r < R; ++r)
    even[r] = odd[r] = _mm512_setzero_ps();
  auto step = [&](std::size_t j, __mmask32 m) {
    const __m512 ve = _mm512_load_ps(xe + j / 2), vo = _mm512_load_ps(xo + j / 2);
#pragma GCC unroll 8
    for (std::size_t r = 0; r < R; ++r) {
      const __m512i v = _mm512_maskz_loadu_epi16(m, w + r * k + j);
      even[r] = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_slli_epi32(v, 16)), ve, even[r]);
      odd[r] = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_and_si512(v, high)), vo, odd[r]);
    }
  };
  std::size_t j = 0;
  for (; j + 32 <= k; j += 32)
    step(j, ~__mmask32{0});
  if (j < k) step(j, static_cast<__mmask32>((1ull << (k - j)) - 1u));
#pragma GCC unroll 8
  for (std::size_t r = 0; r < R; ++r)
    out[r] = tree_sum(_mm512_add_ps(even[r], odd[r]));
}

/// x split into its even and odd elements per block of 32 (see row_block), zero-padded to whole
/// blocks; 64-byte aligned, in a buffer of this thread's.
void split_x(const float* x, std::size_t k, const float*& xe, const float*& xo) {
  const std::size_t blocks = (k + 31) / 32;
  struct alignas(64) Block {
    float v[16];
  };
  thread_local std::vector<Block> buffer;
  if (buffer.size() < 2 * blocks + 1) buffer.resize(2 * blocks + 1);  // + 1: k = 0 too
  const __m512i idx_even =
      _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i idx_odd = _mm512_add_epi32(idx_even, _mm512_set1_epi32(1));
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::size_t j = 32 * b;
    const __mmask32 m =
        k - j >= 32 ? ~__mmask32{0} : static_cast<__mmask32>((1ull << (k - j)) - 1u);
    const __m512 x0 = _mm512_maskz_loadu_ps(static_cast<__mmask16>(m), x + j);
    const __m512 x1 = _mm512_maskz_loadu_ps(static_cast<__mmask16>(m >> 16), x + j + 16);
    _mm512_store_ps(buffer[b].v, _mm512_permutex2var_ps(x0, idx_even, x1));
    _mm512_store_ps(buffer[blocks + b].v, _mm512_permutex2var_ps(x0, idx_odd, x1));
  }
  xe = buffer[0].v;
  xo = buffer[blocks].v;
}

void gemv(const float* w, std::size_t rows, std::size_t k, const float* x, float* out) {
  std::size_t i = 0;
  for (; i + kRows <= rows; i += kRows)
    row_block<kRows>(w + i * k, k, x, out + i);
  for (; i < rows; ++i)
    row_block<1>(w + i * k, k, x, out + i);
}

void gemv(const std::uint16_t* w, std::size_t rows, std::size_t k, const float* x, float* out) {
  const float *xe = nullptr, *xo = nullptr;
  split_x(x, k, xe, xo);
  std::size_t i = 0;
  for (; i + kRows <= rows; i += kRows)
    row_block<kRows>(w + i * k, k, xe, xo, out + i);
  for (; i < rows; ++i)
    row_block<1>(w + i * k, k, xe, xo, out + i);
}

}  // namespace

void gemv_f32_avx512(const float* w, std::size_t rows, std::size_t k, const float* x, float* out) {
  gemv(w, rows, k, x, out);
}
void gemv_bf16_avx512(const std::uint16_t* w, std::size_t rows, std::size_t k, const float* x,
                      float* out) {
  gemv(w, rows, k, x, out);
}

}  // namespace tilecomm::kernels::detail
