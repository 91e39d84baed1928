#pragma once
// Private state of EmbeddingAllToAll: its memory layout and tiles on top of the operator framework
// (ops/common/). The unfused modes are in embedding_alltoall.cpp, the fused one in
// embedding_alltoall_fused.cpp.

#include <span>
#include <string>
#include <vector>

#include "ops/common/block_exchange.hpp"
#include "ops/common/op_context.hpp"
#include "ops/embedding_alltoall/embedding_alltoall_plan.hpp"
#include "tilecomm/embedding_alltoall.hpp"
#include "tilecomm/types.hpp"

namespace tilecomm::detail {

/// This call's local tables: float32 or bfloat16, one type per call.
struct TableSet {
  std::span<const float* const> f32;
  std::span<const bfloat16* const> bf16;
  bool is_bf16 = false;
  std::size_t size() const { return is_bf16 ? bf16.size() : f32.size(); }
  bool null(std::size_t t) const { return is_bf16 ? bf16[t] == nullptr : f32[t] == nullptr; }
};

struct EmbeddingAllToAllImpl {
  EmbeddingAllToAllImpl(Communicator& comm, Device& device, std::vector<std::size_t> table_rows,
                        std::size_t dim, std::size_t batch, Pooling pooling, OpOptions options);

  /// Bags in rank q's slice of the global batch, and blocks of `tile` bags in it.
  std::size_t local_batch(int q) const { return batch_begin[q + 1] - batch_begin[q]; }
  std::size_t blocks(int q) const { return (local_batch(q) + tile - 1) / tile; }
  /// Flag index (and MPI tag) of global table `table`, block starting at bag `bag0`.
  std::size_t flag_of(std::size_t table, std::size_t bag0) const {
    return table * max_blocks + bag0 / tile;
  }
  /// Checks this rank's arguments (Error(InvalidArgument) here). In verify mode it then agrees with
  /// every rank (one small allreduce), so a bad argument anywhere raises an error everywhere;
  /// without it the peers of a rank that raised end in Error(Timeout).
  /// `out` may be the fused call's output view (zero_copy) only in fused mode; any other overlap
  /// with the views is an Error(InvalidArgument).
  /// Why `out` cannot be this call's output in `mode` (it overlaps the output views but is not
  /// the fused call's own), or "".
  std::string output_error(const float* out, Mode mode) const;
  void validate(const TableSet& tables, std::span<const EmbeddingBags> bags, const float* out,
                Mode mode) const;
  /// Pooled vectors of local table t for global bags [bag0, bag1) into dst (row stride `stride`).
  void pool(const TableSet& tables, std::size_t t, const EmbeddingBags& bags, std::size_t bag0,
            std::size_t bag1, float* dst, std::size_t stride) const;
  /// Pools `tile` into the per-destination send buffer of the unfused modes.
  void pool_to_send(const TableSet& tables, std::span<const EmbeddingBags> bags,
                    const EmbeddingTile& tile, float* send) const;
  /// Tiles of chunk c of nc of every destination's slice, for every local table.
  std::vector<EmbeddingTile> make_tiles(std::size_t c, std::size_t nc, bool remote_first) const {
    return embedding_tiles(topo, grid(), c, nc, remote_first);
  }
  /// The tables and bags as the planners (embedding_alltoall_plan.hpp) see them.
  EmbeddingGrid grid() const {
    return {first_table, batch_begin, dim, tile, local_tables, max_blocks};
  }
  /// All-to-Allv of chunk c of nc of every slice from `send`, then the reshape into `out`.
  void exchange(const float* send, float* out, std::size_t c, std::size_t nc);

  /// One call of any mode (EmbeddingAllToAll::run, both table types).
  void run(const TableSet& tables, std::span<const EmbeddingBags> bags, float* out, Mode mode);
  void run_sequential(const TableSet& tables, std::span<const EmbeddingBags> bags, float* out);
  void run_shaped(const TableSet& tables, std::span<const EmbeddingBags> bags, float* out);
  void run_fused(const TableSet& tables, std::span<const EmbeddingBags> bags, float* out);
  /// The zero-copy output view of the next fused call: its inbox half (laid out like `out`).
  float* next_output() const { return fused_exchange.next_output(); }
  std::size_t out_floats() const { return local_batch(topo.rank) * first_table.back() * dim; }

  OpContext ctx;
  const Topology& topo;
  std::vector<std::size_t> table_rows;  // of local tables
  std::size_t dim, batch;
  Pooling pooling;
  std::size_t local_tables;
  std::size_t tile = 0;                   // bags per tile
  std::vector<std::size_t> first_table;   // per rank, prefix sums; [p] = tables in the job
  std::vector<std::size_t> batch_begin;   // per rank, prefix sums; [p] = batch
  std::vector<std::size_t> send_offset;   // per destination: offset in the send buffer (floats)
  std::vector<std::size_t> recv_offset;   // per source: offset in the receive buffer (floats)
  std::vector<float> send_buf, recv_buf;  // unfused modes
  // Fused: flags [tables in the job x max_blocks] and two inbox halves laid out like `out`; the
  // halves double as the zero-copy output views (EmbeddingAllToAll::output()).
  std::size_t max_blocks = 0;
  BlockExchange fused_exchange;
};

}  // namespace tilecomm::detail
