// libtilecomm_pool_capi.so: one C entry point over kernels::embedding_pool_for(), so a Python
// script can call tilecomm's pooling kernel through ctypes and time it interleaved with PyTorch's
// embedding_bag in one process (bench/kernels/pool_vs_torch.py). Not part of the library's API.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "ops/kernels/embedding_pool.hpp"
#include "tilecomm/isa.hpp"

extern "C" {

/// Pools bags [0, batch) of a float32 (bf16 == 0) or bfloat16 (bf16 != 0, uint16 bits) table of
/// `dim` columns into out[batch x dim] (sum, or mean when mean != 0; weights may be null) with the
/// path `isa` (0 scalar, 1 AVX2, 2 AVX-512; -1 the dispatched one) and prefetch distance
/// `prefetch` (rows; negative: the default). Returns 0, or -1 when the CPU cannot run `isa`.
/// Indices are not checked (in range of the table is the caller's business).
int tilecomm_pool(const void* table, int bf16, const std::int64_t* indices,
                  const std::int64_t* offsets, const float* weights, std::size_t batch,
                  std::size_t dim, int mean, int isa, long prefetch, float* out) {
  namespace kn = tilecomm::kernels;
  kn::EmbeddingPoolKernels k = kn::embedding_pool();
  if (isa >= 0) {
    const auto want = static_cast<tilecomm::Isa>(isa);
    if (want > tilecomm::detected_isa()) return -1;
    k = kn::embedding_pool_for(want);
  }
  kn::PoolJob job;
  job.indices = indices;
  job.offsets = offsets;
  job.weights = weights;
  job.bag0 = 0;
  job.bag1 = batch;
  job.dim = dim;
  job.mean = mean != 0;
  job.dst = out;
  job.stride = dim;
  if (prefetch >= 0) job.prefetch = static_cast<std::size_t>(prefetch);
  if (bf16 != 0)
    k.bf16(static_cast<const std::uint16_t*>(table), job);
  else
    k.f32(static_cast<const float*>(table), job);
  return 0;
}

/// The gather roofline of a pooling call: reads one 4-byte word of every cache line of every row
/// the call gathers (indices[0 .. n), rows of `row_bytes`), prefetching the rows `prefetch`
/// indices ahead as the kernel does, and does nothing else; no pooling kernel can gather faster
/// from the same memory. Returns the words' xor so the loads are not optimised away.
std::uint32_t tilecomm_gather(const void* table, std::size_t row_bytes, const std::int64_t* indices,
                              std::size_t n, std::size_t prefetch) {
  const char* base = static_cast<const char*>(table);
  std::uint32_t sink = 0;
  for (std::size_t j = 0; j < n; ++j) {
    const std::size_t ahead = j + prefetch < n ? j + prefetch : j;
    const char* next = base + static_cast<std::size_t>(indices[ahead]) * row_bytes;
    const char* row = base + static_cast<std::size_t>(indices[j]) * row_bytes;
    for (std::size_t off = 0; off < row_bytes; off += 64) {
      sink ^= *reinterpret_cast<const std::uint32_t*>(row + off);
      _mm_prefetch(next + off, _MM_HINT_T0);
    }
  }
  return sink;
}

}  // extern "C"
