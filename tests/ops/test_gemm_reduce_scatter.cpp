// GemmReduceScatter: every mode equals an independent reference (plain loops + MPI_Allreduce, then
// this rank's rows), bitwise, for uneven K per rank, tiles that do not divide the slice, K = 0,
// repeated calls with changing data, and stragglers.
#include <cmath>
#include <cstring>
#include <random>

#include "ops_test_util.hpp"

namespace tilecomm::test {
namespace {

struct GemmRsCase {
  std::size_t rows_per_rank, k, n;
  std::size_t tile;
};

// Rows [rank * M/p, (rank + 1) * M/p) of sum_r A_r W_r.
std::vector<float> reference(const std::vector<float>& a, const std::vector<float>& w,
                             std::size_t m, std::size_t k, std::size_t n, std::size_t rows) {
  std::vector<float> part(m * n, 0.0f), full(m * n);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < k; ++j)
      for (std::size_t c = 0; c < n; ++c)
        part[i * n + c] += a[i * k + j] * w[j * n + c];
  MPI_Allreduce(part.data(), full.data(), static_cast<int>(m * n), MPI_FLOAT, MPI_SUM,
                MPI_COMM_WORLD);
  const std::size_t first = static_cast<std::size_t>(world_rank()) * rows * n;
  return {full.begin() + first, full.begin() + first + rows * n};
}

void check_case(Communicator& comm, Device& dev, GemmRsCase c, int calls, OpOptions opt = {}) {
  const int r = comm.rank();
  const std::size_t m = c.rows_per_rank * comm.size();
  const std::size_t k = c.k == 0 ? 0 : c.k + static_cast<std::size_t>(r % 3);  // K_r differs
  opt.tile = c.tile;
  GemmReduceScatter op(comm, dev, m, k, c.n, opt);
  ASSERT_EQ(op.rows_local(), c.rows_per_rank);
  ASSERT_EQ(op.row_begin(), r * c.rows_per_rank);
  Straggler straggler(dev, 23u + r);
  for (int call = 0; call < calls; ++call) {
    std::vector<float> a(m * k), w(k * c.n);
    for (std::size_t i = 0; i < a.size(); ++i)
      a[i] = small_int(i * 13 + r * 5 + call);
    for (std::size_t i = 0; i < w.size(); ++i)
      w[i] = small_int(i * 7 + 1000 * call + r);
    const std::vector<float> ref = reference(a, w, m, k, c.n, c.rows_per_rank);
    for (Mode mode : kModes) {
      std::vector<float> y(c.rows_per_rank * c.n, -12345.0f);
      straggler.before_call();
      op.run(a.data(), w.data(), y.data(), mode);
      straggler.after_call();
      int wrong = 0;
      for (std::size_t i = 0; i < y.size(); ++i)
        wrong += y[i] != ref[i];
      EXPECT_EQ(wrong, 0) << "mode " << to_string(mode) << " m " << m << " k " << k << " n " << c.n
                          << " call " << call;
    }
  }
}

// Issue 12: switching modes never changes a bit, on random floats (where every order of additions
// differs), on one node and across (pretend) nodes: the unfused modes' reduce_scatter runs in
// ReduceOrder::Canonical (shm on one node, hierarchical across nodes), the order of fused mode's
// owner reductions. Before the hierarchical ReduceScatter existed, sequential ran the ring's order
// across nodes and differed from fused in the last bits.
TEST(GemmReduceScatter, EveryModeGivesTheSameBitsOnRandomFloats) {
  Communicator comm(MPI_COMM_WORLD);
  Device dev(test_device_config());
  const int r = comm.rank();
  const std::size_t rows = 37, m = rows * comm.size(), k = 29 + r, n = 70;
  std::mt19937 gen(77u + static_cast<unsigned>(r));
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> a(m * k), w(k * n);
  for (float& v : a)
    v = dist(gen) * std::ldexp(1.0f, static_cast<int>(gen() % 16) - 8);
  for (float& v : w)
    v = dist(gen);
  OpOptions opt;
  opt.tile = 8;
  GemmReduceScatter op(comm, dev, m, k, n, opt);
  std::vector<float> first;
  for (Mode mode : {Mode::Sequential, Mode::Shaped, Mode::Fused, Mode::Sequential}) {
    std::vector<float> y(rows * n, -1.0f);
    op.run(a.data(), w.data(), y.data(), mode);
    if (first.empty()) {
      first = y;
      continue;
    }
    int differ = 0;
    for (std::size_t i = 0; i < y.size(); ++i)
      differ += std::memcmp(&y[i], &first[i], sizeof(float)) != 0;
    EXPECT_EQ(differ, 0) << "mode " << to_string(mode) << " differs from sequential";
  }
}

TEST(GemmReduceScatter, MatchesReferenceInEveryMode) {
  Communicator comm(MPI_COMM_WORLD);
  Device dev(test_device_config());
  for (GemmRsCase c : {GemmRsCase{1, 5, 3, 0}, GemmRsCase{7, 3, 17, 0}, GemmRsCase{33, 9, 40, 0},
                       GemmRsCase{37, 4, 5, 8}, GemmRsCase{5, 2, 300, 1}})
    check_case(comm, dev, c, 2);
}

TEST(GemmReduceScatter, ZeroInnerDimensionGivesZeros) {
  Communicator comm(MPI_COMM_WORLD);
  Device dev(test_device_config());
  check_case(comm, dev, {6, 0, 4, 0}, 1);
}

TEST(GemmReduceScatter, ManyCallsOnOneContext) {
  Communicator comm(MPI_COMM_WORLD);
  Device dev(test_device_config());
  check_case(comm, dev, {19, 6, 11, 0}, 10);
}

// set_weights(): W packed once serves later calls without w (every mode and Auto), even after the
// caller's W changes; a call with w packs it itself and ends that packing.
TEST(GemmReduceScatter, WeightsPackedOnceServeLaterCalls) {
  Communicator comm(MPI_COMM_WORLD);
  Device dev(test_device_config());
  const int r = comm.rank();
  const std::size_t rows = 7, m = rows * comm.size(), k = 5 + r % 2, n = 13;
  GemmReduceScatter op(comm, dev, m, k, n);
  std::vector<float> w(k * n);
  for (std::size_t i = 0; i < w.size(); ++i)
    w[i] = small_int(i * 7 + r);
  const std::vector<float> w_kept = w;
  op.set_weights(w.data());
  std::fill(w.begin(), w.end(), 99.0f);  // the caller's W changes: the packed one must not
  for (int call = 0; call < 2; ++call) {
    std::vector<float> a(m * k);
    for (std::size_t i = 0; i < a.size(); ++i)
      a[i] = small_int(i * 13 + r * 5 + call);
    const std::vector<float> ref = reference(a, w_kept, m, k, n, rows);
    for (Mode mode : {Mode::Sequential, Mode::Shaped, Mode::Fused, Mode::Auto}) {
      std::vector<float> y(rows * n, -1.0f);
      op.run(a.data(), y.data(), mode);
      EXPECT_EQ(y, ref) << "mode " << to_string(mode) << " call " << call;
    }
  }
  std::vector<float> a(m * k, 1.0f), y(rows * n);
  op.run(a.data(), w.data(), y.data(), Mode::Sequential);  // packs w = 99s
  EXPECT_EQ(y, reference(a, w, m, k, n, rows));
  try {
    op.run(a.data(), y.data(), Mode::Sequential);
    ADD_FAILURE() << "no error for a call without w after a call with it";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument) << e.what();
    EXPECT_NE(std::string(e.what()).find("set_weights"), std::string::npos) << e.what();
  }
  EXPECT_THROW(op.set_weights(nullptr), Error);
}

TEST(GemmReduceScatter, NonDefaultOptions) {
  Communicator comm(MPI_COMM_WORLD);
  Device dev(test_device_config());
  OpOptions in_rank_order;  // tiles in plain rank order instead of remote first
  in_rank_order.remote_first = false;
  check_case(comm, dev, {21, 4, 6, 8}, 2, in_rank_order);
  OpOptions one_chunk;  // shaped: one chunk, no CU left free
  one_chunk.shaped = {0, 1};
  check_case(comm, dev, {21, 4, 6, 8}, 1, one_chunk);
  OpOptions many_chunks;  // shaped: more chunks than rows per rank (clamped)
  many_chunks.shaped = {2, 50};
  check_case(comm, dev, {5, 4, 6, 2}, 1, many_chunks);
}

// Across nodes a node's partials of an off-node owner's block are added on the node first: each
// rank hands the proxy one block per owner it relays (one owner per other node when the nodes have
// equal sizes), and the owner receives one per other node. Before node sums, every rank sent its
// own partial of every off-node owner's block: at 2 nodes x 2 ranks twice the bytes over the link.
TEST(GemmReduceScatter, AcrossNodesOneNodeSumPerOwnerCrossesTheLink) {
  Communicator comm(MPI_COMM_WORLD);
  if (!equal_nodes_across(comm)) GTEST_SKIP() << "needs equal nodes (TILECOMM_NODE_SIZE)";
  Device dev(traced_test_device_config());
  const std::size_t rows = 24, m = rows * comm.size(), k = 5, n = 7;
  OpOptions opt;
  opt.tile = 8;  // 3 blocks per owner
  GemmReduceScatter op(comm, dev, m, k, n, opt);
  std::vector<float> a(m * k, 1.0f), w(k * n, 1.0f), y(rows * n);
  op.run(a.data(), w.data(), y.data(), Mode::Fused);
  EXPECT_EQ(y[0], static_cast<float>(k * comm.size()));
  const HandedToProxy handed = handed_to_proxy(dev.tracer());
  const long long other_nodes = comm.num_nodes() - 1;
  EXPECT_EQ(handed.tiles, 3 * other_nodes);
  EXPECT_EQ(handed.bytes, other_nodes * static_cast<long long>(rows * n * sizeof(float)));
}

TEST(GemmReduceScatter, BadShapesAndArguments) {
  Communicator comm(MPI_COMM_WORLD);
  Device dev(test_device_config());
  if (comm.size() > 1) {
    try {  // m not a multiple of the ranks: raised locally, on every rank, before communicating
      GemmReduceScatter op(comm, dev, comm.size() + 1, 2, 3);
      FAIL() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
      EXPECT_NE(std::string(e.what()).find("not a multiple"), std::string::npos) << e.what();
    }
    try {
      GemmReduceScatter op(comm, dev, 2 * comm.size(), 2, comm.rank() == 1 ? 4 : 3);
      FAIL() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::Mismatch);
      EXPECT_NE(std::string(e.what()).find("n differs"), std::string::npos) << e.what();
    }
  }
  GemmReduceScatter op(comm, dev, 4 * comm.size(), 2, 3);
  std::vector<float> a(8 * comm.size()), w(6), y(12);
  EXPECT_THROW(op.run(nullptr, w.data(), y.data(), Mode::Fused), Error);
  EXPECT_THROW(op.run(a.data(), w.data(), nullptr, Mode::Fused), Error);
  EXPECT_THROW(op.run(a.data(), w.data(), a.data() + 1, Mode::Fused), Error);  // y overlaps a
}

}  // namespace
}  // namespace tilecomm::test
