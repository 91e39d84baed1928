// The AVX2 path: 8 floats per vector, up to 8 vectors (64 columns) in registers per pass; the
// dim % 8 tail columns go through the scalar loop (pool_columns_scalar: same order of additions).
// Compiled with -mavx2 -mfma -ffp-contract=off only (ops/CMakeLists.txt): no FMA is formed, the
// multiply and the add of a weighted row stay separate as in the scalar reference. Runs only when
// active_isa() is Avx2 or wider.
#include <immintrin.h>

#include "ops/kernels/embedding_pool.hpp"
#include "ops/kernels/embedding_pool_simd.hpp"

namespace tilecomm::kernels {
namespace {

struct Avx2 {
  using Reg = __m256;
  struct Mask {};  // the tail is scalar: every vector is full
  static constexpr std::size_t kLanes = 8;
  static constexpr std::size_t kMaxVecs = 8;
  static constexpr bool kMaskedTail = false;
  static Mask full_mask() { return {}; }
  static Mask tail_mask(std::size_t) { return {}; }
  static Reg zero() { return _mm256_setzero_ps(); }
  static Reg set1(float f) { return _mm256_set1_ps(f); }
  static Reg load(const float* p, Mask) { return _mm256_loadu_ps(p); }
  static Reg load(const std::uint16_t* p, Mask) {
    const __m128i half = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(half), 16));
  }
  static Reg add(Reg a, Reg b) { return _mm256_add_ps(a, b); }
  static Reg mul(Reg a, Reg b) { return _mm256_mul_ps(a, b); }
  static Reg div(Reg a, Reg b) { return _mm256_div_ps(a, b); }
  static void store(float* p, Reg r, Mask) { _mm256_storeu_ps(p, r); }
};

}  // namespace

void pool_f32_avx2(const float* table, const PoolJob& job) {
  pool_simd<Avx2>(table, job);
}

void pool_bf16_avx2(const std::uint16_t* table, const PoolJob& job) {
  pool_simd<Avx2>(table, job);
}

}  // namespace tilecomm::kernels
