// The operators' tiles and GEMV's fused protocol as the model and the operators plan them
// (ops/common/plan_layout.hpp, ops/*/..._plan.hpp, model::default_tile), on hand-computed cases.
// No MPI, no device.
#include <gtest/gtest.h>

#include "ops/common/plan_layout.hpp"
#include "ops/embedding_alltoall/embedding_alltoall_plan.hpp"
#include "ops/gemm_alltoall/gemm_alltoall_plan.hpp"
#include "ops/gemm_reduce_scatter/gemm_reduce_scatter_plan.hpp"
#include "ops/gemv_allreduce/gemv_allreduce_plan.hpp"
#include "ops/model/predict.hpp"
#include "ops/model/profile.hpp"

namespace tilecomm::model {
namespace {

// The tiling rule for tiles exchanged on one node (plan_layout.hpp): a tile lasts at least
// kMinNodeTileUs at 10 GB/s and 40 GFMA/s.
TEST(ModelTiles, NodeTilesPayForTheirFixedCostByHand) {
  using detail::min_node_tile_rows;
  EXPECT_EQ(min_node_tile_rows(10000.0, 0.0), 12u);     // 1 us of streaming per row
  EXPECT_EQ(min_node_tile_rows(0.0, 40000.0), 12u);     // 1 us of multiply-adds per row
  EXPECT_EQ(min_node_tile_rows(5000.0, 20000.0), 12u);  // 0.5 + 0.5 us
  EXPECT_EQ(min_node_tile_rows(1e9, 0.0), 1u);          // one row is already long enough
  EXPECT_EQ(min_node_tile_rows(0.0, 0.0), 1u);
  // GemmAllToAll: whole 32-row tiles, at most 16. K = 1, N = 256: a row is 1028 B and 256 FMAs,
  // 0.1092 us, so 110 rows -> 4 tiles; K = N = 128: 0.512 us -> 24 rows -> 1 tile.
  EXPECT_EQ(detail::gemm_alltoall_node_rows(1, 256, 32), 128u);
  EXPECT_EQ(detail::gemm_alltoall_node_rows(128, 128, 32), 32u);
  EXPECT_EQ(detail::gemm_alltoall_node_rows(256, 256, 32), 32u);
  EXPECT_EQ(detail::gemm_alltoall_node_rows(1, 1, 32), 16u * 32u);  // capped at 16 tiles
  EXPECT_EQ(detail::gemm_alltoall_node_rows(1, 256, 64), 128u);     // whole tiles of 64
}

TEST(ModelTiles, GemvTwoShotBlocksOnOneNodeCarryTheirWork) {
  using detail::gemv_default_tile;
  const FusedAlgorithm two = FusedAlgorithm::TwoShot;
  // K = 1, one vector: a row is 12 B (W, the partial stored and reduced), so 9796 rows pay;
  // rounded to 16: 9808, under the 262144 / (2 x 2 slots x 2 ranks) = 32768 that keeps every
  // slot two blocks. The 1024-row cap alone gave 256 blocks of 12 KiB of work.
  EXPECT_EQ(gemv_default_tile(262144, 1, 1, two, 2, 2, false), 9808u);
  // A short M: two blocks per slot win over paying rows.
  EXPECT_EQ(gemv_default_tile(16384, 1, 1, two, 2, 2, false), 2048u);
  // Real K: 1024 rows of 1 KiB already pay; across nodes the message caps stay.
  EXPECT_EQ(gemv_default_tile(262144, 256, 1, two, 2, 2, false), 1024u);
  EXPECT_EQ(gemv_default_tile(262144, 1, 1, two, 2, 2, true), 4096u);
  // The model plans the operator's tiles.
  OpShape s;
  s.op = OpKind::GemvAllReduce;
  s.m = 262144;
  s.k = 1;
  EXPECT_EQ(default_tile(s, Layout{2, 1, 1, 2}), 9808u);
  s.op = OpKind::GemmAllToAll;
  s.n = 256;
  EXPECT_EQ(default_tile(s, Layout{2, 1, 1, 2}), 128u);
}

// GemvAllReduce across nodes (gemv_allreduce_plan.cpp): one-shot only while every node's leader
// sends at most 48 KiB in all, and two-shot tiles of 16 KiB of Y whatever M.
TEST(ModelTiles, GemvProtocolAndTilesAcrossNodes) {
  using detail::gemv_default_tile;
  using detail::gemv_fused_algorithm;
  const FusedAlgorithm automatic = FusedAlgorithm::Auto, one = FusedAlgorithm::OneShot,
                       two = FusedAlgorithm::TwoShot;
  const std::size_t kib = 1024;
  // One node: one-shot up to 256 KiB. Two nodes: one-shot at every size (each node sends the
  // other the payload either way; two-shot chains two rounds through the owners).
  EXPECT_EQ(gemv_fused_algorithm(automatic, 256 * kib, 1), one);
  EXPECT_EQ(gemv_fused_algorithm(automatic, 256 * kib + 4, 1), two);
  EXPECT_EQ(gemv_fused_algorithm(automatic, 256 * kib, 2), one);
  EXPECT_EQ(gemv_fused_algorithm(automatic, 256 * kib + 4, 2), one);
  EXPECT_EQ(gemv_fused_algorithm(automatic, 64 * 1024 * kib, 2), one);
  EXPECT_EQ(gemv_fused_algorithm(two, 64 * kib, 2), two);  // an explicit choice stands
  // Three and four nodes: 16 KiB (32, 48 KiB out) stays one-shot; 32 KiB (64, 96 KiB out) and
  // 64 KiB do not; 24 KiB on 3 nodes is exactly 48 KiB out.
  EXPECT_EQ(gemv_fused_algorithm(automatic, 16 * kib, 3), one);
  EXPECT_EQ(gemv_fused_algorithm(automatic, 16 * kib, 4), one);
  EXPECT_EQ(gemv_fused_algorithm(automatic, 24 * kib, 3), one);
  EXPECT_EQ(gemv_fused_algorithm(automatic, 24 * kib + 4, 3), two);
  EXPECT_EQ(gemv_fused_algorithm(automatic, 32 * kib, 3), two);
  EXPECT_EQ(gemv_fused_algorithm(automatic, 64 * kib, 4), two);
  EXPECT_EQ(gemv_fused_algorithm(automatic, 8 * kib, 8), two);  // 56 KiB out
  EXPECT_EQ(gemv_fused_algorithm(automatic, 4 * kib, 8), one);  // 28 KiB out
  EXPECT_EQ(gemv_fused_algorithm(one, 1024 * kib, 8), one);     // an explicit choice stands
  // Two-shot across nodes: 4096 rows of one vector (16 KiB), 512 of 8, unless a WG slot would
  // be left without a tile; it used to be M / (8 x slots x ranks), 1024 rows at M = 65536 on 4
  // ranks of 2 slots.
  EXPECT_EQ(gemv_default_tile(65536, 16, 1, two, 2, 4, true), 4096u);
  EXPECT_EQ(gemv_default_tile(8192, 16, 1, two, 2, 4, true), 4096u);
  EXPECT_EQ(gemv_default_tile(8192, 16, 1, two, 4, 4, true), 2048u);
  EXPECT_EQ(gemv_default_tile(4096, 512, 1, two, 64, 8, true), 64u);
  EXPECT_EQ(gemv_default_tile(262144, 16, 8, two, 2, 4, true), 512u);
  EXPECT_EQ(gemv_default_tile(262144, 16, 1024, two, 2, 4, true), 16u);
  // The model plans the same protocol: M = 16384 (64 KiB) on 4 nodes takes two-shot's tile.
  OpShape s;
  s.op = OpKind::GemvAllReduce;
  s.m = 16384;
  s.k = 16;
  EXPECT_EQ(default_tile(s, Layout{4, 4, 1, 2}), 4096u);
  // Two nodes keep one-shot: sqrt(64 KiB / 125 B/us / 25 us) = 4.6 blocks; of the 2 WG slots'
  // multiples either side, 4 (100 + 131 us exposed) beats 6 (150 + 87): 16384 / 4 = 4096 rows.
  // (Rounding 4.6 up to 6 blocks, as before, measured 86 us at 2 x 5 Gbit/s, 4 blocks 80.)
  EXPECT_EQ(default_tile(s, Layout{2, 2, 1, 2}), 4096u);
}

// One-shot blocks across nodes are cut for the path a profile measured (off_node_path): fewer
// on a fast link, where each block's message costs more than its share of the wire saves.
TEST(ModelTiles, GemvOneShotBlocksFollowTheProfilesPath) {
  using detail::gemv_default_tile;
  const FusedAlgorithm one = FusedAlgorithm::OneShot;
  Profile p;
  // No measured MPI path (a one-node calibration): the defaults, 1 Gbit/s and 25 us.
  EXPECT_EQ(off_node_path(p).bytes_per_us, 125.0);
  EXPECT_EQ(off_node_path(p).message_us, 25.0);
  // 2 x 5 Gbit/s as tilecomm_calibrate measured it: 598 MB/s under load, 8.1 + 0.5 us of CPU a
  // message and 9.4 us of proxy.
  p.mpi.measured = true;
  p.link_bytes_per_s = 598e6;
  p.mpi.cpu_send.c = {8.1e-6, 3.4e-10, 0};
  p.mpi.cpu_recv.c = {0.5e-6, 4.7e-11, 0};
  p.proxy_s = 9.4e-6;
  const detail::OffNodePath fast = off_node_path(p);
  EXPECT_NEAR(fast.bytes_per_us, 598.0, 1e-9);
  EXPECT_NEAR(fast.message_us, 18.0, 1e-9);
  // 32 KiB (M = 8192): sqrt(54.8 us / 18 us) = 1.7 blocks -> 2 (36 + 27 us) over 4 (72 + 14).
  // Measured there, fused: 2 blocks 50 us, 4 blocks (the 1 Gbit/s defaults' choice) 68.
  EXPECT_EQ(gemv_default_tile(8192, 16, 1, one, 2, 2, true, fast), 4096u);
  EXPECT_EQ(gemv_default_tile(8192, 16, 1, one, 2, 2, true), 2048u);
  // Every block an eager message: 128 KiB at 2 x 10 Gbit/s (1199 B/us, 18.7 us) would take 2
  // blocks by the square root (37 + 55 us, 4: 75 + 27), rendezvous messages of 64 KiB: 4.
  EXPECT_EQ(gemv_default_tile(32768, 16, 1, one, 2, 2, true, {1199.0, 18.7}), 8192u);
  // Never fewer blocks than compute WGs: 4 KiB on 2 slots is 2 blocks, not 1.
  EXPECT_EQ(gemv_default_tile(1024, 16, 1, one, 2, 2, true, fast), 512u);
  // 1 Gbit/s with the same CPU, 64 KiB: more blocks than the defaults' 4 (sqrt(551 / 18) = 5.5
  // -> 6: 108 + 92 us, 4: 72 + 138).
  p.link_bytes_per_s = 119e6;
  EXPECT_EQ(gemv_default_tile(16384, 16, 1, one, 2, 2, true, off_node_path(p)), 2736u);
  EXPECT_EQ(gemv_default_tile(16384, 16, 1, one, 2, 2, true), 4096u);
  // No link measured: 1 / the MPI fit's beta.
  p.link_bytes_per_s = 0;
  p.mpi.time.c = {8e-6, 1.0 / 500e6, 0};
  EXPECT_NEAR(off_node_path(p).bytes_per_us, 500.0, 1e-9);
  // The model plans the tile its profile gives the op.
  OpShape s;
  s.op = OpKind::GemvAllReduce;
  s.m = 8192;
  s.k = 16;
  EXPECT_EQ(default_tile(s, Layout{2, 2, 1, 2}, fast), 4096u);
}

// EmbeddingAllToAll's tile across nodes is one MPI message under the eager limit (plan_layout.hpp,
// kOffNodeEagerBytes = 48 KiB): 192 bags of dim 64, where one node keeps 256.
TEST(ModelTiles, EmbeddingTilesAcrossNodesStayUnderTheEagerLimit) {
  using detail::embedding_default_tile;
  EXPECT_EQ(embedding_default_tile(4096, 4, 16, 2, 64, false), 256u);
  EXPECT_EQ(embedding_default_tile(4096, 4, 16, 2, 64, true), 192u);
  EXPECT_EQ(embedding_default_tile(4096, 4, 16, 2, 1024, true), 12u);
  EXPECT_EQ(embedding_default_tile(4096, 4, 16, 2, std::size_t{1} << 20, true), 1u);
  EXPECT_EQ(embedding_default_tile(256, 4, 16, 2, 64, true), 32u);  // 4 tiles per slot rule
  OpShape s;
  s.op = OpKind::EmbeddingAllToAll;
  s.m = 4096;
  s.tables = 4;
  s.n = 64;
  EXPECT_EQ(default_tile(s, Layout{4, 4, 1, 2}), 192u);
  EXPECT_EQ(default_tile(s, Layout{4, 1, 1, 2}), 256u);
}

// GemmReduceScatter's tile across nodes: one MPI message of partials under the eager limit (12
// rows of N = 1024), at least 8 rows.
TEST(ModelTiles, GemmReduceScatterTilesAcrossNodesStayUnderTheEagerLimit) {
  using detail::gemm_rs_default_tile;
  EXPECT_EQ(gemm_rs_default_tile(2048, 2, 1024, false), 256u);
  EXPECT_EQ(gemm_rs_default_tile(2048, 2, 1024, true), 12u);
  EXPECT_EQ(gemm_rs_default_tile(2048, 2, 64, true), 192u);
  EXPECT_EQ(gemm_rs_default_tile(2048, 2, 8192, true), 8u);  // a row alone is 32 KiB
  EXPECT_EQ(gemm_rs_default_tile(64, 2, 64, true), 8u);      // 4 tiles per slot: 8 rows
  OpShape s;
  s.op = OpKind::GemmReduceScatter;
  s.m = 2048;
  s.k = 256;
  s.n = 1024;
  EXPECT_EQ(default_tile(s, Layout{2, 2, 1, 2}), 12u);
  EXPECT_EQ(default_tile(s, Layout{2, 1, 1, 2}), 256u);
}

}  // namespace
}  // namespace tilecomm::model
