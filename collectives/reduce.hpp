#pragma once
// Element-wise reduction kernels. Inputs are combined in the order given (callers pass them in rank
// order), so results are deterministic. bfloat16 accumulates in float32 and rounds once.

#include <cstddef>

#include "tilecomm/types.hpp"

namespace tilecomm::detail {

/// dst[i] = srcs[0][i] op srcs[1][i] op ... op srcs[n-1][i], for i < count. dst may alias srcs[0]
/// (only srcs[0]). n >= 1.
void reduce_n(void* dst, const void* const* srcs, int n, std::size_t count, DataType dtype,
              ReduceOp op);

/// dst[i] = dst[i] op src[i].
inline void reduce_into(void* dst, const void* src, std::size_t count, DataType dtype,
                        ReduceOp op) {
  const void* srcs[2] = {dst, src};
  reduce_n(dst, srcs, 2, count, dtype, op);
}

}  // namespace tilecomm::detail
