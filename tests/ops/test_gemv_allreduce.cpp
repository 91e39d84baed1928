// GemvAllReduce: every mode equals an independent reference (plain loops + MPI_Allreduce), bitwise,
// for uneven shapes, empty inputs, repeated calls with changing data, and stragglers; with float32
// and bfloat16 weights (small integers: exact in both); one vector per call and several (batch).
#include <cstdlib>
#include <cstring>

#include "ops/kernels/gemv.hpp"
#include "ops_test_util.hpp"
#include "tilecomm/bench_hooks.hpp"

namespace tilecomm::test {
namespace {

struct GemvCase {
  std::size_t m, k;
  std::size_t tile;
  std::size_t batch = 1;  // n: X is [k x n], Y [m x n], row-major
};

std::vector<float> reference(const std::vector<float>& w, const std::vector<float>& x,
                             std::size_t m, std::size_t k, std::size_t n) {
  std::vector<float> part(m * n, 0.0f), y(m * n);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < k; ++j)
      for (std::size_t c = 0; c < n; ++c)
        part[i * n + c] += w[i * k + j] * x[j * n + c];
  MPI_Allreduce(part.data(), y.data(), static_cast<int>(m * n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  return y;
}

enum class Weights { F32, Bf16, Alternate };  // Alternate: bf16 on odd calls

void check_case(Communicator& comm, Device& dev, GemvCase c, int calls,
                Weights weights = Weights::F32, FusedAlgorithm algorithm = FusedAlgorithm::Auto) {
  const int r = comm.rank();
  const std::size_t k = c.k + static_cast<std::size_t>(r % 3);  // K_r differs per rank
  const std::size_t n = c.batch;
  OpOptions opt;
  opt.tile = c.tile;
  opt.fused_algorithm = algorithm;
  GemvAllReduce op(comm, dev, c.m, k, n, opt);
  EXPECT_EQ(op.batch(), n);
  if (algorithm != FusedAlgorithm::Auto) EXPECT_EQ(op.fused_algorithm(), algorithm);
  Straggler straggler(dev, 17u + r);
  for (int call = 0; call < calls; ++call) {
    std::vector<float> w(c.m * k), x(k * n);
    for (std::size_t i = 0; i < w.size(); ++i)
      w[i] = small_int(i * 31 + r * 7 + call);
    for (std::size_t i = 0; i < x.size(); ++i)
      x[i] = small_int(i + 1000 * call + r);
    std::vector<bfloat16> w16(w.size());
    for (std::size_t i = 0; i < w.size(); ++i)
      w16[i] = bfloat16(w[i]);  // exact: small integers
    const bool bf16 = weights == Weights::Bf16 || (weights == Weights::Alternate && call % 2 == 1);
    const std::vector<float> ref = reference(w, x, c.m, k, n);
    for (Mode mode : kModes) {
      std::vector<float> y(c.m * n, -12345.0f);
      straggler.before_call();
      if (bf16)
        op.run(w16.data(), x.data(), y.data(), mode);
      else
        op.run(w.data(), x.data(), y.data(), mode);
      straggler.after_call();
      int wrong = 0;
      for (std::size_t i = 0; i < y.size(); ++i)
        wrong += y[i] != ref[i];
      EXPECT_EQ(wrong, 0) << "mode " << to_string(mode) << " (" << to_string(op.fused_algorithm())
                          << ") m " << c.m << " k " << k << " batch " << n << " call " << call
                          << (bf16 ? " bf16" : " fp32");
    }
  }
}

TEST(GemvAllReduce, MatchesReferenceInEveryMode) {
  Communicator comm(MPI_COMM_WORLD);
  Device dev(test_device_config());
  for (GemvCase c : {GemvCase{1, 5, 0}, GemvCase{7, 3, 0}, GemvCase{1000, 33, 0},
                     GemvCase{4099, 17, 0}, GemvCase{1001, 9, 16}, GemvCase{3, 4, 1}})
    check_case(comm, dev, c, 2);
}

// Both fused protocols, forced, on the shapes above (Auto picks one-shot for all of them) and a
// two-shot-sized one; many back-to-back calls exercise the parity double-buffering under skew.
TEST(GemvAllReduce, OneShotAndTwoShotMatchReference) {
  Communicator comm(MPI_COMM_WORLD);
  Device dev(test_device_config());
  for (FusedAlgorithm a : {FusedAlgorithm::OneShot, FusedAlgorithm::TwoShot}) {
    for (GemvCase c : {GemvCase{1, 5, 0}, GemvCase{7, 3, 0}, GemvCase{1000, 33, 0},
                       GemvCase{4099, 17, 0}, GemvCase{1001, 9, 16}, GemvCase{3, 4, 1}})
      check_case(comm, dev, c, 2, Weights::F32, a);
    check_case(comm, dev, {517, 11, 0}, 9, Weights::Alternate, a);
  }
  // 280 KB of output: Auto picks two-shot on one node and beyond two nodes, one-shot on two.
  check_case(comm, dev, {70000, 2, 0}, 2);
}

// Two-shot across nodes adds a node's partials on the node first (node sums, like the
// hierarchical AllReduce): each rank hands the proxy, per other node, the node sums of the blocks
// it relays (one owner's) and its reduced blocks once (to their relay there), who shares them on
// its node. Before node sums every rank sent its partial to every off-node owner and every owner
// its reduced blocks to every off-node rank: at 2 nodes x 2 ranks twice the bytes.
TEST(GemvAllReduce, TwoShotAcrossNodesSendsNodeSums) {
  Communicator comm(MPI_COMM_WORLD);
  if (!equal_nodes_across(comm)) GTEST_SKIP() << "needs equal nodes (TILECOMM_NODE_SIZE)";
  Device dev(traced_test_device_config());
  const std::size_t m = 64 * comm.size(), k = 3;
  OpOptions opt;
  opt.tile = 16;  // 4 blocks per owner
  opt.fused_algorithm = FusedAlgorithm::TwoShot;
  GemvAllReduce op(comm, dev, m, k, opt);
  std::vector<float> w(m * k, 1.0f), x(k, 2.0f), y(m);
  for (int call = 0; call < 2; ++call) {  // both buffer halves
    dev.tracer().clear();
    op.run(w.data(), x.data(), y.data(), Mode::Fused);
    int wrong = 0;
    for (float v : y)
      wrong += v != static_cast<float>(2 * k * comm.size());
    EXPECT_EQ(wrong, 0) << "call " << call;
    const long long owned = 64 * sizeof(float), other_nodes = comm.num_nodes() - 1;
    EXPECT_EQ(handed_to_proxy(dev.tracer()).bytes, 2 * other_nodes * owned) << "call " << call;
  }
}

// Only GemvAllReduce has a choice of fused protocol; the others name the option and refuse it.
TEST(GemvAllReduce, FusedAlgorithmIsRefusedByOtherOperators) {
  Communicator comm(MPI_COMM_WORLD);
  Device dev(test_device_config());
  OpOptions opt;
  opt.fused_algorithm = FusedAlgorithm::OneShot;
  try {
    GemmReduceScatter op(comm, dev, 8, 4, 4, opt);
    ADD_FAILURE() << "fused_algorithm = one_shot accepted by GemmReduceScatter";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("fused_algorithm = one_shot"), std::string::npos)
        << e.what();
  }
}

// General floats: two-shot reduces every row in rank order; one-shot in node order of node sums,
// each in rank order — the same order when only the first node has several ranks (one node,
// nodes of one rank, ...). Then they agree bitwise; the small-integer tests cannot tell orders
// apart.
// Issue 12: switching modes never changes a bit. Random floats (every order of additions gives
// different bits); the want is the documented canonical fold (node sums in node order, each in
// ascending rank order) of every rank's partial W_r x_r, computed here with plain additions.
// bf16: the weights rounded to bfloat16, through the bf16 kernel. The want is folded from each
// context's own partials (bench::compute_only): with n > 1, OpenBLAS's sgemm may round a row's
// partial differently depending on where the row falls in a tile (its edge kernels), and the two
// protocols' default tiles differ. With n = 1 (sgemv, row by row) both contexts' partials must be
// identical, as before the batch existed.
void check_canonical_bits(Communicator& comm, Device& dev, std::size_t n,
                          std::initializer_list<std::size_t> ms, bool bf16 = false) {
  const int r = comm.rank(), p = comm.size();
  for (std::size_t rows : ms) {
    const std::size_t k = 37 + static_cast<std::size_t>(r), m = rows * n;  // m: floats of Y
    std::mt19937 gen(1234u + static_cast<unsigned>(r) + static_cast<unsigned>(m));
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> w(rows * k), x(k * n);
    for (float& v : w)
      v = dist(gen);
    for (float& v : x)
      v = dist(gen);
    std::vector<bfloat16> w16(w.size());
    for (std::size_t i = 0; i < w.size(); ++i)
      w16[i] = bfloat16(w[i]);
    OpOptions one, two;
    one.fused_algorithm = FusedAlgorithm::OneShot;
    two.fused_algorithm = FusedAlgorithm::TwoShot;
    GemvAllReduce a(comm, dev, rows, k, n, one), b(comm, dev, rows, k, n, two);
    std::vector<float> first_partial;
    for (GemvAllReduce* op : {&a, &b}) {
      std::vector<float> partial(m), all(m * p), want(m), node(m);
      if (bf16)
        bench::compute_only(*op, w16.data(), x.data(), partial.data());
      else
        bench::compute_only(*op, w.data(), x.data(), partial.data());
      if (n == 1 && !bf16) {
        // fp32, one vector: the operator's tiles are gemv_f32_operator's rows, which on the AVX2
        // and AVX-512 paths are the same bits (tilecomm's kernel, not the BLAS's order).
        std::vector<float> ref(rows);
        kernels::gemv_f32_operator(w.data(), rows, k, x.data(), ref.data());
        EXPECT_EQ(std::memcmp(partial.data(), ref.data(), m * sizeof(float)), 0) << "m " << rows;
        if (kernels::gemv_kernels().isa != Isa::Scalar) {
          kernels::gemv_kernels_for(Isa::Avx2).f32(w.data(), rows, k, x.data(), ref.data());
          EXPECT_EQ(std::memcmp(partial.data(), ref.data(), m * sizeof(float)), 0)
              << "m " << rows << ": the operator's fp32 GEMV is not the AVX2 kernel's bits";
        }
      }
      if (first_partial.empty())
        first_partial = partial;
      else if (n == 1 || bf16)  // row by row: the tiling cannot matter
        EXPECT_EQ(std::memcmp(partial.data(), first_partial.data(), m * sizeof(float)), 0)
            << "partials of the two contexts differ, m " << rows << ", batch " << n;
      MPI_Allgather(partial.data(), static_cast<int>(m), MPI_FLOAT, all.data(), static_cast<int>(m),
                    MPI_FLOAT, MPI_COMM_WORLD);
      for (int nd = 0; nd < comm.num_nodes(); ++nd) {
        bool first = true;
        for (int q = 0; q < p; ++q) {
          if (comm.node_of(q) != nd) continue;
          for (std::size_t i = 0; i < m; ++i)
            node[i] = first ? all[q * m + i] : node[i] + all[q * m + i];
          first = false;
        }
        for (std::size_t i = 0; i < m; ++i)
          want[i] = nd == 0 ? node[i] : want[i] + node[i];
      }
      for (int call = 0; call < 2; ++call)
        for (Mode mode : kModes) {
          std::vector<float> y(m, -3.0f);
          if (bf16)
            op->run(w16.data(), x.data(), y.data(), mode);
          else
            op->run(w.data(), x.data(), y.data(), mode);
          EXPECT_EQ(std::memcmp(y.data(), want.data(), m * sizeof(float)), 0)
              << (bf16 ? "bf16" : "fp32") << ", m " << rows << ", batch " << n << ", call " << call
              << ", mode " << to_string(mode) << ", protocol " << to_string(op->fused_algorithm());
        }
    }
  }
}

TEST(GemvAllReduce, EveryModeAndProtocolGivesTheCanonicalBitsOnRandomFloats) {
  Communicator comm(MPI_COMM_WORLD);
  Device dev(test_device_config());
  check_canonical_bits(comm, dev, 1, {3001, 70001});
}

// Several vectors per call (X is [K_r x n], Y [M x n]): float32 goes through sgemm, bfloat16
// through the bf16 kernel once per column; the modes and protocols still agree bitwise.
TEST(GemvAllReduce, BatchGivesTheCanonicalBitsOnRandomFloats) {
  Communicator comm(MPI_COMM_WORLD);
  Device dev(test_device_config());
  for (std::size_t n : {2, 3, 8})
    for (bool bf16 : {false, true})
      check_canonical_bits(comm, dev, n, {1001, 9001}, bf16);
}

TEST(GemvAllReduce, BatchMatchesReferenceInEveryMode) {
  Communicator comm(MPI_COMM_WORLD);
  Device dev(test_device_config());
  for (std::size_t n : {1, 2, 3, 8}) {
    for (GemvCase c : {GemvCase{1, 5, 0, n}, GemvCase{7, 3, 0, n}, GemvCase{1000, 33, 0, n},
                       GemvCase{1001, 9, 16, n}, GemvCase{3, 4, 1, n}})
      for (FusedAlgorithm a : {FusedAlgorithm::OneShot, FusedAlgorithm::TwoShot})
        check_case(comm, dev, c, 2, Weights::Alternate, a);
    check_case(comm, dev, {300, 76, 0, n}, 2, Weights::Bf16);
  }
  // 9000 x 8 floats = 288 KB of payload: Auto picks two-shot, though 9000 floats would be one-shot.
  check_case(comm, dev, {9000, 2, 0, 8}, 2);
}

// Up to 256 KiB of output one-shot, on one or two nodes; on more, only while every node sends
// at most 48 KiB in all ((nodes - 1) x the payload; ModelTiles.GemvProtocolAndTilesAcrossNodes).
TEST(GemvAllReduce, AutoPicksTheProtocolByPayloadBytes) {
  Communicator comm(MPI_COMM_WORLD);
  Device dev(test_device_config());
  const int nodes = comm.num_nodes();
  const FusedAlgorithm one = FusedAlgorithm::OneShot, two = FusedAlgorithm::TwoShot;
  // One-shot up to 256 KiB on one node, at every size on two, while (nodes - 1) x 256 KiB <=
  // 48 KiB beyond (never).
  const FusedAlgorithm at_256k = nodes <= 2 ? one : two, above = nodes == 2 ? one : two;
  EXPECT_EQ(GemvAllReduce(comm, dev, 4096, 8).fused_algorithm(), nodes <= 4 ? one : two);
  EXPECT_EQ(GemvAllReduce(comm, dev, 65536, 8).fused_algorithm(), at_256k);
  EXPECT_EQ(GemvAllReduce(comm, dev, 65537, 8).fused_algorithm(), above);
  EXPECT_EQ(GemvAllReduce(comm, dev, 8192, 8, 8).fused_algorithm(), at_256k);
  EXPECT_EQ(GemvAllReduce(comm, dev, 8193, 8, 8).fused_algorithm(), above);
}

TEST(GemvAllReduce, BadBatchRaises) {
  Communicator comm(MPI_COMM_WORLD);
  Device dev(test_device_config());
  try {
    GemvAllReduce op(comm, dev, 8, 4, 0);
    FAIL() << "batch 0 accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("batch = 0"), std::string::npos) << e.what();
  }
  if (comm.size() == 1) return;
  try {
    GemvAllReduce op(comm, dev, 8, 4, comm.rank() == 1 ? 3 : 2);
    FAIL() << "batches that differ across ranks accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Mismatch);
    EXPECT_NE(std::string(e.what()).find("batch differs"), std::string::npos) << e.what();
  }
}

TEST(GemvAllReduce, Bf16WeightsMatchReferenceInEveryMode) {
  Communicator comm(MPI_COMM_WORLD);
  Device dev(test_device_config());
  for (GemvCase c :
       {GemvCase{1, 5, 0}, GemvCase{7, 3, 0}, GemvCase{1000, 33, 0}, GemvCase{4099, 17, 0},
        GemvCase{1001, 9, 16}, GemvCase{3, 4, 1}, GemvCase{300, 76, 0}})
    check_case(comm, dev, c, 2, Weights::Bf16);
}

TEST(GemvAllReduce, Fp32AndBf16CallsAlternateOnOneContext) {
  Communicator comm(MPI_COMM_WORLD);
  Device dev(test_device_config());
  check_case(comm, dev, {517, 40, 0}, 6, Weights::Alternate);
}

TEST(GemvAllReduce, EmptyShapes) {
  Communicator comm(MPI_COMM_WORLD);
  Device dev(test_device_config());
  check_case(comm, dev, {0, 4, 0}, 1);  // m = 0: nothing to do, no hang
  GemvAllReduce op(comm, dev, 64, 0);   // k = 0 on every rank: y = 0
  std::vector<float> y(64, 1.0f);
  for (Mode mode : kModes) {
    op.run(nullptr, nullptr, y.data(), mode);
    for (float v : y)
      ASSERT_EQ(v, 0.0f);
  }
}

TEST(GemvAllReduce, ManyCallsOnOneContext) {
  Communicator comm(MPI_COMM_WORLD);
  Device dev(test_device_config());
  check_case(comm, dev, {517, 11, 0}, 12);
}

TEST(GemvAllReduce, MismatchedMRaisesOnEveryRank) {
  Communicator comm(MPI_COMM_WORLD);
  Device dev(test_device_config());
  if (comm.size() == 1) GTEST_SKIP() << "needs two ranks";
  try {
    GemvAllReduce op(comm, dev, comm.rank() == 1 ? 100 : 99, 4);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Mismatch);
    EXPECT_NE(std::string(e.what()).find("m differs"), std::string::npos) << e.what();
  }
}

TEST(GemvAllReduce, BadArguments) {
  Communicator comm(MPI_COMM_WORLD);
  Device dev(test_device_config());
  GemvAllReduce op(comm, dev, 8, 4);
  std::vector<float> w(32), x(4), y(8);
  EXPECT_THROW(op.run(nullptr, x.data(), y.data(), Mode::Fused), Error);
  EXPECT_THROW(op.run(w.data(), x.data(), nullptr, Mode::Fused), Error);
  EXPECT_THROW(op.run(w.data(), x.data(), w.data() + 4, Mode::Fused), Error);  // y overlaps w
  std::vector<bfloat16> w16(32);
  EXPECT_THROW(op.run(static_cast<const bfloat16*>(nullptr), x.data(), y.data(), Mode::Fused),
               Error);
  // y (32 bytes) overlaps the last 8 bytes of w16 (64 bytes); y = w16 + 32 would not.
  EXPECT_THROW(op.run(w16.data(), x.data(), reinterpret_cast<float*>(w16.data() + 28), Mode::Fused),
               Error);
  EXPECT_THROW(parse_mode("overlapped"), Error);
}

}  // namespace
}  // namespace tilecomm::test
