#pragma once
// Private state of EmbeddingAllToAll: its memory layout and tiles on top of the operator framework
// (ops/common/). The unfused modes are in embedding_alltoall.cpp, the fused one in
// embedding_alltoall_fused.cpp, argument validation in embedding_alltoall_validate.cpp.

#include <span>
#include <vector>

#include "ops/common/block_exchange.hpp"
#include "ops/common/op_context.hpp"
#include "tilecomm/embedding_alltoall.hpp"

namespace tilecomm::detail {

/// A tile: local table `table`, destination rank `dst`, bags [bag0, bag1) of dst's batch slice.
struct EmbeddingTile {
  std::size_t table;
  int dst;
  std::size_t bag0, bag1;
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
  void validate(std::span<const float* const> tables, std::span<const EmbeddingBags> bags,
                const float* out) const;
  /// Pooled vectors of one table for global bags [bag0, bag1) into dst (row stride `stride`).
  void pool(const float* table, const EmbeddingBags& bags, std::size_t bag0, std::size_t bag1,
            float* dst, std::size_t stride) const;
  /// Pools `tile` into the per-destination send buffer of the unfused modes.
  void pool_to_send(std::span<const float* const> tables, std::span<const EmbeddingBags> bags,
                    const EmbeddingTile& tile, float* send) const;
  /// Tiles of chunk c of nc of every destination's slice, for every local table.
  std::vector<EmbeddingTile> make_tiles(std::size_t c, std::size_t nc, bool remote_first) const;
  /// All-to-Allv of chunk c of nc of every slice from `send`, then the reshape into `out`.
  void exchange(const float* send, float* out, std::size_t c, std::size_t nc);

  void run_sequential(std::span<const float* const> tables, std::span<const EmbeddingBags> bags,
                      float* out);
  void run_shaped(std::span<const float* const> tables, std::span<const EmbeddingBags> bags,
                  float* out);
  void run_fused(std::span<const float* const> tables, std::span<const EmbeddingBags> bags,
                 float* out);

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
  // Fused: flags [tables in the job x max_blocks] and two inbox halves laid out like `out`.
  std::size_t max_blocks = 0;
  BlockExchange fused_exchange;
};

}  // namespace tilecomm::detail
