#pragma once
// Private state of EmbeddingAllToAll, shared by the unfused modes (embedding_alltoall.cpp) and the
// fused kernel (embedding_alltoall_fused.cpp).

#include <map>
#include <memory>
#include <vector>

#include "collectives/comm_impl.hpp"
#include "ops/common/proxy.hpp"
#include "ops/common/symmetric.hpp"
#include "runtime/flags.hpp"
#include "tilecomm/embedding_alltoall.hpp"

namespace tilecomm::detail {

/// A tile: local table t, destination rank q, bags [b0, b1) of q's slice.
struct EmbTile {
  std::size_t t;
  int q;
  std::size_t b0, b1;
};

struct EmbeddingAllToAllImpl {
  EmbeddingAllToAllImpl(Communicator& comm, Device& device, std::vector<std::size_t> rows,
                        std::size_t dim, std::size_t batch, Pooling pooling, OpOptions options);
  ~EmbeddingAllToAllImpl();

  std::size_t lb(int q) const { return batch_begin[q + 1] - batch_begin[q]; }
  std::size_t nblk(int q) const { return (lb(q) + tile - 1) / tile; }
  /// Checks this rank's arguments, then agrees with every rank (one small allreduce) so a bad
  /// argument anywhere raises an error everywhere instead of a hang.
  void check_args(std::span<const float* const> tables, std::span<const EmbeddingBags> bags,
                  const float* out) const;
  /// Pooled vectors of local table t for global bags [g0, g1) into dst (row stride `stride`).
  void pool(const float* table, const EmbeddingBags& bags, std::size_t g0, std::size_t g1,
            float* dst, std::size_t stride) const;
  /// Tiles of bags [chunk c of nc] of every destination's slice, for every local table.
  std::vector<EmbTile> make_tiles(std::size_t c, std::size_t nc, bool remote_first) const;

  void compute(std::span<const float* const> tables, std::span<const EmbeddingBags> bags,
               float* send, const std::vector<EmbTile>& tiles, std::size_t lds,
               const char* name);
  void exchange(const float* send, float* out, std::size_t c, std::size_t nc);
  void run_sequential(std::span<const float* const> tables, std::span<const EmbeddingBags> bags, float* out);
  void run_shaped(std::span<const float* const> tables, std::span<const EmbeddingBags> bags, float* out);
  void run_fused(std::span<const float* const> tables, std::span<const EmbeddingBags> bags, float* out);
  void setup_fused();
  MPI_Datatype rows_type(std::size_t nbags);  // nbags rows of dim floats, stride num_tables * dim

  Communicator& pub;
  CommImpl& comm;
  Device& dev;
  std::vector<std::size_t> rows;  // of local tables
  std::size_t dim, batch;
  Pooling pooling;
  OpOptions opt;
  std::size_t tile = 0;                 // bags per tile
  std::size_t ntab = 0;                 // local tables
  std::vector<std::size_t> first_tab;   // per rank, prefix sums; first_tab[p] = total tables
  std::vector<std::size_t> batch_begin; // per rank, prefix; batch_begin[p] = batch
  std::vector<std::size_t> send_off;    // per destination q: offset in the send buffer (floats)
  std::vector<std::size_t> recv_off;    // per source s: offset in the receive buffer (floats)
  std::vector<float> send_buf, recv_buf;
  Stream compute_stream, comm_stream;
  MPI_Comm op_comm = MPI_COMM_NULL;

  // ---- fused ----
  // Segment of each on-node rank: flags [total tables x max blocks], then an inbox laid out like
  // `out` ([max local batch x total tables x dim]) that on-node sources store their tiles into.
  std::size_t nblk_max = 0;
  std::unique_ptr<SymmetricBuffer> shm;
  std::size_t off_flags = 0, off_inbox = 0;
  std::vector<TileFlags> flags;      // per local rank
  std::vector<float> staging;        // tiles bound off-node, contiguous per tile
  std::vector<std::size_t> stage_off;  // per destination
  std::unique_ptr<Proxy> proxy;
  std::map<std::size_t, MPI_Datatype> types;
  std::uint32_t epoch = 0;
  float* inbox(int local) const { return reinterpret_cast<float*>(shm->segment(local) + off_inbox); }
};

}  // namespace tilecomm::detail
