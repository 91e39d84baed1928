#pragma once
/// \file gemv.hpp
/// Row-block GEMV kernels for the operators: out[i] = sum_j W[i][j] x[j] for i < rows, with W
/// row-major [rows x k] (contiguous rows) in float32 or bfloat16 (fp32 accumulation), x and out
/// float32. One scalar reference and one vector path per ISA, chosen at run time by
/// tilecomm::active_isa() (TILECOMM_ISA caps it).
///
/// Determinism: every path computes the same sums in the same order, so all paths (scalar, AVX2,
/// AVX-512) agree bitwise, for each weight type. Products are fused multiply-adds (fmaf, one
/// rounding) into 16 lanes, zero-padded at the K tail; the lanes are then added as a fixed tree:
/// s8[i] = l[i] + l[i+8], s4[i] = s8[i] + s8[i+4], s2[i] = s4[i] + s4[i+2], out = s2[0] + s2[1].
///  - fp32: element j goes to lane j mod 16, each lane in increasing j.
///  - bf16: per block of 32 elements, j = 32 b + 2 l goes to even[l] and j + 1 to odd[l] (the
///    layout a 16-bit shift and a mask give from one vector load, no cross-lane widening); lane
///    l = even[l] + odd[l]. bf16 -> fp32 is exact, but this order differs from fp32's, so the bf16
///    kernel equals the fp32 kernel on widened weights only to float rounding (bitwise when every
///    partial sum is exact, e.g. small integers).
///
/// Batched (bf16 only): out [rows x n] = W x with x [k x n] and out row-major, W read once for all
/// n columns (decode of several tokens). Element (i, c) is the chain acc = fma(W[i][j], x[j][c],
/// acc) for j = 0 .. k-1 from acc = +0 on every path (the vector path spreads columns and rows
/// over lanes and registers, never k), so the paths agree bitwise; this order differs from the
/// one-vector kernel's.

#include <cstddef>
#include <cstdint>

#include "tilecomm/isa.hpp"

namespace tilecomm::kernels {

/// out[0..rows) = W x, W float32 [rows x k] row-major. out must not overlap w or x.
using GemvF32Fn = void (*)(const float* w, std::size_t rows, std::size_t k, const float* x,
                           float* out);
/// out[0..rows) = W x, W bfloat16 bits [rows x k] row-major (fp32 accumulation).
using GemvBf16Fn = void (*)(const std::uint16_t* w, std::size_t rows, std::size_t k, const float* x,
                            float* out);
/// out[0..rows*n) = W x, W bfloat16 bits [rows x k], x [k x n], out [rows x n], row-major; out
/// must not overlap w or x.
using GemvBf16BatchFn = void (*)(const std::uint16_t* w, std::size_t rows, std::size_t k,
                                 std::size_t n, const float* x, float* out);

/// One ISA path's kernels.
struct GemvKernels {
  Isa isa;
  GemvF32Fn f32;
  GemvBf16Fn bf16;
  GemvBf16BatchFn bf16_batch;  ///< the AVX2 one on the AVX-512 path too
};

/// The kernels of path `isa` (the caller checks the CPU can run it: isa <= detected_isa()).
/// Paths not compiled into this build fall back to the next narrower one (`.isa` says which).
GemvKernels gemv_kernels_for(Isa isa) noexcept;
/// The kernels of tilecomm::active_isa(), looked up once.
const GemvKernels& gemv_kernels();

/// Dispatched entry points: gemv_kernels().f32 / .bf16.
void gemv_f32(const float* w, std::size_t rows, std::size_t k, const float* x, float* out);
void gemv_bf16(const std::uint16_t* w, std::size_t rows, std::size_t k, const float* x, float* out);
/// The fp32 GEMV of GemvAllReduce (every mode) and of its calibration: gemv_f32 on the AVX2 and
/// AVX-512 paths (bitwise the same on both, and 5-10 % faster than OpenBLAS sgemv on Zen 4:
/// docs/kernels.md), OpenBLAS cblas_sgemv on the scalar path, whose std::fma reference is slow
/// (results then follow OpenBLAS's order). Same arguments as gemv_f32.
void gemv_f32_operator(const float* w, std::size_t rows, std::size_t k, const float* x, float* out);
/// Dispatched: gemv_kernels().bf16_batch.
void gemv_bf16_batch(const std::uint16_t* w, std::size_t rows, std::size_t k, std::size_t n,
                     const float* x, float* out);

namespace detail {
// The per-ISA implementations (gemv.cpp, gemv_avx2.cpp, gemv_avx512.cpp).
void gemv_f32_scalar(const float* w, std::size_t rows, std::size_t k, const float* x, float* out);
void gemv_bf16_scalar(const std::uint16_t* w, std::size_t rows, std::size_t k, const float* x,
                      float* out);
void gemv_f32_avx2(const float* w, std::size_t rows, std::size_t k, const float* x, float* out);
void gemv_bf16_avx2(const std::uint16_t* w, std::size_t rows, std::size_t k, const float* x,
                    float* out);
void gemv_f32_avx512(const float* w, std::size_t rows, std::size_t k, const float* x, float* out);
void gemv_bf16_avx512(const std::uint16_t* w, std::size_t rows, std::size_t k, const float* x,
                      float* out);
void gemv_bf16_batch_scalar(const std::uint16_t* w, std::size_t rows, std::size_t k, std::size_t n,
                            const float* x, float* out);
void gemv_bf16_batch_avx2(const std::uint16_t* w, std::size_t rows, std::size_t k, std::size_t n,
                          const float* x, float* out);
}  // namespace detail

}  // namespace tilecomm::kernels
