#pragma once
/// \file gemv_allreduce.hpp
/// GEMV + AllReduce: tensor-parallel decode. Rank r holds W_r [M x K_r] (row-major) and x_r [K_r];
/// every rank gets y = sum over r of W_r x_r [M].

#include <cstddef>
#include <memory>

#include "tilecomm/communicator.hpp"
#include "tilecomm/device.hpp"
#include "tilecomm/ops.hpp"

namespace tilecomm {

namespace detail {
struct GemvAllReduceImpl;
}

/// A GEMV+AllReduce context for one shape: owns the symmetric buffers, tile flags and plans.
/// Created collectively; M must be equal on every rank (K_r may differ, also 0), else every rank
/// raises Error(Mismatch). Calls to run() are collective and ordered like collectives. `comm` and
/// `device` must outlive the context.
///
/// Results: sequential and shaped reduce through tilecomm's AllReduce; fused reduces each row block
/// at its owner in rank order (two-shot). With exact inputs (small integers) all modes agree
/// bitwise; with general floats they agree to within float rounding of a p-term sum.
class GemvAllReduce {
 public:
  GemvAllReduce(Communicator& comm, Device& device, std::size_t m, std::size_t k_local,
                OpOptions options = {});
  ~GemvAllReduce();

  /// y = sum_r W_r x_r. `w` is [M x K_local] row-major, `x` [K_local], `y` [M]. y must not overlap
  /// w or x. Null pointers are allowed only for empty extents.
  void run(const float* w, const float* x, float* y, Mode mode);

  std::size_t m() const;
  std::size_t k_local() const;
  /// Rows per tile (row block) of the fused and compute kernels.
  std::size_t tile_rows() const;

 private:
  friend struct detail::BenchAccess;
  std::unique_ptr<detail::GemvAllReduceImpl> impl_;
};

}  // namespace tilecomm
