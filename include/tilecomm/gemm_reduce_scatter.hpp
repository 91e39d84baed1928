#pragma once
/// \file gemm_reduce_scatter.hpp
/// GEMM + ReduceScatter: a row-parallel linear layer whose output stays sharded by rows, as in
/// tensor parallelism with sequence-parallel activations (the async-TP pair with AllGather + GEMM).
/// Rank r holds A_r [M x K_r] (its slice of the activations' inner dimension, row-major) and W_r
/// [K_r x N] (the matching rows of the weight, row-major). Y = sum over r of A_r W_r [M x N] is
/// scattered by rows: rank q gets rows [q M/p, (q+1) M/p).

#include <cstddef>
#include <memory>
#include <optional>

#include "tilecomm/communicator.hpp"
#include "tilecomm/device.hpp"
#include "tilecomm/ops.hpp"

namespace tilecomm {

namespace detail {
struct GemmReduceScatterImpl;
}

/// A context for one shape. Created collectively; M and N must agree on every rank, and M must be a
/// multiple of the number of ranks (every rank receives the same number of rows, as with
/// reduce_scatter), else every rank raises Error(Mismatch) / Error(InvalidArgument). K_r may differ
/// across ranks, also 0. Calls to run() are collective and ordered like collectives. `comm` and
/// `device` must outlive the context.
///
/// Results: every mode computes A_r W_r with the same kernel, whose result does not depend on the
/// tiling (docs/kernels.md, "GEMM kernel"); sequential and shaped reduce through tilecomm's
/// ReduceScatter, fused reduces each row block at its owner in rank order. With exact inputs
/// (small integers) all modes agree bitwise; with general floats, to within float rounding of a
/// p-term sum.
///
/// W is packed per call: each run(a, w, ...) first copies W into the context's panel buffer (K_r x
/// N rounded up to 16 floats, allocated at construction), spread over the device's CUs. The caller
/// may change W freely between calls, not during one; nothing is cached across calls. For a W that
/// stays the same (inference), set_weights() packs it once and run(a, y, mode) skips the packing.
class GemmReduceScatter {
 public:
  GemmReduceScatter(Communicator& comm, Device& device, std::size_t m, std::size_t k_local,
                    std::size_t n, OpOptions options = {});
  ~GemmReduceScatter();

  /// y = rows [row_begin(), row_begin() + rows_local()) of sum_r A_r W_r. `a` is [M x K_local], `w`
  /// [K_local x N] (read, packed, at the start of the call), `y` [rows_local() x N], all
  /// row-major; y must not overlap a or w. Null pointers are allowed only for empty extents.
  void run(const float* a, const float* w, float* y, Mode mode);

  /// Packs W ([K_local x N] row-major) once, for run(a, y, mode): a full read and write of W that
  /// run(a, w, ...) repeats every call, as costly as the GEMM itself when M is small (decode).
  /// W is read now, not kept: call set_weights() again after changing it. Local (no
  /// communication); null only when K_local = 0. A call that passes w packs it itself and ends
  /// this packing (run(a, y, mode) then raises Error(InvalidArgument) until set_weights()).
  void set_weights(const float* w);
  /// run() on the W packed by set_weights() (see there).
  void run(const float* a, float* y, Mode mode);

  std::size_t m() const;
  std::size_t n() const;
  std::size_t k_local() const;
  /// Rows of Y this rank receives (M / ranks), and the first of them.
  std::size_t rows_local() const;
  std::size_t row_begin() const;
  /// Rows per tile of the compute and fused kernels.
  std::size_t tile_rows() const;
  /// Mode::Auto's settled mode; empty while it is still trying modes (ops.hpp, Mode::Auto).
  std::optional<Mode> auto_choice() const;

 private:
  friend struct detail::BenchAccess;
  std::unique_ptr<detail::GemmReduceScatterImpl> impl_;
};

}  // namespace tilecomm
