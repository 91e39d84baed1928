// GemmAllToAll: every mode equals a reference each rank computes for the rows it routed out,
// bitwise; uneven and zero counts, several calls with changing routing, stragglers; in verify mode
// routing mismatches raise the same error on every rank.
#include "ops_test_util.hpp"

namespace tilecomm::test {
namespace {

std::size_t experts_of(int r) {
  return static_cast<std::size_t>(r % 2) + 1;
}

void check(Communicator& comm, Device& dev, std::size_t k, std::size_t n, int calls,
           std::size_t tile = 0, OpOptions opt = {}) {
  const int p = comm.size(), me = comm.rank();
  const MoeExperts ex(p, experts_of);
  auto W = [](std::size_t g, std::size_t i, std::size_t j) {
    return small_int(g * 5 + i * 3 + j * 11);
  };
  opt.tile = tile;
  GemmAllToAll op(comm, dev, experts_of(me), k, n, 2000, 2000, opt);
  ASSERT_EQ(op.num_experts(), ex.total());
  const auto w = ex.weights(me, k, n, W);
  const auto wp = pointers(w);
  Straggler straggler(dev, 7u + me);
  for (int call = 0; call < calls; ++call) {
    // rows source s routes to expert g this call: uneven, with zeros
    auto cnt = [&](int s, std::size_t g) {
      return static_cast<std::size_t>((s * 7 + g * 13 + call * 5) % 23) * ((g + s + call) % 4 != 0);
    };
    auto X = [&](int s, std::size_t g, std::size_t i, std::size_t kk) {
      return small_int(s + g * 3 + i * 7 + kk * 13 + call);
    };
    const MoeCall c = make_moe_call(ex, p, me, k, n, cnt, X, W);
    const auto& [recv, send, x, ref] = c;
    for (Mode mode : kModes) {
      std::vector<float> y(ref.size(), -555.0f);
      straggler.before_call();
      op.run(wp, x.data(), recv, send, y.data(), mode);
      straggler.after_call();
      int wrong = 0;
      for (std::size_t i = 0; i < y.size(); ++i)
        wrong += y[i] != ref[i];
      EXPECT_EQ(wrong, 0) << "mode " << to_string(mode) << " call " << call << " n " << n;
    }
  }
}

TEST(GemmAllToAll, MatchesReferenceInEveryMode) {
  Communicator comm(MPI_COMM_WORLD);
  Device dev(test_device_config());
  check(comm, dev, 24, 40, 3);
  check(comm, dev, 7, 300, 2);     // two column blocks, the last one partial
  check(comm, dev, 16, 33, 2, 5);  // small row tiles
}

TEST(GemmAllToAll, NonDefaultOptions) {
  Communicator comm(MPI_COMM_WORLD);
  Device dev(test_device_config());
  OpOptions in_rank_order;  // tiles in plain rank order instead of remote first
  in_rank_order.remote_first = false;
  check(comm, dev, 9, 20, 2, 0, in_rank_order);
  OpOptions one_chunk;  // shaped: one chunk, no CU left free
  one_chunk.shaped = {0, 1};
  check(comm, dev, 9, 20, 1, 0, one_chunk);
  OpOptions many_chunks;  // shaped: more chunks than this rank has experts (empty chunks)
  many_chunks.shaped = {2, 7};
  check(comm, dev, 9, 20, 1, 0, many_chunks);
}

// Verify mode (forced on, whatever TILECOMM_CHECK says): the routing is agreed across ranks per
// call. Without it only the ranks whose counts disagree raise (test_alltoall_skew.cpp).
TEST(GemmAllToAll, RoutingMismatchRaisesOnEveryRank) {
  CommConfig verified;
  verified.check = 1;
  Communicator comm(MPI_COMM_WORLD, verified);
  Device dev(test_device_config());
  const int p = comm.size(), me = comm.rank();
  GemmAllToAll op(comm, dev, experts_of(me), 4, 4, 100, 100);
  const std::size_t G = op.num_experts();
  std::vector<std::size_t> recv(experts_of(me) * p, 1), send(G, 1);
  if (me == 0) send[G - 1] = 2;  // rank 0 routes one row more than the last expert expects
  std::vector<float> x(100 * 4), y(100 * 4);
  std::vector<std::vector<float>> w(experts_of(me), std::vector<float>(16));
  std::vector<const float*> wp;
  for (auto& v : w)
    wp.push_back(v.data());
  for (Mode mode : kModes) {
    try {
      op.run(wp, x.data(), recv, send, y.data(), mode);
      FAIL() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::Mismatch);
      EXPECT_NE(std::string(e.what()).find("rank 0 routes 2 rows to expert"), std::string::npos)
          << e.what();
    }
  }
  // Local argument errors: reported on the rank that made them, and named on the others.
  std::vector<std::size_t> short_send(me == 0 ? G - 1 : G, 1);
  try {
    op.run(wp, x.data(), recv, short_send, y.data(), Mode::Fused);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find(me == 0 ? "send_counts has" : "rank 0"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tilecomm::test

namespace tilecomm::test {
namespace {

// Regression: fused MoE across nodes once created MPI datatypes for tile shapes lazily from
// several WGs at once (a data race on the context's type cache that crashed in MPI_Testsome).
// Many distinct tile shapes in one call make the race likely; the datatypes are now created by the
// host before the kernels launch.
TEST(GemmAllToAll, ManyTileShapesInOneCall) {
  Communicator comm(MPI_COMM_WORLD);
  Device dev(test_device_config());
  const int p = comm.size(), me = comm.rank();
  for (int round = 0; round < 4; ++round) {
    OpOptions opt;
    opt.tile = 64;
    GemmAllToAll op(comm, dev, 2, 4, 96, 64 * 2 * p, 64 * 2 * p, opt);
    const std::size_t G = op.num_experts();
    auto cnt = [&](int s, std::size_t g) {
      return 1 + static_cast<std::size_t>(s * 17 + g * 29 + round * 7) % 63;
    };
    std::vector<std::size_t> recv(2 * p), send(G);
    std::size_t rows_in = 0, rows_out = 0;
    for (std::size_t e = 0; e < 2; ++e)
      for (int s = 0; s < p; ++s)
        rows_in += recv[e * p + s] = cnt(s, op.first_expert() + e);
    for (std::size_t g = 0; g < G; ++g)
      rows_out += send[g] = cnt(me, g);
    std::vector<float> x(rows_in * 4, 1.0f), w0(4 * 96, 1.0f), w1(4 * 96, 2.0f), y(rows_out * 96);
    std::vector<const float*> wp = {w0.data(), w1.data()};
    op.run(wp, x.data(), recv, send, y.data(), Mode::Fused);
    std::size_t row = 0;
    for (std::size_t g = 0; g < G; ++g)
      for (std::size_t i = 0; i < send[g]; ++i, ++row)
        ASSERT_EQ(y[row * 96], g % 2 == 0 ? 4.0f : 8.0f) << "expert " << g << " row " << i;
  }
}

}  // namespace
}  // namespace tilecomm::test
