// A device with a single WG slot (TILECOMM_CUS=1 TILECOMM_WG_SLOTS=1) still runs every mode, also
// across nodes, where the fused kernel's MPI proxy has no slot of its own: fused must equal
// sequential, bitwise, and must not end in a Timeout.
#include "ops_test_util.hpp"

namespace tilecomm::test {
namespace {

RuntimeConfig one_slot() {
  RuntimeConfig c = RuntimeConfig::from_env();
  c.num_cus = 1;
  c.wg_slots_per_cu = 1;
  return c;
}

TEST(FusedOnOneSlot, GemvAllReduce) {
  Communicator comm(MPI_COMM_WORLD);
  Device dev(one_slot());
  const std::size_t m = 1000, k = 7;
  OpOptions opt;
  opt.tile = 64;
  GemvAllReduce op(comm, dev, m, k, opt);
  std::vector<float> w(m * k), x(k), expected(m), y(m);
  for (std::size_t i = 0; i < w.size(); ++i)
    w[i] = small_int(i + comm.rank());
  for (std::size_t i = 0; i < k; ++i)
    x[i] = small_int(3 * i + 1);
  op.run(w.data(), x.data(), expected.data(), Mode::Sequential);
  for (int call = 0; call < 3; ++call) {
    std::fill(y.begin(), y.end(), -1.0f);
    op.run(w.data(), x.data(), y.data(), Mode::Fused);
    EXPECT_EQ(y, expected) << "call " << call;
  }
}

TEST(FusedOnOneSlot, GemmReduceScatter) {
  Communicator comm(MPI_COMM_WORLD);
  Device dev(one_slot());
  const std::size_t m = 24 * comm.size(), k = 5, n = 9;
  OpOptions opt;
  opt.tile = 8;
  GemmReduceScatter op(comm, dev, m, k, n, opt);
  std::vector<float> a(m * k), w(k * n), expected(op.rows_local() * n), y(expected.size());
  for (std::size_t i = 0; i < a.size(); ++i)
    a[i] = small_int(i + 11 * comm.rank());
  for (std::size_t i = 0; i < w.size(); ++i)
    w[i] = small_int(7 * i);
  op.run(a.data(), w.data(), expected.data(), Mode::Sequential);
  for (int call = 0; call < 3; ++call) {
    std::fill(y.begin(), y.end(), -1.0f);
    op.run(a.data(), w.data(), y.data(), Mode::Fused);
    EXPECT_EQ(y, expected) << "call " << call;
  }
}

}  // namespace
}  // namespace tilecomm::test
