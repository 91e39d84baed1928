// Overlap is asserted, not only drawn: across (pretend) nodes, a fused call must post its first
// MPI send while compute tiles are still being produced — it would fail if fused mode computed
// everything first and communicated after (a sequential path under another name).
#include <algorithm>
#include <limits>

#include "ops_test_util.hpp"

namespace tilecomm::test {
namespace {

RuntimeConfig traced() {
  RuntimeConfig c = test_device_config();
  c.trace = true;
  return c;
}

// Times (trace clock) of the first mark named `first` and the last mark named `last`.
std::pair<double, double> first_and_last(const Tracer& tracer, const char* first,
                                         const char* last) {
  double t_first = std::numeric_limits<double>::infinity(), t_last = -t_first;
  for (const TraceEvent& e : tracer.events()) {
    if (e.phase != 'i') continue;
    if (e.name == first) t_first = std::min(t_first, e.ts_us);
    if (e.name == last) t_last = std::max(t_last, e.ts_us);
  }
  return {t_first, t_last};
}

TEST(FusedOverlap, GemvAllReduceSendsBeforeItsComputeEnds) {
  Communicator comm(MPI_COMM_WORLD);
  if (comm.num_nodes() == 1) GTEST_SKIP() << "needs ranks on other (pretend) nodes";
  Device dev(traced());
  const std::size_t m = 64 * 64 * comm.size(), k = 32;
  OpOptions opt;
  opt.tile = 64;
  GemvAllReduce op(comm, dev, m, k, opt);
  std::vector<float> w(m * k, 1.0f), x(k, 1.0f), y(m);
  op.run(w.data(), x.data(), y.data(), Mode::Fused);  // warm-up
  dev.tracer().clear();
  op.run(w.data(), x.data(), y.data(), Mode::Fused);
  // Remote-bound blocks are computed first and sent at once; this rank's own blocks come last.
  const auto [first_send, last_store] = first_and_last(dev.tracer(), "send posted", "tile stored");
  EXPECT_LT(first_send, last_store) << "the first send left after the last tile was computed";
  EXPECT_EQ(y[0], static_cast<float>(k * comm.size()));
}

TEST(FusedOverlap, GemmReduceScatterSendsBeforeItsComputeEnds) {
  Communicator comm(MPI_COMM_WORLD);
  if (comm.num_nodes() == 1) GTEST_SKIP() << "needs ranks on other (pretend) nodes";
  Device dev(traced());
  const std::size_t m = 256 * comm.size(), k = 16, n = 32;
  OpOptions opt;
  opt.tile = 16;
  GemmReduceScatter op(comm, dev, m, k, n, opt);
  std::vector<float> a(m * k, 1.0f), w(k * n, 1.0f), y(op.rows_local() * n);
  op.run(a.data(), w.data(), y.data(), Mode::Fused);  // warm-up
  dev.tracer().clear();
  op.run(a.data(), w.data(), y.data(), Mode::Fused);
  const auto [first_send, last_store] = first_and_last(dev.tracer(), "send posted", "tile stored");
  EXPECT_LT(first_send, last_store) << "the first send left after the last tile was computed";
  EXPECT_EQ(y[0], static_cast<float>(k * comm.size()));
}

}  // namespace
}  // namespace tilecomm::test
