// Embedding pooling: the scalar reference (portable C++, the order of additions every vector path
// keeps) and the choice of path. Compiled with -ffp-contract=off (ops/CMakeLists.txt).
#include "ops/kernels/embedding_pool.hpp"

#include <bit>

namespace tilecomm::kernels {
namespace {

inline float widen(float x) {
  return x;
}
inline float widen(std::uint16_t x) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(x) << 16);
}

}  // namespace

template <class T>
void pool_columns_scalar(const T* table, const PoolJob& job, std::size_t col0, std::size_t col1) {
  float* dst = job.dst;
  for (std::size_t g = job.bag0; g < job.bag1; ++g, dst += job.stride) {
    for (std::size_t d = col0; d < col1; ++d)
      dst[d] = 0.0f;
    const std::int64_t begin = job.offsets[g], end = job.offsets[g + 1];
    for (std::int64_t j = begin; j < end; ++j) {
      const T* row = table + static_cast<std::size_t>(job.indices[j]) * job.dim;
      if (job.weights == nullptr) {
        for (std::size_t d = col0; d < col1; ++d)
          dst[d] = dst[d] + widen(row[d]);
      } else {
        const float w = job.weights[j];
        for (std::size_t d = col0; d < col1; ++d) {
          const float product = w * widen(row[d]);  // rounded to float32: no FMA
          dst[d] = dst[d] + product;
        }
      }
    }
    if (job.mean && end > begin) {
      const float n = static_cast<float>(end - begin);
      for (std::size_t d = col0; d < col1; ++d)
        dst[d] = dst[d] / n;
    }
  }
}

template void pool_columns_scalar<float>(const float*, const PoolJob&, std::size_t, std::size_t);
template void pool_columns_scalar<std::uint16_t>(const std::uint16_t*, const PoolJob&, std::size_t,
                                                 std::size_t);

void pool_f32_scalar(const float* table, const PoolJob& job) {
  pool_columns_scalar(table, job, 0, job.dim);
}

void pool_bf16_scalar(const std::uint16_t* table, const PoolJob& job) {
  pool_columns_scalar(table, job, 0, job.dim);
}

EmbeddingPoolKernels embedding_pool_for(Isa isa) {
  switch (isa) {
    case Isa::Avx512:
      return {Isa::Avx512, pool_f32_avx512, pool_bf16_avx512};
    case Isa::Avx2:
      return {Isa::Avx2, pool_f32_avx2, pool_bf16_avx2};
    case Isa::Scalar:
      break;
  }
  return {Isa::Scalar, pool_f32_scalar, pool_bf16_scalar};
}

const EmbeddingPoolKernels& embedding_pool() {
  static const EmbeddingPoolKernels kernels = embedding_pool_for(active_isa());
  return kernels;
}

}  // namespace tilecomm::kernels
