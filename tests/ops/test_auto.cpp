// Mode::Auto on real operators: trial calls give the same results as sequential, the context
// settles after the warm-up round and auto_rounds measured rounds, every rank settles on the same
// mode, and it stays settled. (The choice rule itself: test_auto_mode.cpp.)
#include <cmath>
#include <string>

#include "ops/common/auto_mode.hpp"
#include "ops_test_util.hpp"

namespace tilecomm::test {
namespace {

// Every rank's settled mode, gathered; all must be equal.
void expect_same_choice_everywhere(std::optional<Mode> mine) {
  ASSERT_TRUE(mine.has_value());
  const int me = static_cast<int>(*mine);
  std::vector<int> all(world_size());
  MPI_Allgather(&me, 1, MPI_INT, all.data(), 1, MPI_INT, MPI_COMM_WORLD);
  for (int r = 0; r < world_size(); ++r)
    EXPECT_EQ(all[r], me) << "rank " << r << " settled on another mode";
  EXPECT_NE(*mine, Mode::Auto);
}

TEST(AutoMode, GemvTriesEveryModeThenSettlesEverywhere) {
  Communicator comm(MPI_COMM_WORLD);
  Device dev(test_device_config());
  const int me = comm.rank();
  const std::size_t m = 700, k = 33;
  OpOptions o;
  o.auto_rounds = 2;        // a pass of 3 blocks of 3 calls (lead-in + 2), + 2 more if not clear
  o.auto_min_trial_ms = 0;  // the schedule counted below: no short-trial rounds
  GemvAllReduce op(comm, dev, m, k, o);
  std::vector<float> w(m * k), x(k), ref(m), y(m);
  for (std::size_t i = 0; i < w.size(); ++i)
    w[i] = small_int(i * 7 + me);
  for (std::size_t i = 0; i < k; ++i)
    x[i] = small_int(i + 31 * me);
  op.run(w.data(), x.data(), ref.data(), Mode::Sequential);  // explicit: not counted
  Straggler straggler(dev, 5u + me);
  bool settled = false;
  for (int call = 0; call < 30; ++call) {
    // Settles after 9, 18 or 27 calls (auto_choice_is_clear), never before 9, then keeps it.
    if (call < 9) EXPECT_FALSE(op.auto_choice().has_value()) << "before call " << call;
    if (call == 27) EXPECT_TRUE(op.auto_choice().has_value()) << "before call " << call;
    if (settled) EXPECT_TRUE(op.auto_choice().has_value()) << "before call " << call;
    settled = op.auto_choice().has_value();
    std::fill(y.begin(), y.end(), -1.0f);
    straggler.before_call(1500);
    op.run(w.data(), x.data(), y.data(), Mode::Auto);
    straggler.after_call();
    EXPECT_EQ(y, ref) << "call " << call;
  }
  expect_same_choice_everywhere(op.auto_choice());
}

TEST(AutoMode, EmbeddingAndMoeSettleToo) {
  Communicator comm(MPI_COMM_WORLD);
  Device dev(test_device_config());
  const int p = comm.size(), me = comm.rank();
  OpOptions o;
  o.auto_rounds = 1;
  o.auto_min_trial_ms = 0;  // the schedule counted below: no short-trial rounds
  {
    const std::size_t dim = 8, batch = 10, rows = 12;
    EmbeddingAllToAll op(comm, dev, {rows}, dim, batch, Pooling::Sum, o);
    std::vector<float> t(rows * dim);
    for (std::size_t i = 0; i < t.size(); ++i)
      t[i] = small_int(i + 100 * me);
    std::vector<std::int64_t> idx, off{0};
    for (std::size_t b = 0; b < batch; ++b) {
      idx.push_back(static_cast<std::int64_t>((b * 5 + me) % rows));
      off.push_back(static_cast<std::int64_t>(idx.size()));
    }
    const float* tables[] = {t.data()};
    const EmbeddingBags bags[] = {{idx, off, {}}};
    const std::size_t size = op.local_batch() * op.num_tables() * dim;
    std::vector<float> ref(size), out(size);
    op.run(tables, bags, ref.data(), Mode::Sequential);
    for (int call = 0; call < 18; ++call) {  // settled after 6, 12 or 18 (auto_rounds = 1)
      op.run(tables, bags, out.data(), Mode::Auto);
      EXPECT_EQ(out, ref) << "embedding call " << call;
    }
    expect_same_choice_everywhere(op.auto_choice());
  }
  {
    const std::size_t k = 5, n = 7;
    const MoeExperts ex(p, [](int) { return std::size_t{1}; });
    auto W = [](std::size_t g, std::size_t i, std::size_t j) { return small_int(g + i * 3 + j); };
    auto cnt = [](int s, std::size_t g) { return static_cast<std::size_t>(s + 2 * g) % 5; };
    auto X = [](int s, std::size_t g, std::size_t i, std::size_t kk) {
      return small_int(s * 5 + g + i * 11 + kk);
    };
    GemmAllToAll op(comm, dev, 1, k, n, 5 * p, 5 * p, o);
    const auto w = ex.weights(me, k, n, W);
    const auto wp = pointers(w);
    const MoeCall c = make_moe_call(ex, p, me, k, n, cnt, X, W);
    std::vector<float> y(c.ref.size());
    for (int call = 0; call < 18; ++call) {  // settled after 6, 12 or 18 (auto_rounds = 1)
      op.run(wp, c.x.data(), c.recv, c.send, y.data(), Mode::Auto);
      EXPECT_EQ(y, c.ref) << "MoE call " << call;
    }
    expect_same_choice_everywhere(op.auto_choice());
  }
}

// Trials shorter in all than auto_min_trial_ms are extended by a pass, 8 times at most
// (kAutoShortExtensions); a bound no trial reaches makes that exact: 9 passes of 3 blocks of 2
// calls (a lead-in and auto_rounds = 1), the same on every rank.
TEST(AutoMode, ShortTrialsAreExtendedUpToTheirLimit) {
  Communicator comm(MPI_COMM_WORLD);
  Device dev(test_device_config());
  const std::size_t m = 64, k = 8;
  OpOptions o;
  o.auto_rounds = 1;
  o.auto_min_trial_ms = 1e6;
  GemvAllReduce op(comm, dev, m, k, o);
  std::vector<float> w(m * k, 1.0f), x(k, 1.0f), y(m);
  constexpr int kCalls = 3 * 2 * (1 + detail::kAutoShortExtensions);
  for (int call = 0; call < kCalls; ++call) {
    EXPECT_FALSE(op.auto_choice().has_value()) << "before call " << call;
    op.run(w.data(), x.data(), y.data(), Mode::Auto);
    EXPECT_EQ(y, std::vector<float>(m, static_cast<float>(k * comm.size()))) << "call " << call;
  }
  ASSERT_TRUE(op.auto_choice().has_value()) << "after " << kCalls << " calls";
  expect_same_choice_everywhere(op.auto_choice());
}

TEST(AutoMode, RoundsBelowOneAreRefusedAndTheNameParses) {
  Communicator comm(MPI_COMM_WORLD);
  Device dev(test_device_config());
  OpOptions o;
  o.auto_rounds = 0;
  try {
    GemvAllReduce op(comm, dev, 16, 2, o);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("auto_rounds = 0"), std::string::npos) << e.what();
  }
  for (double bad : {-1.0, std::nan("")}) {
    o.auto_rounds = 3;
    o.auto_min_trial_ms = bad;
    try {
      GemvAllReduce op(comm, dev, 16, 2, o);
      FAIL() << "no error for auto_min_trial_ms = " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
      EXPECT_NE(std::string(e.what()).find("auto_min_trial_ms = "), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(parse_mode("auto"), Mode::Auto);
  EXPECT_EQ(to_string(Mode::Auto), "auto");
}

}  // namespace
}  // namespace tilecomm::test
