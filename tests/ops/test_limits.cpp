// Sizes that would overflow an MPI message's int count are refused when the context is built, on
// every rank, before anything is allocated or sent.
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
