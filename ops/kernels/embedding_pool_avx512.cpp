// The AVX-512 pooling path: 16 floats per vector, up to 16 vectors (256 columns) in registers per
// pass, masked loads and stores for the dim % 16 tail. bfloat16 rows are widened exactly (zero
// extend, shift left 16); vdpbf16ps (AVX512_BF16) is not used: it pairs additions and would change
// the order of additions. Compiled with -mavx512f -mavx512bw -mavx512vl -ffp-contract=off only
// (ops/CMakeLists.txt); runs only when active_isa() is Avx512.
#include <immintrin.h>

#include "ops/kernels/embedding_pool.hpp"
#include "ops/kernels/embedding_pool_simd.hpp"

namespace tilecomm::kernels {
namespace {

struct Avx512 {
  using Reg = __m512;
  using Mask = __mmask16;
  static constexpr std::size_t kLanes = 16;
  static constexpr std::size_t kMaxVecs = 16;
  static constexpr bool kMaskedTail = true;
  static Mask full_mask() { return 0xFFFF; }
  static Mask tail_mask(std::size_t lanes) { return static_cast<Mask>((1u << lanes) - 1); }
  static Reg zero() { return _mm512_setzero_ps(); }
  static Reg set1(float f) { return _mm512_set1_ps(f); }
  static Reg load(const float* p, Mask m) { return _mm512_maskz_loadu_ps(m, p); }
  static Reg load(const std::uint16_t* p, Mask m) {
    // The maskz forms with a full mask: GCC 12's plain forms warn (-Wmaybe-uninitialized).
    const __m512i wide = _mm512_maskz_cvtepu16_epi32(0xFFFF, _mm256_maskz_loadu_epi16(m, p));
    return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xFFFF, wide, 16));
  }
  static Reg add(Reg a, Reg b) { return _mm512_add_ps(a, b); }
  static Reg mul(Reg a, Reg b) { return _mm512_mul_ps(a, b); }
  static Reg div(Reg a, Reg b) { return _mm512_div_ps(a, b); }
  static void store(float* p, Reg r, Mask m) { _mm512_mask_storeu_ps(p, m, r); }
};

}  // namespace

void pool_f32_avx512(const float* table, const PoolJob& job) {
  pool_simd<Avx512>(table, job);
}

void pool_bf16_avx512(const std::uint16_t* table, const PoolJob& job) {
  pool_simd<Avx512>(table, job);
}

}  // namespace tilecomm::kernels
