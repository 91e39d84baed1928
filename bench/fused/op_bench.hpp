#pragma once
// One benchmarked operator: built for a size and a ratio knob, it runs each variant the
// comparison needs (compute only, collective only, and the three modes) and checks a mode's output
// against sequential's.
#include <memory>
#include <string>

#include "tilecomm/tilecomm.hpp"

namespace tilecomm::bench {

/// Shape knobs. `size` scales compute and communication together (GEMV: M rows, embedding: global
/// batch, MoE: tokens per rank, GEMM+ReduceScatter: M rows); `ratio` moves the balance between
/// them (GEMV: K per rank, embedding: indices per bag, MoE: K, GEMM+ReduceScatter: K per rank).
struct Shape {
  std::size_t size = 0;
  std::size_t ratio = 0;
  std::size_t dim = 64;    // embedding dim / MoE N / GEMM+ReduceScatter N
  std::size_t tables = 4;  // embedding tables per rank / MoE experts per rank
};

class OpBench {
 public:
  virtual ~OpBench() = default;
  virtual void compute_only() = 0;
  virtual void collective_only() = 0;
  virtual void run(Mode mode) = 0;
  /// Elements of the last run's output that differ from sequential's (bitwise).
  virtual long long wrong_vs_sequential(Mode mode) = 0;
  /// Payload each rank contributes to the collective, bytes.
  virtual std::size_t bytes() const = 0;
  virtual std::string shape() const = 0;
};

/// op: "gemv_allreduce", "embedding_alltoall", "gemm_alltoall" or "gemm_reduce_scatter".
std::unique_ptr<OpBench> make_op_bench(const std::string& op, Communicator& comm, Device& device,
                                       const Shape& shape, const OpOptions& options);
/// The default shape of an op (a roughly balanced point on this kind of machine).
Shape default_shape(const std::string& op);

}  // namespace tilecomm::bench
