// The shaped mode's other policies (ShapedOptions::policy, issue 13's baselines): CuMask (a
// dedicated communication core) and NonBlocking (chunks on every CU, collectives posted by the
// host to a progress thread). Every operator gives the sequential mode's bits with each; with
// CuMask the compute kernels run only on CUs free_cus.. and the communication kernels only on CUs
// 0..free_cus-1, with NonBlocking compute uses every CU and no communication kernel exists
// (checked in the trace); a CuMask free_cus that leaves no CU for compute is refused at creation,
// naming the value.
#include <set>
#include <string>

#include "ops_test_util.hpp"

namespace tilecomm::test {
namespace {

OpOptions policy_options(ShapedPolicy policy, int chunks = 3) {
  OpOptions o;
  o.shaped = {1, chunks, policy};
  return o;
}

// Runs `run(mode, out)` sequential and shaped; both outputs must be equal, bitwise.
template <class Run>
void expect_shaped_equals_sequential(std::size_t size, Run run, const char* op) {
  std::vector<float> seq(size, -1.0f), shaped(size, -2.0f);
  run(Mode::Sequential, seq.data());
  run(Mode::Shaped, shaped.data());
  int wrong = 0;
  for (std::size_t i = 0; i < size; ++i)
    wrong += seq[i] != shaped[i];
  EXPECT_EQ(wrong, 0) << op << ": shaped differs from sequential";
}

class ShapedPolicyTest : public ::testing::TestWithParam<ShapedPolicy> {};

TEST_P(ShapedPolicyTest, EveryOperatorMatchesSequential) {
  Communicator comm(MPI_COMM_WORLD);
  Device dev(test_device_config());
  const int p = comm.size(), me = comm.rank();
  auto cu_mask_options = [](int chunks = 3) { return policy_options(GetParam(), chunks); };
  {  // GemvAllReduce
    const std::size_t m = 301, k = 17 + static_cast<std::size_t>(me);
    OpOptions o = cu_mask_options();
    o.tile = 32;
    GemvAllReduce op(comm, dev, m, k, o);
    std::vector<float> w(m * k), x(k);
    for (std::size_t i = 0; i < w.size(); ++i)
      w[i] = small_int(i + 7 * me);
    for (std::size_t i = 0; i < k; ++i)
      x[i] = small_int(i * 3 + me);
    expect_shaped_equals_sequential(
        m, [&](Mode mode, float* y) { op.run(w.data(), x.data(), y, mode); }, "GemvAllReduce");
  }
  {  // EmbeddingAllToAll: two tables per rank, bags of 0..4 rows
    const std::size_t dim = 19, batch = 23, rows = 40;
    EmbeddingAllToAll op(comm, dev, {rows, rows}, dim, batch, Pooling::Sum, cu_mask_options());
    std::vector<std::vector<float>> t(2, std::vector<float>(rows * dim));
    std::vector<std::vector<std::int64_t>> idx(2), off(2, {0});
    for (std::size_t i = 0; i < 2; ++i) {
      for (std::size_t j = 0; j < t[i].size(); ++j)
        t[i][j] = small_int(j + 1000 * i + 77 * me);
      for (std::size_t b = 0; b < batch; ++b) {
        for (std::size_t j = 0; j < (b + i) % 5; ++j)
          idx[i].push_back(static_cast<std::int64_t>((b * 7 + j * 3 + i) % rows));
        off[i].push_back(static_cast<std::int64_t>(idx[i].size()));
      }
    }
    const float* tables[] = {t[0].data(), t[1].data()};
    const EmbeddingBags bags[] = {{idx[0], off[0], {}}, {idx[1], off[1], {}}};
    expect_shaped_equals_sequential(
        op.local_batch() * op.num_tables() * dim,
        [&](Mode mode, float* out) { op.run(tables, bags, out, mode); }, "EmbeddingAllToAll");
  }
  {  // GemmAllToAll: one expert per rank, uneven counts
    const std::size_t k = 9, n = 14;
    const MoeExperts ex(p, [](int) { return std::size_t{1}; });
    auto W = [](std::size_t g, std::size_t i, std::size_t j) { return small_int(g + i * 5 + j); };
    auto cnt = [](int s, std::size_t g) { return static_cast<std::size_t>(s * 3 + g * 5) % 7; };
    auto X = [](int s, std::size_t g, std::size_t i, std::size_t kk) {
      return small_int(s * 11 + g * 3 + i * 7 + kk);
    };
    OpOptions o = cu_mask_options();
    o.tile = 2;
    GemmAllToAll op(comm, dev, 1, k, n, 7 * p, 7 * p, o);
    const auto w = ex.weights(me, k, n, W);
    const auto wp = pointers(w);
    const MoeCall c = make_moe_call(ex, p, me, k, n, cnt, X, W);
    expect_shaped_equals_sequential(
        c.ref.size(), [&](Mode mode, float* y) { op.run(wp, c.x.data(), c.recv, c.send, y, mode); },
        "GemmAllToAll");
  }
  {  // GemmReduceScatter
    const std::size_t m = 8 * static_cast<std::size_t>(p), k = 6, n = 10;
    GemmReduceScatter op(comm, dev, m, k, n, cu_mask_options());
    std::vector<float> a(m * k), w(k * n);
    for (std::size_t i = 0; i < a.size(); ++i)
      a[i] = small_int(i + 13 * me);
    for (std::size_t i = 0; i < w.size(); ++i)
      w[i] = small_int(i * 3 + me);
    expect_shaped_equals_sequential(
        op.rows_local() * n, [&](Mode mode, float* y) { op.run(a.data(), w.data(), y, mode); },
        "GemmReduceScatter");
  }
}

INSTANTIATE_TEST_SUITE_P(Policies, ShapedPolicyTest,
                         ::testing::Values(ShapedPolicy::CuMask, ShapedPolicy::NonBlocking),
                         [](const auto& info) { return std::string(to_string(info.param)); });

// The CUs each kernel's WGs ran on, from the trace of one shaped GEMV call.
struct ShapedCus {
  std::set<int> compute, comm;
};
ShapedCus shaped_cus(Communicator& comm, ShapedPolicy policy) {
  RuntimeConfig cfg = test_device_config();
  cfg.trace = true;
  Device dev(cfg);
  OpOptions o = policy_options(policy, 4);
  o.tile = 16;
  const std::size_t m = 16 * 64, k = 8;
  GemvAllReduce op(comm, dev, m, k, o);
  std::vector<float> w(m * k, 1.0f), x(k, 1.0f), y(m);
  op.run(w.data(), x.data(), y.data(), Mode::Shaped);
  EXPECT_EQ(y[0], static_cast<float>(k * comm.size()));
  ShapedCus cus;
  for (const TraceEvent& e : dev.tracer().events()) {
    if (e.phase != 'X' || e.category != "wg") continue;
    if (e.name.find("compute.chunk") != std::string::npos) cus.compute.insert(e.cu);
    if (e.name.find("collective.chunk") != std::string::npos) cus.comm.insert(e.cu);
  }
  return cus;
}

// CuMask: the chunks' compute kernels never touch CU 0, the collective kernels never leave it.
TEST(ShapedCuMask, ComputeAndCommunicationKeepToTheirCus) {
  Communicator comm(MPI_COMM_WORLD);
  const ShapedCus cus = shaped_cus(comm, ShapedPolicy::CuMask);
  EXPECT_EQ(cus.compute, std::set<int>{1});
  EXPECT_EQ(cus.comm, std::set<int>{0});
}

// NonBlocking: 64 compute WGs spread over both CUs; the collectives are no device kernels.
TEST(ShapedNonBlocking, ComputeUsesEveryCuAndNoCommunicationKernelRuns) {
  Communicator comm(MPI_COMM_WORLD);
  const ShapedCus cus = shaped_cus(comm, ShapedPolicy::NonBlocking);
  EXPECT_EQ(cus.compute, (std::set<int>{0, 1}));
  EXPECT_TRUE(cus.comm.empty());
}

TEST(ShapedCuMask, NoCuLeftForComputeIsRefused) {
  Communicator comm(MPI_COMM_WORLD);
  Device dev(test_device_config());  // 2 CUs
  for (int free : {0, 2}) {
    OpOptions o;
    o.shaped = {free, 2, ShapedPolicy::CuMask};
    try {
      GemvAllReduce op(comm, dev, 64, 4, o);
      FAIL() << "no error for free_cus = " << free;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
      EXPECT_NE(std::string(e.what()).find("shaped.free_cus = " + std::to_string(free)),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_EQ(parse_shaped_policy("cu_mask"), ShapedPolicy::CuMask);
  EXPECT_EQ(to_string(ShapedPolicy::Lds), "lds");
  EXPECT_EQ(parse_shaped_policy("nonblocking"), ShapedPolicy::NonBlocking);
  EXPECT_THROW(parse_shaped_policy("cores"), Error);
}

}  // namespace
}  // namespace tilecomm::test
