// Sizes that would overflow an MPI message's int count are refused when the context is built, on
// every rank, before anything is allocated or sent; a declined forced algorithm leaves a context
// usable.
#include "ops_test_util.hpp"

namespace tilecomm::test {
namespace {

TEST(Limits, EmbeddingTileLargerThanAnMpiMessage) {
  Communicator comm(MPI_COMM_WORLD);
  Device dev(test_device_config());
  OpOptions opt;
  opt.tile = 4096;  // 4096 bags x 2^20 floats = 2^32 floats in one message
  try {
    EmbeddingAllToAll op(comm, dev, {1}, std::size_t{1} << 20, 4096 * comm.size(), Pooling::Sum,
                         opt);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("more than one MPI message holds"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tilecomm::test

namespace tilecomm::test {
namespace {

// A forced collective algorithm that cannot run the call (two_shot across nodes) is refused by
// every rank before it communicates: NotSupported, and the context and its communicator stay
// usable (they used to be marked failed, as after a Timeout).
TEST(Limits, DeclinedAlgorithmLeavesTheContextUsable) {
  Communicator comm(MPI_COMM_WORLD);
  if (comm.num_nodes() == 1) GTEST_SKIP() << "two_shot runs on one node";
  Device dev(test_device_config());
  const std::size_t m = 256, k = 8;
  OpOptions forced;
  forced.algorithm = "two_shot";
  GemvAllReduce op(comm, dev, m, k, forced);
  std::vector<float> w(m * k, 1.0f), x(k, 1.0f), y(m, 0.0f);
  try {
    op.run(w.data(), x.data(), y.data(), Mode::Sequential);
    ADD_FAILURE() << "two_shot ran across nodes";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::NotSupported) << e.what();
  }
  op.run(w.data(), x.data(), y.data(), Mode::Fused);  // the fused protocol needs no collective
  EXPECT_EQ(y[0], static_cast<float>(k * comm.size()));
  float one = 1.0f, sum = 0.0f;
  allreduce(comm, &one, &sum, 1, DataType::Float32, ReduceOp::Sum);
  EXPECT_EQ(sum, static_cast<float>(comm.size()));
}

}  // namespace
}  // namespace tilecomm::test
