// Verify mode (CommConfig::check / TILECOMM_CHECK): matching calls pass and give right results;
// differing counts, operations, dtypes, algorithms, modes, a skipped call, All-to-Allv counts that
// do not pair up raise the same error on every rank. After each error the communicator is still
// in step (the exchange completed everywhere), so the next call works. Calls a rank rejects itself
// raise there alone, before any communication, and do not count.
#include <gtest/gtest.h>
#include <mpi.h>

#include <numeric>
#include <string>
#include <vector>

#include "tilecomm/tilecomm.hpp"

namespace tilecomm {
namespace {

int world_rank() {
  int r;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

CommConfig checked() {
  CommConfig c;
  c.check = 1;
  return c;
}

// Runs f, which must throw Error(code) whose message contains every one of `parts`.
template <class F>
void expect_error(F&& f, ErrorCode code, std::vector<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "no error raised (expected " << to_string(code) << ")";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    for (const auto& p : parts)
      EXPECT_NE(e.message().find(p), std::string::npos) << "'" << p << "' not in: " << e.what();
  }
}

// The next matched call gives the right sum: the communicator is still usable.
void expect_usable(Communicator& comm) {
  std::vector<std::int32_t> v(100, 1), r(100);
  allreduce(comm, v.data(), r.data(), v.size(), DataType::Int32, ReduceOp::Sum);
  EXPECT_EQ(r[0], comm.size());
  EXPECT_EQ(r[99], comm.size());
}

TEST(Check, MatchingCallsPassWithRightResults) {
  Communicator comm(MPI_COMM_WORLD, checked());
  const int p = comm.size(), me = comm.rank();
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{1000}, std::size_t{70000}}) {
    std::vector<float> a(n, float(me + 1)), b(n);
    allreduce(comm, a.data(), b.data(), n, DataType::Float32, ReduceOp::Sum);
    for (float v : b)
      ASSERT_EQ(v, float(p * (p + 1) / 2));
    std::vector<float> g(n * p);
    allgather(comm, a.data(), g.data(), n, DataType::Float32);
    for (std::size_t i = 0; i < g.size(); ++i)
      ASSERT_EQ(g[i], float(i / n + 1));
    std::vector<float> rs(n), big(n * p, 1.0f);
    reduce_scatter(comm, big.data(), rs.data(), n, DataType::Float32, ReduceOp::Max);
    for (float v : rs)
      ASSERT_EQ(v, 1.0f);
    Request req = iallreduce(comm, a.data(), b.data(), n, DataType::Float32, ReduceOp::Sum);
    req.wait();
    for (float v : b)
      ASSERT_EQ(v, float(p * (p + 1) / 2));
  }
  // All-to-Allv: rank s sends s + d + 1 elements to rank d.
  VarLayout sl, rl;
  for (int q = 0; q < p; ++q) {
    sl.counts.push_back(me + q + 1);
    sl.displs.push_back(sl.capacity);
    sl.capacity += me + q + 1;
    rl.counts.push_back(q + me + 1);
    rl.displs.push_back(rl.capacity);
    rl.capacity += q + me + 1;
  }
  std::vector<std::int32_t> s(sl.capacity, me), r(rl.capacity, -1);
  alltoallv(comm, s.data(), sl, r.data(), rl, DataType::Int32);
  for (int q = 0; q < p; ++q)
    for (std::size_t i = 0; i < rl.counts[q]; ++i)
      ASSERT_EQ(r[rl.displs[q] + i], q);
}

TEST(Check, DifferentCountsRaiseMismatchOnEveryRank) {
  Communicator comm(MPI_COMM_WORLD, checked());
  if (comm.size() == 1) GTEST_SKIP() << "needs two ranks";
  const int last = comm.size() - 1;
  const std::size_t n = comm.rank() == last ? 999 : 1000;
  std::vector<float> a(1000, 1.0f), b(1000);
  expect_error([&] { allreduce(comm, a.data(), b.data(), n, DataType::Float32, ReduceOp::Sum); },
               ErrorCode::Mismatch,
               {"call #1: rank 0: allreduce float32 sum count=1000 algo=auto; rank " +
                    std::to_string(last) + ": allreduce float32 sum count=999 algo=auto",
                "differ in count"});
  expect_usable(comm);
}

TEST(Check, DifferentOperationsRaiseMismatch) {
  Communicator comm(MPI_COMM_WORLD, checked());
  if (comm.size() == 1) GTEST_SKIP() << "needs two ranks";
  std::vector<float> a(64, 1.0f), b(64 * comm.size());
  expect_error(
      [&] {
        if (comm.rank() == 1)
          allgather(comm, a.data(), b.data(), 64, DataType::Float32);
        else
          allreduce(comm, a.data(), b.data(), 64, DataType::Float32, ReduceOp::Sum);
      },
      ErrorCode::Mismatch,
      {"rank 0: allreduce float32 sum count=64", "rank 1: allgather float32 send_count=64",
       "different operations"});
  expect_usable(comm);
}

TEST(Check, DifferentDtypesAndOpsRaiseMismatch) {
  Communicator comm(MPI_COMM_WORLD, checked());
  if (comm.size() == 1) GTEST_SKIP() << "needs two ranks";
  std::vector<double> a(64, 1.0), b(64);
  const DataType t = comm.rank() == 1 ? DataType::Int64 : DataType::Float64;
  expect_error([&] { allreduce(comm, a.data(), b.data(), 64, t, ReduceOp::Sum); },
               ErrorCode::Mismatch, {"rank 1: allreduce int64 sum", "differ in dtype"});
  const ReduceOp op = comm.rank() == 1 ? ReduceOp::Max : ReduceOp::Sum;
  expect_error([&] { allreduce(comm, a.data(), b.data(), 64, DataType::Float64, op); },
               ErrorCode::Mismatch, {"call #2", "rank 1: allreduce float64 max", "differ in op"});
  expect_usable(comm);
}

TEST(Check, DifferentAlgorithmsRaiseMismatch) {
  Communicator comm(MPI_COMM_WORLD, checked());
  if (comm.size() == 1) GTEST_SKIP() << "needs two ranks";
  std::vector<float> a(64, 1.0f), b(64);
  CollectiveOptions o;
  o.algorithm = comm.rank() == 0 ? "ring" : "mpi";
  expect_error(
      [&] { allreduce(comm, a.data(), b.data(), 64, DataType::Float32, ReduceOp::Sum, o); },
      ErrorCode::Mismatch, {"algo=ring", "algo=mpi", "differ in algorithm"});
  expect_usable(comm);
}

TEST(Check, SkippedCallIsReported) {
  // Program order: allreduce(8), then alltoall(8). The last rank skips the allreduce: its first
  // call is the alltoall, compared with everyone else's allreduce.
  Communicator comm(MPI_COMM_WORLD, checked());
  if (comm.size() == 1) GTEST_SKIP() << "needs two ranks";
  const int p = comm.size(), last = p - 1;
  std::vector<float> a(8 * p, 1.0f), b(8 * p);
  expect_error(
      [&] {
        if (comm.rank() != last)
          allreduce(comm, a.data(), b.data(), 8, DataType::Float32, ReduceOp::Sum);
        alltoall(comm, a.data(), b.data(), 8, DataType::Float32);
      },
      ErrorCode::Mismatch,
      {"call #1", "rank " + std::to_string(last) + ": alltoall", "skipped or added a call"});
  expect_usable(comm);
}

TEST(Check, LocallyRejectedCallsDoNotCount) {
  // A call a rank rejects itself raises there before any communication (collectives.hpp) and is
  // not a call: the next good call still pairs with the other ranks' good call.
  Communicator comm(MPI_COMM_WORLD, checked());
  if (comm.size() == 1) GTEST_SKIP() << "needs two ranks";
  std::vector<float> a(64, 1.0f), b(64);
  if (comm.rank() == 1) {
    expect_error([&] { allreduce(comm, a.data(), nullptr, 64, DataType::Float32, ReduceOp::Sum); },
                 ErrorCode::InvalidArgument, {"recv is null"});
    CollectiveOptions o;
    o.algorithm = "no_such_algorithm";
    expect_error(
        [&] { allreduce(comm, a.data(), b.data(), 64, DataType::Float32, ReduceOp::Sum, o); },
        ErrorCode::InvalidArgument, {"no_such_algorithm"});
  }
  expect_usable(comm);
}

TEST(Check, AllToAllvCountsThatDoNotPairUpAreNamed) {
  Communicator comm(MPI_COMM_WORLD, checked());
  if (comm.size() == 1) GTEST_SKIP() << "needs two ranks";
  const int p = comm.size();
  VarLayout sl, rl;
  for (int q = 0; q < p; ++q) {
    sl.counts.push_back(4);
    sl.displs.push_back(4 * q);
    rl.counts.push_back(4);
    rl.displs.push_back(4 * q);
  }
  sl.capacity = rl.capacity = 4 * p;
  if (comm.rank() == 1) sl.counts[0] = 3;  // rank 0 expects 4 from rank 1
  std::vector<float> s(4 * p, 1.0f), r(4 * p);
  expect_error([&] { alltoallv(comm, s.data(), sl, r.data(), rl, DataType::Float32); },
               ErrorCode::Mismatch, {"rank 1 sends 3 elements to rank 0, which expects 4 from it"});
  expect_usable(comm);
}

TEST(Check, NonBlockingCallsAreCheckedWhenPosted) {
  Communicator comm(MPI_COMM_WORLD, checked());
  if (comm.size() == 1) GTEST_SKIP() << "needs two ranks";
  std::vector<float> a(128, 1.0f), b(128);
  const std::size_t n = comm.rank() == 0 ? 128 : 127;
  expect_error(
      [&] { iallreduce(comm, a.data(), b.data(), n, DataType::Float32, ReduceOp::Sum).wait(); },
      ErrorCode::Mismatch, {"count=128", "count=127"});
  expect_usable(comm);
}

TEST(Check, OperatorModesAreCompared) {
  Communicator comm(MPI_COMM_WORLD, checked());
  if (comm.size() == 1) GTEST_SKIP() << "needs two ranks";
  RuntimeConfig rc = RuntimeConfig::from_env();
  rc.num_cus = 2;
  rc.wg_slots_per_cu = 2;
  Device dev(rc);
  GemvAllReduce op(comm, dev, 64, 8);
  std::vector<float> w(64 * 8, 1.0f), x(8, 1.0f), y(64);
  op.run(w.data(), x.data(), y.data(), Mode::Fused);  // matching: passes
  EXPECT_EQ(y[0], 8.0f * comm.size());
  const Mode mode = comm.rank() == 1 ? Mode::Sequential : Mode::Fused;
  expect_error([&] { op.run(w.data(), x.data(), y.data(), mode); }, ErrorCode::Mismatch,
               {"GemvAllReduce m=64", "mode=fused", "mode=sequential", "differ in mode"});
  expect_usable(comm);
}

TEST(Check, EnvironmentOrConfigTurnsItOn) {
  // check = 0 on every rank: a mismatch is not caught before running (so don't run one).
  CommConfig off;
  off.check = 0;
  Communicator comm(MPI_COMM_WORLD, off);
  expect_usable(comm);
  // On when any rank asks for it.
  CommConfig some;
  some.check = world_rank() == 0 ? 1 : 0;
  Communicator mixed(MPI_COMM_WORLD, some);
  if (mixed.size() == 1) return;
  std::vector<float> a(16, 1.0f), b(16);
  const std::size_t n = mixed.rank() == 0 ? 16 : 15;
  expect_error([&] { allreduce(mixed, a.data(), b.data(), n, DataType::Float32, ReduceOp::Sum); },
               ErrorCode::Mismatch, {"count=16", "count=15"});
}

}  // namespace
}  // namespace tilecomm
