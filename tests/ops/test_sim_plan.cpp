// The simulator replays the operators' real task lists: a fused call on a one-slot device runs
// its tasks strictly in list order, so the trace marks its tiles leave with (tile, destination,
// bytes) come in plan order; they must equal what the simulator's dry-run plan (built by the same
// planners, ops/model/sim_ops.cpp) says each task sends. Run on one node and on pretend nodes.
#include <tuple>

#include "ops/gemm_alltoall/gemm_alltoall_plan.hpp"
#include "ops/model/sim_ops.hpp"
#include "ops_test_util.hpp"

namespace tilecomm::test {
namespace {

using Mark = std::tuple<long long, long long, long long>;  // tile, peer, bytes

RuntimeConfig one_slot_traced() {
  RuntimeConfig c = RuntimeConfig::from_env();
  c.num_cus = 1;
  c.wg_slots_per_cu = 1;
  c.trace = true;
  return c;
}

// The marks a fused task makes as its tile leaves: computed (for itself), stored (on-node),
// handed to the proxy (off-node).
std::vector<Mark> marks(const Tracer& tracer) {
  std::vector<Mark> out;
  for (const TraceEvent& e : tracer.events())
    if (e.phase == 'i' &&
        (e.name == "tile computed" || e.name == "tile stored" || e.name == "tile handed to proxy"))
      out.emplace_back(e.tile, e.peer, e.bytes);
  return out;
}

// What the plan says, mark by mark: a compute task's tile for its peer (stored, computed for
// itself, or — when its first send is off-node — handed to the proxy; a per-call header, tile
// -1, likewise), then every MPI send of a task (to other owners or other nodes' leaders), in step
// order.
std::vector<Mark> planned(const model::SimRank& rank) {
  std::vector<Mark> out;
  for (const model::SimTask& t : rank.tasks) {
    const bool compute =
        t.label == "compute" || t.label == "pool" || t.label == "gemm" || t.label == "header";
    const model::SimStep* first = nullptr;
    for (const model::SimStep& s : t.steps)
      if (s.kind == model::SimStep::Kind::Send) {
        first = &s;
        break;
      }
    if (compute && (first == nullptr || first->path != model::SimPath::Mpi))
      out.emplace_back(t.tile, t.peer, first ? static_cast<long long>(first->bytes) : -1);
    for (const model::SimStep& s : t.steps)
      if (s.kind == model::SimStep::Kind::Send && s.path == model::SimPath::Mpi)
        out.emplace_back(t.tile, s.peer, static_cast<long long>(s.bytes));
  }
  return out;
}

model::SimSetup setup_of(const Communicator& comm, model::OpShape shape) {
  model::SimSetup s;
  s.shape = shape;
  s.nodes = comm.num_nodes();
  s.ranks_per_node = comm.size() / comm.num_nodes();
  s.cus = 1;
  s.slots = 1;
  return s;
}

// A BlockExchange op's last fused call on `dev` against the simulator's plan of `shape` for this
// rank. A tile for this rank itself is marked with its bytes; the plan has none.
void expect_block_exchange_plan(const Communicator& comm, Device& dev, model::OpShape shape) {
  const model::SimSetup s = setup_of(comm, shape);
  const model::SimRank plan = model::fused_program(model::Profile{}, s)[comm.rank()];
  std::vector<Mark> got = marks(dev.tracer());
  for (Mark& g : got)
    if (std::get<1>(g) == comm.rank()) std::get<2>(g) = -1;
  EXPECT_FALSE(got.empty());
  EXPECT_EQ(got, planned(plan));
}

// Runs a fused GemvAllReduce call with `algorithm` on a traced one-slot device and returns its
// trace marks and the simulator's plan of them for this rank.
std::pair<std::vector<Mark>, std::vector<Mark>> gemv_marks_and_plan(Communicator& comm,
                                                                    std::size_t m, std::size_t tile,
                                                                    FusedAlgorithm algorithm) {
  Device dev(one_slot_traced());
  const std::size_t k = 8;
  OpOptions opt;
  opt.tile = tile;
  opt.fused_algorithm = algorithm;
  GemvAllReduce op(comm, dev, m, k, opt);
  std::vector<float> w(m * k, 1.0f), x(k, 1.0f), y(m);
  op.run(w.data(), x.data(), y.data(), Mode::Fused);
  dev.tracer().clear();
  op.run(w.data(), x.data(), y.data(), Mode::Fused);
  EXPECT_EQ(y[m - 1], static_cast<float>(k * comm.size()));
  model::SimSetup s = setup_of(comm, {model::OpKind::GemvAllReduce, m, k, 1, 1, 1, tile});
  s.options = opt;
  const model::SimRank plan = model::fused_program(model::Profile{}, s)[comm.rank()];
  return {marks(dev.tracer()), planned(plan)};
}

TEST(SimPlan, GemvTwoShotPlanIsWhatTheKernelRan) {
  Communicator comm(MPI_COMM_WORLD);
  if (comm.size() % comm.num_nodes() != 0) GTEST_SKIP() << "uneven nodes";
  const auto [got, want] =
      gemv_marks_and_plan(comm, 96 * comm.size() + 16, 32, FusedAlgorithm::TwoShot);
  // On one node the kernel marks stored tiles only; reduced blocks go out by flag (no mark).
  EXPECT_EQ(got, want);
  EXPECT_FALSE(want.empty());
}

TEST(SimPlan, GemvOneShotPlanIsWhatTheKernelRan) {
  Communicator comm(MPI_COMM_WORLD);
  if (comm.size() % comm.num_nodes() != 0) GTEST_SKIP() << "uneven nodes";
  const std::size_t m = 80 * comm.size() + 16;
  const auto [got, want] = gemv_marks_and_plan(comm, m, 16, FusedAlgorithm::OneShot);
  EXPECT_EQ(got, want);
  EXPECT_GE(want.size(), (m + 15) / 16);
}

TEST(SimPlan, GemmReduceScatterPlanIsWhatTheKernelRan) {
  Communicator comm(MPI_COMM_WORLD);
  if (comm.size() % comm.num_nodes() != 0) GTEST_SKIP() << "uneven nodes";
  Device dev(one_slot_traced());
  const std::size_t m = 40 * comm.size(), k = 4, n = 8;
  OpOptions opt;
  opt.tile = 16;  // 3 blocks of 16, 16, 8 rows per owner
  GemmReduceScatter op(comm, dev, m, k, n, opt);
  std::vector<float> a(m * k, 1.0f), w(k * n, 1.0f), y(op.rows_local() * n);
  op.run(a.data(), w.data(), y.data(), Mode::Fused);
  dev.tracer().clear();
  op.run(a.data(), w.data(), y.data(), Mode::Fused);
  EXPECT_EQ(y[0], static_cast<float>(k * comm.size()));
  model::SimSetup s = setup_of(comm, {model::OpKind::GemmReduceScatter, m, k, n, 1, 1, 16});
  const model::SimRank plan = model::fused_program(model::Profile{}, s)[comm.rank()];
  const std::vector<Mark> want = planned(plan);
  EXPECT_EQ(marks(dev.tracer()), want);
  // A tile per block and owner; across nodes of several ranks also the node sums this rank relays
  // (one owner on each other node).
  const bool node_sums = comm.num_nodes() > 1 && comm.size() > comm.num_nodes();
  EXPECT_EQ(want.size(), 3u * comm.size() + (node_sums ? 3u * (comm.num_nodes() - 1) : 0u));
}

TEST(SimPlan, EmbeddingPlanIsWhatTheKernelRan) {
  Communicator comm(MPI_COMM_WORLD);
  if (comm.size() % comm.num_nodes() != 0) GTEST_SKIP() << "uneven nodes";
  Device dev(one_slot_traced());
  const std::size_t dim = 4, tables = 2, rows = 10, batch = 7 * comm.size() + 3, pool = 2;
  OpOptions opt;
  opt.tile = 3;
  EmbeddingAllToAll op(comm, dev, std::vector<std::size_t>(tables, rows), dim, batch, Pooling::Sum,
                       opt);
  std::vector<std::vector<float>> data(tables, std::vector<float>(rows * dim, 1.0f));
  std::vector<const float*> tp;
  for (auto& d : data)
    tp.push_back(d.data());
  std::vector<std::int64_t> idx(batch * pool, 1);
  std::vector<std::int64_t> offsets(batch + 1);
  for (std::size_t b = 0; b <= batch; ++b)
    offsets[b] = static_cast<std::int64_t>(b * pool);
  std::vector<EmbeddingBags> bags(tables, EmbeddingBags{idx, offsets});
  std::vector<float> out(op.local_batch() * tables * comm.size() * dim);
  op.run(tp, bags, out.data(), Mode::Fused);
  dev.tracer().clear();
  op.run(tp, bags, out.data(), Mode::Fused);
  EXPECT_EQ(out[0], static_cast<float>(pool));
  expect_block_exchange_plan(comm, dev,
                             {model::OpKind::EmbeddingAllToAll, batch, 0, dim, tables, pool, 3});
}

// GemmAllToAll on fused_perf's synthetic routing (the simulator's): 20 rows from every rank over
// 2 experts per rank, tiles of 4 rows; the headers first, then the tiles in remote-first order.
TEST(SimPlan, GemmAllToAllPlanIsWhatTheKernelRan) {
  Communicator comm(MPI_COMM_WORLD);
  if (comm.size() % comm.num_nodes() != 0) GTEST_SKIP() << "uneven nodes";
  Device dev(one_slot_traced());
  const std::size_t tokens = 20, experts = 2, k = 4, n = 8, p = std::size_t(comm.size());
  OpOptions opt;
  opt.tile = 4;
  GemmAllToAll op(comm, dev, experts, k, n, tokens * p, tokens, opt);
  const std::vector<std::size_t> send =
      detail::synthetic_moe_routing(tokens, comm.rank(), experts * p);
  std::vector<std::size_t> recv(experts * p);
  std::size_t rows_in = 0;
  for (int src = 0; src < comm.size(); ++src) {
    const std::vector<std::size_t> theirs = detail::synthetic_moe_routing(tokens, src, experts * p);
    for (std::size_t e = 0; e < experts; ++e)
      rows_in += recv[e * p + std::size_t(src)] = theirs[op.first_expert() + e];
  }
  std::vector<float> w(k * n, 1.0f), x(rows_in * k, 1.0f), y(tokens * n);
  const std::vector<const float*> weights(experts, w.data());
  op.run(weights, x.data(), recv, send, y.data(), Mode::Fused);
  dev.tracer().clear();
  op.run(weights, x.data(), recv, send, y.data(), Mode::Fused);
  EXPECT_EQ(y[0], static_cast<float>(k));
  expect_block_exchange_plan(comm, dev,
                             {model::OpKind::GemmAllToAll, tokens, k, n, experts, 1, opt.tile});
}

}  // namespace
}  // namespace tilecomm::test
