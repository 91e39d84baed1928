// GEMV kernels: the scalar reference (the summation order every path follows, gemv.hpp) and the
// run-time dispatch.
#include "ops/kernels/gemv.hpp"

#include <cblas.h>

#include <cmath>
#include <cstring>

namespace tilecomm::kernels {
namespace {

inline float widen(std::uint16_t bits) {
  const std::uint32_t u = std::uint32_t(bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

/// The fixed tree of gemv.hpp over 16 lanes.
float tree_sum(float* lane) {
  for (std::size_t half = 8; half >= 1; half /= 2)
    for (std::size_t l = 0; l < half; ++l)
      lane[l] = lane[l] + lane[l + half];
  return lane[0];
}

/// One fp32 row in the order of gemv.hpp: lane j mod 16, fmaf, zero padding, the tree.
float dot_row(const float* w, std::size_t k, const float* x) {
  float lane[16] = {};
  const std::size_t padded = (k + 15) / 16 * 16;
  for (std::size_t j0 = 0; j0 < padded; j0 += 16)
    for (std::size_t l = 0; l < 16; ++l) {
      const std::size_t j = j0 + l;
      lane[l] = std::fma(j < k ? w[j] : 0.0f, j < k ? x[j] : 0.0f, lane[l]);
    }
  return tree_sum(lane);
}

/// One bf16 row in the order of gemv.hpp: even[l] gets j = 32 b + 2 l, odd[l] j = 32 b + 2 l + 1;
/// lane l = even[l] + odd[l], then the tree.
float dot_row(const std::uint16_t* w, std::size_t k, const float* x) {
  float even[16] = {}, odd[16] = {};
  const std::size_t padded = (k + 31) / 32 * 32;
  for (std::size_t j0 = 0; j0 < padded; j0 += 32)
    for (std::size_t l = 0; l < 16; ++l) {
      const std::size_t je = j0 + 2 * l, jo = je + 1;
      even[l] = std::fma(je < k ? widen(w[je]) : 0.0f, je < k ? x[je] : 0.0f, even[l]);
      odd[l] = std::fma(jo < k ? widen(w[jo]) : 0.0f, jo < k ? x[jo] : 0.0f, odd[l]);
    }
  for (std::size_t l = 0; l < 16; ++l)
    even[l] = even[l] + odd[l];
  return tree_sum(even);
}

template <class T>
void gemv_scalar(const T* w, std::size_t rows, std::size_t k, const float* x, float* out) {
  for (std::size_t i = 0; i < rows; ++i)
    out[i] = dot_row(w + i * k, k, x);
}

}  // namespace

namespace detail {
void gemv_f32_scalar(const float* w, std::size_t rows, std::size_t k, const float* x, float* out) {
  gemv_scalar(w, rows, k, x, out);
}
void gemv_bf16_scalar(const std::uint16_t* w, std::size_t rows, std::size_t k, const float* x,
                      float* out) {
  gemv_scalar(w, rows, k, x, out);
}
void gemv_bf16_batch_scalar(const std::uint16_t* w, std::size_t rows, std::size_t k, std::size_t n,
                            const float* x, float* out) {
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t c = 0; c < n; ++c) {
      float acc = 0.0f;
      for (std::size_t j = 0; j < k; ++j)
        acc = std::fma(widen(w[i * k + j]), x[j * n + c], acc);
      out[i * n + c] = acc;
    }
}
}  // namespace detail

GemvKernels gemv_kernels_for(Isa isa) noexcept {
  switch (isa) {
    case Isa::Avx512:
      return {Isa::Avx512, detail::gemv_f32_avx512, detail::gemv_bf16_avx512,
              detail::gemv_bf16_batch_avx2};
    case Isa::Avx2:
      return {Isa::Avx2, detail::gemv_f32_avx2, detail::gemv_bf16_avx2,
              detail::gemv_bf16_batch_avx2};
    case Isa::Scalar:
      break;
  }
  return {Isa::Scalar, detail::gemv_f32_scalar, detail::gemv_bf16_scalar,
          detail::gemv_bf16_batch_scalar};
}

const GemvKernels& gemv_kernels() {
  static const GemvKernels kernels = gemv_kernels_for(active_isa());
  return kernels;
}

void gemv_f32(const float* w, std::size_t rows, std::size_t k, const float* x, float* out) {
  gemv_kernels().f32(w, rows, k, x, out);
}
void gemv_f32_operator(const float* w, std::size_t rows, std::size_t k, const float* x,
                       float* out) {
  if (gemv_kernels().isa != Isa::Scalar) return gemv_kernels().f32(w, rows, k, x, out);
  const int ri = static_cast<int>(rows), ki = static_cast<int>(k);
  cblas_sgemv(CblasRowMajor, CblasNoTrans, ri, ki, 1.0f, w, ki, x, 1, 0.0f, out, 1);
}

void gemv_bf16(const std::uint16_t* w, std::size_t rows, std::size_t k, const float* x,
               float* out) {
  gemv_kernels().bf16(w, rows, k, x, out);
}
void gemv_bf16_batch(const std::uint16_t* w, std::size_t rows, std::size_t k, std::size_t n,
                     const float* x, float* out) {
  gemv_kernels().bf16_batch(w, rows, k, n, x, out);
}

}  // namespace tilecomm::kernels
