#pragma once
// Private state of GemvAllReduce, shared by the unfused paths (gemv_allreduce.cpp) and the fused
// kernel (gemv_allreduce_fused.cpp).

#include <memory>
#include <vector>

#include "collectives/comm_impl.hpp"
#include "ops/common/proxy.hpp"
#include "ops/common/symmetric.hpp"
#include "runtime/flags.hpp"
#include "tilecomm/gemv_allreduce.hpp"

namespace tilecomm::detail {

struct GemvAllReduceImpl {
  GemvAllReduceImpl(Communicator& comm, Device& device, std::size_t m, std::size_t k,
                    OpOptions options);
  ~GemvAllReduceImpl();

  // Row block b: rows [row0(b), row0(b + 1)).
  std::size_t row0(std::size_t b) const { return std::min(m, b * tile); }
  std::size_t rows(std::size_t b) const { return row0(b + 1) - row0(b); }
  // Blocks are split into p contiguous ranges; rank o owns (reduces) [first_block(o), first_block(o+1)).
  std::size_t first_block(int o) const;
  int owner(std::size_t b) const;
  // partial[row0(b) .. ) = W[rows of b] * x
  void gemv_tile(const float* w, const float* x, float* out, std::size_t b) const;
  void check_args(const float* w, const float* x, const float* y) const;

  void compute(const float* w, const float* x, float* out);  // the sequential compute kernel
  void run_sequential(const float* w, const float* x, float* y);
  void run_shaped(const float* w, const float* x, float* y);
  void run_fused(const float* w, const float* x, float* y);  // gemv_allreduce_fused.cpp
  void setup_fused();

  Communicator& pub;
  CommImpl& comm;
  Device& dev;
  std::size_t m, k, tile, nblocks;
  OpOptions opt;
  Stream compute_stream, comm_stream;
  std::vector<float> partial;  // sequential and shaped: this rank's W_r x_r

  // ---- fused ----
  // Segment of each on-node rank: flags, then partials[2][p][M] (slot s: rank s's partial of the
  // rows this rank owns), then reduced[2][M] (this rank's reduced blocks). Parity = epoch & 1
  // double-buffers consecutive calls.
  MPI_Comm op_comm = MPI_COMM_NULL;  // private duplicate for the proxy's tags
  std::unique_ptr<SymmetricBuffer> shm;
  std::size_t off_partial_flags = 0, off_reduced_flags = 0, off_arrived_flags = 0;
  std::size_t off_partials = 0, off_reduced = 0;
  std::vector<TileFlags> partial_flags;  // per local rank: [p * nblocks], index s * nblocks + b
  std::vector<TileFlags> reduced_flags;  // per local rank: [nblocks]
  TileFlags arrived_flags;               // mine: reduced block b arrived from an off-node owner
  std::vector<float> staging;            // partials bound off-node, kept until sent
  std::unique_ptr<Proxy> proxy;
  std::uint32_t epoch = 0;

  float* partials(int local, int parity, int src) const;
  float* reduced(int local, int parity) const;
};

}  // namespace tilecomm::detail
