// Overlap is asserted, not only drawn: across (pretend) nodes, a fused call must post its first
// MPI send while compute tiles are still being produced — it would fail if fused mode computed
// everything first and communicated after (a sequential path under another name).
#include <algorithm>
#include <chrono>
#include <limits>
#include <thread>

#include "ops_test_util.hpp"

namespace tilecomm::test {
namespace {

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
  Device dev(traced_test_device_config());
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
  Device dev(traced_test_device_config());
  const std::size_t m = 256 * comm.size(), k = 16, n = 32;
  OpOptions opt;
  opt.tile = 16;
  GemmReduceScatter op(comm, dev, m, k, n, opt);
  std::vector<float> a(m * k, 1.0f), w(k * n, 1.0f), y(op.rows_local() * n);
  op.run(a.data(), w.data(), y.data(), Mode::Fused);  // warm-up
  dev.tracer().clear();
  op.run(a.data(), w.data(), y.data(), Mode::Fused);
  // Across nodes of several ranks a rank may send nothing itself (its node's relays send the node
  // sums): every rank that sends must send early, and some rank must send.
  const auto [first_send, last_store] = first_and_last(dev.tracer(), "send posted", "tile stored");
  int counts[2] = {first_send < std::numeric_limits<double>::infinity() ? 1 : 0, 0};
  counts[1] = counts[0] && !(first_send < last_store) ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, counts, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  EXPECT_GT(counts[0], 0) << "no rank sent anything";
  EXPECT_EQ(counts[1], 0) << "a rank's first send left after its last tile was computed";
  EXPECT_EQ(y[0], static_cast<float>(k * comm.size()));
}

// GemmAllToAll::run_layer (dispatch fused too): a rank computes the tiles of its own rows while a
// peer's rows are still to come. The last rank starts its call 200 ms late; rank 0 must have
// computed a tile before that peer's dispatched rows arrived (it would not if the fused layer
// waited for the whole dispatch before computing, as the unfused modes do).
TEST(FusedOverlap, GemmLayerComputesBeforeItsInputsArrive) {
  CommConfig unverified;  // verify mode's per-call fingerprint would make rank 0 wait at the start
  unverified.check = 0;
  Communicator comm(MPI_COMM_WORLD, unverified);
  const int p = comm.size(), me = comm.rank();
  if (comm.num_nodes() == 1) GTEST_SKIP() << "needs ranks on other (pretend) nodes";
  Device dev(traced_test_device_config());
  const std::size_t k = 64, n = 32, rows = 96;  // every rank routes `rows` rows to every expert
  GemmAllToAll op(comm, dev, 1, k, n, rows * p, rows * p);
  std::vector<std::size_t> recv(p, rows), send(p, rows);
  std::vector<float> tokens(rows * p * k, 1.0f), w(k * n, 1.0f), y(rows * p * n);
  const std::vector<const float*> wp{w.data()};
  op.run_layer(wp, tokens.data(), recv, send, y.data(), Mode::Fused);  // warm-up
  comm.barrier();
  dev.tracer().clear();
  if (me == p - 1) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  op.run_layer(wp, tokens.data(), recv, send, y.data(), Mode::Fused);
  EXPECT_EQ(y[0], static_cast<float>(k));
  if (me != 0 || comm.node_of(p - 1) == comm.node_of(0)) return;
  double first_computed = std::numeric_limits<double>::infinity(), last_input = 0;
  for (const TraceEvent& e : dev.tracer().events()) {
    if (e.phase != 'i') continue;
    if (e.name == "tile computed") first_computed = std::min(first_computed, e.ts_us);
    if (e.name == "tile received" && e.peer == p - 1) last_input = std::max(last_input, e.ts_us);
  }
  EXPECT_LT(first_computed, last_input - 100e3)
      << "rank 0 computed its own rows' first tile only after the late rank's rows arrived";
}

}  // namespace
}  // namespace tilecomm::test
