// The fused operators' MPI proxy (ops/common/proxy.hpp) on its own, between ranks 0 and 1.
#include <chrono>
#include <cstdint>
#include <thread>

#include "ops/common/proxy.hpp"
#include "ops_test_util.hpp"

namespace tilecomm::test {
namespace {

// Open MPI's MPI_Testsome either reports completed requests or, finding none, progresses and
// reports none. A poll whose progress completed a tile must raise its flag itself: left to the
// next poll, an arrival waited up to a whole background sleep (an off-node owner's dispatched
// inputs landed one per poll). Rank 1's tile is in rank 0's transport before rank 0's one poll,
// and rank 0 calls no MPI function in between.
TEST(Proxy, OnePollRaisesTheFlagOfATileItsProgressBrought) {
  const int me = world_rank();
  if (world_size() < 2) GTEST_SKIP() << "needs two ranks";
  MPI_Comm mpi;
  MPI_Comm_dup(MPI_COMM_WORLD, &mpi);
  {
    detail::Proxy proxy(mpi, 30.0, "test");
    TileFlags flags(1);
    std::uint64_t in = 0, out = 42;
    if (me == 0) {
      proxy.reset();
      proxy.expect_recv(&in, 8, MPI_BYTE, 1, 7, &flags, 0, 1);
      proxy.start();
    }
    MPI_Barrier(mpi);
    if (me == 1) MPI_Send(&out, 8, MPI_BYTE, 0, 7, mpi);  // eager: complete once it has left
    if (me == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // it has arrived by now
      Device dev(test_device_config());
      Stream s = dev.create_stream(Stream::kNormal);
      s.launch({"poll", {1, 1}, 0}, [&](const WorkgroupContext& wg) { proxy.poll(wg); });
      s.synchronize();
      EXPECT_TRUE(flags.test(0, 1)) << "the tile arrived during the poll, but its flag is down";
      proxy.run(nullptr);  // completes it, if the poll did not
      EXPECT_EQ(in, 42u);
    }
  }
  MPI_Barrier(mpi);
  MPI_Comm_free(&mpi);
}

}  // namespace
}  // namespace tilecomm::test
