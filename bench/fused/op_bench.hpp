#pragma once
// One benchmarked operator: built for a size and a ratio knob, it runs each variant the
// comparison needs (compute only, collective only, and the three modes) and checks a mode's output
// against sequential's. Further operator instances over the same inputs, with other OpOptions
// (a collective algorithm, shaped knobs), are "variants": the baselines fused_perf tunes.
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

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

  // Workload details (bench/fused/workloads.cpp); the defaults keep the synthetic shapes above.
  std::size_t batch = 1;  ///< GEMV: vectors per call (X is K_r x batch)
  bool bf16 = false;      ///< GEMV: bfloat16 weights
  /// Embedding: rows and indices per bag of every table of the job (empty: `tables` tables of
  /// 100000 rows per rank, `ratio` indices per bag). Tables go to ranks by greedy balance of
  /// their lookups (largest pooling first, to the rank with the fewest lookups so far).
  std::vector<std::size_t> table_rows, table_pool;
  /// Embedding: Zipf exponent of the indices (0: the synthetic u^3 draw). MoE: Zipf exponent of
  /// the experts' popularity for top_k routing.
  double zipf = 0;
  /// MoE: experts per token, drawn by popularity without repetition (0: the fixed uneven split).
  std::size_t top_k = 0;
};

class OpBench {
 public:
  virtual ~OpBench() = default;
  /// The two halves of variant 0's sequential mode.
  virtual void compute_only() = 0;
  virtual void collective_only() = 0;
  /// Runs variant 0 (the operator make_op_bench built).
  void run(Mode mode) { run(mode, 0); }
  /// Runs `mode` of one variant, into the same output buffer as every variant.
  virtual void run(Mode mode, std::size_t variant) = 0;
  /// Builds another operator over the same inputs with `options` (collective, like the operator's
  /// constructor: every rank adds the same variants in the same order); returns its index.
  virtual std::size_t add_variant(const OpOptions& options) = 0;
  /// Frees a variant's operator (collective); its index is not reused, running it is an error.
  virtual void drop_variant(std::size_t variant) = 0;
  /// The mode Mode::Auto settled on for `variant` (run() with Mode::Auto; MoE: run()'s, not
  /// run_layer()'s), or none while it is still trying.
  virtual std::optional<Mode> auto_choice(std::size_t variant) = 0;
  /// The collective of sequential mode (OpOptions::algorithm names one of its algorithms).
  virtual Collective collective() const = 0;
  /// Keeps the last run's output as the reference wrong_vs_sequential() compares with; callers
  /// run sequential, then this, outside any timed region. (run() used to copy the output into
  /// the reference on every sequential call of variant 0, timed ones included: fused_perf and the
  /// workload tables charged sequential a copy of its output per call, 0.1-0.2 ms of a 0.3-0.5 ms
  /// GemmAllToAll call on one node.)
  virtual void record_reference() = 0;
  /// Elements of the last run's output that differ from the reference (bitwise).
  virtual long long wrong_vs_sequential(Mode mode) = 0;
  /// Payload each rank contributes to the collective, bytes.
  virtual std::size_t bytes() const = 0;
  virtual std::string shape() const = 0;
};

/// Mode::Auto as a user meets it: calls `variant` with Mode::Auto until it settles (its trial
/// calls, as a user's first calls; collective) and returns the mode it settled on and how many
/// calls that took. Error(Internal) if it has not settled after 1000 calls.
struct AutoSettled {
  Mode mode;
  int trials;
};
AutoSettled settle_auto(OpBench& bench, std::size_t variant);

/// op: "gemv_allreduce", "embedding_alltoall", "gemm_alltoall" or "gemm_reduce_scatter".
std::unique_ptr<OpBench> make_op_bench(const std::string& op, Communicator& comm, Device& device,
                                       const Shape& shape, const OpOptions& options);
/// The default shape of an op (a roughly balanced point on this kind of machine).
Shape default_shape(const std::string& op);

}  // namespace tilecomm::bench
