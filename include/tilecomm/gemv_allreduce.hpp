#pragma once
/// \file gemv_allreduce.hpp
/// GEMV + AllReduce: tensor-parallel decode. Rank r holds W_r [M x K_r] (row-major) and X_r
/// [K_r x n]; every rank gets Y = sum over r of W_r X_r [M x n]. n (the batch: tokens decoded
/// together) is fixed per context, default 1 (X_r and Y are then plain vectors).

#include <cstddef>
#include <memory>
#include <optional>

#include "tilecomm/communicator.hpp"
#include "tilecomm/device.hpp"
#include "tilecomm/ops.hpp"
#include "tilecomm/types.hpp"

namespace tilecomm {

namespace detail {
struct GemvAllReduceImpl;
}

/// A GEMV+AllReduce context for one shape: owns the symmetric buffers, tile flags and plans.
/// Created collectively; M and n must be equal on every rank (K_r may differ, also 0), else every
/// rank raises Error(Mismatch). Calls to run() are collective and ordered like collectives. `comm`
/// and `device` must outlive the context.
///
/// Fused protocol (OpOptions::fused_algorithm): one-shot (every rank reduces every row block
/// itself; the latency path) when the AllReduce payload M x n x 4 bytes <= 256 KiB on one node,
/// at every payload on two nodes (each node sends the other the payload either way), and on more
/// nodes while (nodes - 1) x the payload <= 48 KiB (one-shot sends the payload to every other
/// node); two-shot (each block reduced by its owner and sent back) otherwise, unless forced.
/// Results: sequential and shaped reduce through tilecomm's AllReduce; fused reduces each row block
/// in rank order (either protocol). With exact inputs (small integers) all modes agree bitwise;
/// with general floats they agree to within float rounding of a p-term sum. Every mode computes a
/// row block with the same kernel (float32: tilecomm's kernel for n = 1, whose result is the same
/// on the AVX2 and AVX-512 paths, OpenBLAS sgemv on the scalar path, sgemm for n > 1; bfloat16:
/// tilecomm's, whose result does not depend on the ISA path it takes, ops/kernels/gemv.hpp; once
/// per column of X for n = 2, 3, a batched one that reads W once for n >= 4). With n > 1 in
/// float32, a row's bits may depend on the tile size (sgemm's edge kernels): modes of one context
/// agree bitwise, contexts with other tiles to float rounding.
class GemvAllReduce {
 public:
  GemvAllReduce(Communicator& comm, Device& device, std::size_t m, std::size_t k_local,
                OpOptions options = {});
  /// The same for `batch` vectors per call (batch >= 1; 1 is the constructor above).
  GemvAllReduce(Communicator& comm, Device& device, std::size_t m, std::size_t k_local,
                std::size_t batch, OpOptions options = {});
  ~GemvAllReduce();

  /// Y = sum_r W_r X_r. `w` is [M x K_local], `x` [K_local x batch], `y` [M x batch], all
  /// row-major (so x[j * batch + c] is element j of vector c, y[i * batch + c] row i of result c;
  /// with batch 1, plain vectors). y must not overlap w or x. Null pointers are allowed only for
  /// empty extents.
  void run(const float* w, const float* x, float* y, Mode mode);
  /// The same with bfloat16 weights: half the bytes to stream; products and sums in float32 (the
  /// widening is exact), so the result equals run() on the widened weights to float rounding
  /// (bitwise when the sums are exact, e.g. small integers). Calls with float32 and bfloat16
  /// weights may alternate on one context.
  void run(const bfloat16* w, const float* x, float* y, Mode mode);
  /// w = nullptr (an empty W: m x k_local = 0) picks neither overload over the other.
  void run(std::nullptr_t w, const float* x, float* y, Mode mode) {
    run(static_cast<const float*>(w), x, y, mode);
  }

  std::size_t m() const;
  std::size_t k_local() const;
  /// Vectors per call (n).
  std::size_t batch() const;
  /// Rows per tile (row block) of the fused and compute kernels.
  std::size_t tile_rows() const;
  /// Mode::Auto's settled mode; empty while it is still trying modes (ops.hpp, Mode::Auto).
  std::optional<Mode> auto_choice() const;
  /// The fused protocol this context runs: OneShot or TwoShot (Auto resolved at creation).
  FusedAlgorithm fused_algorithm() const;

 private:
  friend struct detail::BenchAccess;
  std::unique_ptr<detail::GemvAllReduceImpl> impl_;
};

}  // namespace tilecomm
