#pragma once
// Private state of GemmAllToAll, shared by the unfused modes (gemm_alltoall.cpp) and the fused
// kernel (gemm_alltoall_fused.cpp).

#include <map>
#include <memory>
#include <span>
#include <vector>

#include "collectives/comm_impl.hpp"
#include "ops/common/proxy.hpp"
#include "ops/common/symmetric.hpp"
#include "runtime/flags.hpp"
#include "tilecomm/gemm_alltoall.hpp"

namespace tilecomm::detail {

/// A tile: local expert e, source rank s, rows [r0, r1) of block (e, s), columns [c0, c1).
struct GemmTile {
  std::size_t e;
  int s;
  std::size_t r0, r1, c0, c1;
};

/// The routing of one call, derived once per call from the counts of every rank.
struct Routing {
  std::vector<std::size_t> all_send;  // [rank][global expert]: rows routed (allgathered)
  std::vector<std::size_t> xoff;      // [e * p + s]: first row of block (e, s) in x
  std::vector<std::size_t> soff;      // [s * E + e]: first row of block (e, s) in the send buffer
                                      // (one extra entry: the total)
  std::vector<std::size_t> ypre;      // [s * (G + 1) + g]: first row of expert g's results in s's y
  std::size_t rows_in = 0;            // rows my experts received
  std::size_t rows_out = 0;           // rows I routed out
  std::size_t sent(int s, std::size_t g, std::size_t ng) const { return all_send[s * ng + g]; }
};

struct GemmAllToAllImpl {
  GemmAllToAllImpl(Communicator& comm, Device& device, std::size_t experts, std::size_t k,
                   std::size_t n, std::size_t max_in, std::size_t max_out, OpOptions options);
  ~GemmAllToAllImpl();

  std::size_t experts_of(int r) const { return first_exp[r + 1] - first_exp[r]; }
  /// Local checks, then the collective routing exchange and cross-check; raises the same error on
  /// every rank when any rank's arguments or counts are wrong.
  void prepare(std::span<const float* const> weights, const float* x,
               std::span<const std::size_t> recv_counts, std::span<const std::size_t> send_counts,
               const float* y, bool check_y = true);
  /// First row of global expert g's results in rank s's y.
  std::size_t yoff(int s, std::size_t g) const;
  std::vector<GemmTile> make_tiles(std::size_t e0, std::size_t e1, bool remote_first) const;
  /// Y[tile] = X[tile rows] * W_e[:, tile cols] into dst (leading dimension ldc).
  void gemm_tile(std::span<const float* const> weights, const float* x, const GemmTile& t,
                 float* dst, std::size_t ldc) const;

  void compute(std::span<const float* const> weights, const float* x,
               const std::vector<GemmTile>& tiles, std::size_t lds, const char* name);
  void exchange(float* y, std::size_t chunk, std::size_t chunks);
  void run_sequential(std::span<const float* const> weights, const float* x, float* y);
  void run_shaped(std::span<const float* const> weights, const float* x, float* y);
  void run_fused(std::span<const float* const> weights, const float* x, float* y);
  void setup_fused();
  // rows x cols, row stride n; creates and caches (host thread only: WGs read `types`).
  MPI_Datatype block_type(std::size_t rows, std::size_t cols);

  Communicator& pub;
  CommImpl& comm;
  Device& dev;
  std::size_t ne, k, n, max_in, max_out;
  OpOptions opt;
  std::size_t max_out_all = 0;  // the largest max_rows_out of any rank (sizes the inboxes)
  std::size_t tile_r = 0, tile_c = 0, ncb = 0, max_rb = 0;
  std::vector<std::size_t> first_exp;  // per rank prefix; first_exp[p] = experts in the job
  Routing route;
  std::vector<float> send_buf;  // sequential/shaped: results grouped by source rank, then expert
  Stream compute_stream, comm_stream;
  MPI_Comm op_comm = MPI_COMM_NULL;

  // ---- fused ----
  // Segment of each on-node rank: flags [experts x max_rb x ncb], then an inbox laid out like its
  // y ([max_out x N]) that on-node owners store result tiles into.
  std::unique_ptr<SymmetricBuffer> shm;
  std::size_t off_flags = 0, off_inbox = 0;
  std::vector<TileFlags> flags;
  std::vector<float> staging;  // tiles bound off-node, laid out like the send buffer
  std::unique_ptr<Proxy> proxy;
  std::map<std::pair<std::size_t, std::size_t>, MPI_Datatype> types;
  std::uint32_t epoch = 0;
  std::size_t flag_of(std::size_t g, std::size_t row_in_expert, std::size_t c0) const {
    return (g * max_rb + row_in_expert / tile_r) * ncb + c0 / tile_c;
  }
  float* inbox(int local) const { return reinterpret_cast<float*>(shm->segment(local) + off_inbox); }
};

}  // namespace tilecomm::detail
