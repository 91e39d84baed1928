#pragma once
/// \file embedding_alltoall.hpp
/// Embedding-bag pooling + All-to-All: DLRM model-parallel sparse features. Each rank owns some
/// embedding tables (rows x dim, float32; rows may differ, dim is shared). Every rank gets the
/// pooled vectors of its own slice of the global batch for every table in the job.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "tilecomm/communicator.hpp"
#include "tilecomm/device.hpp"
#include "tilecomm/ops.hpp"

namespace tilecomm {

namespace detail {
struct EmbeddingAllToAllImpl;
}

/// The bags of one table over the whole global batch, in CSR form (as torch.nn.EmbeddingBag):
/// bag g holds indices[offsets[g] .. offsets[g+1]). offsets has global_batch + 1 entries, starts at
/// 0, never decreases and ends at the number of indices.
struct EmbeddingBags {
  std::span<const std::int64_t> indices;
  std::span<const std::int64_t> offsets;
  /// Optional per-index weights (per_sample_weights); empty = all 1.
  std::span<const float> weights;
};

enum class Pooling { Sum, Mean };

/// A context for one shape. Tables are numbered globally in rank order: rank 0's tables first.
/// The global batch is split into contiguous slices, the first (batch % ranks) ranks one bag more.
/// Created collectively; dim, global_batch and pooling must agree on every rank, else every rank
/// raises Error(Mismatch). Calls to run() are collective and ordered like collectives, but they do
/// not synchronise the ranks: outside verify mode a call sends nothing before its tiles, and in
/// fused mode a rank may run up to two calls ahead of an on-node peer it only sends to (further
/// ahead of off-node ones: MPI keeps the messages in order). `comm` and `device` must outlive the
/// context. Fused mode keeps two inbox halves of local_batch x num_tables x dim floats per rank
/// in the node's shared segment.
class EmbeddingAllToAll {
 public:
  /// `table_rows`: rows of each table this rank owns (may be empty).
  EmbeddingAllToAll(Communicator& comm, Device& device, std::vector<std::size_t> table_rows,
                    std::size_t dim, std::size_t global_batch, Pooling pooling,
                    OpOptions options = {});
  ~EmbeddingAllToAll();

  /// out[b][t][:] (shape [local_batch x num_tables x dim]) = pooled vector of bag batch_begin()+b
  /// of global table t. `tables[i]` is local table i ([rows_i x dim] row-major), `bags[i]` its
  /// bags. Out-of-range indices, bad offsets or sizes raise Error(InvalidArgument) naming the table
  /// and bag on the rank that passed them, before it communicates. In verify mode
  /// (CommConfig::check, TILECOMM_CHECK=1) every call first agrees across ranks (one small
  /// allreduce) and the others raise Error(InvalidArgument) naming that rank; otherwise they wait
  /// for its tiles and end in Error(Timeout) after the communicator's deadline. Nothing else can
  /// differ across ranks per call (every block's shape is fixed at construction), so nothing else
  /// is checked. All modes give bitwise-identical results (each pooled vector is computed the same
  /// way).
  void run(std::span<const float* const> tables, std::span<const EmbeddingBags> bags, float* out,
           Mode mode);

  std::size_t num_tables() const;   ///< tables in the job
  std::size_t first_table() const;  ///< global index of this rank's first table
  std::size_t local_batch() const;  ///< bags in this rank's slice
  /// Mode::Auto's settled mode; empty while it is still trying modes (ops.hpp, Mode::Auto).
  std::optional<Mode> auto_choice() const;
  std::size_t batch_begin() const;  ///< first global bag of this rank's slice
  std::size_t dim() const;
  std::size_t tile_bags() const;  ///< bags per tile

 private:
  friend struct detail::BenchAccess;
  std::unique_ptr<detail::EmbeddingAllToAllImpl> impl_;
};

}  // namespace tilecomm
