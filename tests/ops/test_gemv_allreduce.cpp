// GemvAllReduce: every mode equals an independent reference (plain loops + MPI_Allreduce), bitwise,
// for uneven shapes, empty inputs, repeated calls with changing data, and stragglers; with float32
// and bfloat16 weights (small integers: exact in both).
#include "ops_test_util.hpp"

namespace tilecomm::test {
namespace {

struct GemvCase {
  std::size_t m, k;
  std::size_t tile;
};

std::vector<float> reference(const std::vector<float>& w, const std::vector<float>& x,
                             std::size_t m, std::size_t k) {
  std::vector<float> part(m, 0.0f), y(m);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < k; ++j)
      part[i] += w[i * k + j] * x[j];
  MPI_Allreduce(part.data(), y.data(), static_cast<int>(m), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  return y;
}

enum class Weights { F32, Bf16, Alternate };  // Alternate: bf16 on odd calls

void check_case(Communicator& comm, Device& dev, GemvCase c, int calls,
                Weights weights = Weights::F32) {
  const int r = comm.rank();
  const std::size_t k = c.k + static_cast<std::size_t>(r % 3);  // K_r differs per rank
  OpOptions opt;
  opt.tile = c.tile;
  GemvAllReduce op(comm, dev, c.m, k, opt);
  Straggler straggler(dev, 17u + r);
  for (int call = 0; call < calls; ++call) {
    std::vector<float> w(c.m * k), x(k);
    for (std::size_t i = 0; i < w.size(); ++i)
      w[i] = small_int(i * 31 + r * 7 + call);
    for (std::size_t i = 0; i < k; ++i)
      x[i] = small_int(i + 1000 * call + r);
    std::vector<bfloat16> w16(w.size());
    for (std::size_t i = 0; i < w.size(); ++i)
      w16[i] = bfloat16(w[i]);  // exact: small integers
    const bool bf16 = weights == Weights::Bf16 || (weights == Weights::Alternate && call % 2 == 1);
    const std::vector<float> ref = reference(w, x, c.m, k);
    for (Mode mode : kModes) {
      std::vector<float> y(c.m, -12345.0f);
      straggler.before_call();
      if (bf16)
        op.run(w16.data(), x.data(), y.data(), mode);
      else
        op.run(w.data(), x.data(), y.data(), mode);
      straggler.after_call();
      int wrong = 0;
      for (std::size_t i = 0; i < c.m; ++i)
        wrong += y[i] != ref[i];
      EXPECT_EQ(wrong, 0) << "mode " << to_string(mode) << " m " << c.m << " k " << k << " call "
                          << call << (bf16 ? " bf16" : " fp32");
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
