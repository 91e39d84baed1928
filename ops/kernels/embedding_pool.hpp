#pragma once
// Embedding-bag pooling kernels (sum, weighted sum, mean) over float32 or bfloat16 tables, with a
// scalar reference and AVX2 / AVX-512 paths chosen once at run time (tilecomm::active_isa()).
//
// Determinism: every path computes, for each output element d of bag g,
//   acc = +0.0f;  for j in [offsets[g], offsets[g+1]) in index order:  acc = acc + (w_j * row_j[d])
//   if mean and the bag is not empty:  acc = acc / float(bag size)
// with the product rounded to float32 before the add (separate multiply and add, never an FMA;
// the kernel sources are compiled with -ffp-contract=off) and an IEEE division for the mean. When
// there are no weights the multiply by 1.0f is exact and is skipped. So every ISA path gives
// results bitwise identical to the scalar reference, for float32 and bfloat16 tables alike.

#include <cstddef>
#include <cstdint>

#include "tilecomm/isa.hpp"

namespace tilecomm::kernels {

/// Indices ahead of the current one whose row the vector paths prefetch, one prefetch per cache
/// line of the pass's columns issued with that line's load (FBGEMM's distance and scheme;
/// bench/kernels/pool_vs_torch.py, docs/kernels.md).
inline constexpr std::size_t kPrefetchRowsAhead = 16;

/// The bags one call pools. Bag g (bag0 <= g < bag1) holds indices[offsets[g] .. offsets[g+1]);
/// its pooled vector (dim floats) goes to dst + (g - bag0) * stride. Indices must be in range of
/// the table (checked by the caller: the kernels do not check); offsets never decrease.
/// `weights` is per index (indexed like `indices`) or null for all 1. An empty bag gives zeros
/// (also with mean). The table must not overlap dst; dst rows must not overlap each other
/// (stride >= dim). Rows of the table [rows x dim] are row-major with no padding.
struct PoolJob {
  const std::int64_t* indices = nullptr;
  const std::int64_t* offsets = nullptr;
  const float* weights = nullptr;
  std::size_t bag0 = 0, bag1 = 0;
  std::size_t dim = 0;
  bool mean = false;
  float* dst = nullptr;
  std::size_t stride = 0;  ///< floats between consecutive bags' outputs
  /// Vector paths: prefetch the row this many indices ahead (within [offsets[bag0],
  /// offsets[bag1]): past the call's last index a row prefetches itself; indices past the call
  /// are never read); 0 = no look-ahead. Only speed depends on it, never the result.
  std::size_t prefetch = kPrefetchRowsAhead;
};

/// Pools bags from a float32 table.
using PoolF32Fn = void (*)(const float* table, const PoolJob& job);
/// Pools bags from a bfloat16 table (uint16 bit patterns: the upper half of a float32); each
/// element is widened exactly (shift left by 16), accumulation and output are float32.
using PoolBf16Fn = void (*)(const std::uint16_t* table, const PoolJob& job);

/// The kernels of one ISA path.
struct EmbeddingPoolKernels {
  Isa isa;
  PoolF32Fn f32;
  PoolBf16Fn bf16;
};

/// The kernels for active_isa(), chosen on the first call (thread-safe), then cached.
const EmbeddingPoolKernels& embedding_pool();
/// The kernels of one path (tests, benchmarks). The caller makes sure the CPU can run it
/// (isa <= detected_isa()); the path is not checked here.
EmbeddingPoolKernels embedding_pool_for(Isa isa);

/// The per-ISA entry points (same contract as PoolF32Fn / PoolBf16Fn).
void pool_f32_scalar(const float* table, const PoolJob& job);
void pool_bf16_scalar(const std::uint16_t* table, const PoolJob& job);
void pool_f32_avx2(const float* table, const PoolJob& job);
void pool_bf16_avx2(const std::uint16_t* table, const PoolJob& job);
void pool_f32_avx512(const float* table, const PoolJob& job);
void pool_bf16_avx512(const std::uint16_t* table, const PoolJob& job);

/// Scalar pooling of columns [col0, col1) only (same order of additions as the full kernels); the
/// AVX2 path uses it for the dim % 8 tail columns. T is float or std::uint16_t (bfloat16 bits).
template <class T>
void pool_columns_scalar(const T* table, const PoolJob& job, std::size_t col0, std::size_t col1);

}  // namespace tilecomm::kernels
