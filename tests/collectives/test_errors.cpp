// Bad arguments are rejected before any communication with an Error naming the argument and the
// value; and the Communicator's node/local layout is consistent on every rank (real and pretend
// nodes), and its barrier waits for everyone.
#include <chrono>
#include <climits>
#include <cstdint>
#include <thread>

#include "coll_test_util.hpp"

namespace tct {
namespace {

using tilecomm::ErrorCode;

// Runs `call`, expects an Error with `code` whose message contains every string of `needles`.
template <class Call>
void expect_error(Call&& call, ErrorCode code, std::vector<std::string> needles, const char* what) {
  try {
    call();
    ADD_FAILURE() << what << ": no error";
  } catch (const tilecomm::Error& e) {
    EXPECT_EQ(e.code(), code) << what << ": " << e.what();
    for (const auto& n : needles)
      EXPECT_NE(e.message().find(n), std::string::npos)
          << what << ": message does not mention '" << n << "': " << e.message();
  }
}

TEST(BadInput, BroadcastArguments) {
  std::vector<float> a(64);
  auto& c = comm();
  const DataType f = DataType::Float32;
  for (int root : {-1, world_size(), INT_MAX})
    expect_error([&] { tilecomm::broadcast(c, a.data(), 8, f, root); }, ErrorCode::InvalidArgument,
                 {"broadcast", "root", std::to_string(root)}, "root out of range");
  expect_error([&] { (void)tilecomm::ibroadcast(c, nullptr, 8, f, 0); }, ErrorCode::InvalidArgument,
               {"broadcast", "null"}, "null buffer");
  expect_error([&] { tilecomm::broadcast(c, a.data(), SIZE_MAX / 2, f, 0); },
               ErrorCode::InvalidArgument, {"count"}, "count*elem overflow");
  tilecomm::CollectiveOptions unknown;
  unknown.algorithm = "ring";
  expect_error([&] { tilecomm::broadcast(c, a.data(), 8, f, 0, unknown); },
               ErrorCode::InvalidArgument, {"ring", "mpi", "shm", "hierarchical"},
               "unknown algorithm");
  tilecomm::barrier(c);  // nothing was communicated above: the ranks are still in step
}

TEST(BadInput, AllReduceArguments) {
  std::vector<float> a(64), b(64);
  auto& c = comm();
  const DataType f = DataType::Float32;
  const std::size_t huge = SIZE_MAX / 2;
  expect_error([&] { tilecomm::allreduce(c, a.data(), b.data(), huge, f, ReduceOp::Sum); },
               ErrorCode::InvalidArgument, {"count", std::to_string(huge)}, "count*elem overflow");
  expect_error(
      [&] {
        tilecomm::allreduce(c, a.data(), b.data(), static_cast<std::size_t>(-5), f, ReduceOp::Sum);
      },
      ErrorCode::InvalidArgument, {"count", "-5"}, "negative count");
  expect_error([&] { tilecomm::allreduce(c, nullptr, b.data(), 4, f, ReduceOp::Sum); },
               ErrorCode::InvalidArgument, {"send", "null"}, "null send");
  expect_error([&] { tilecomm::allreduce(c, a.data(), nullptr, 4, f, ReduceOp::Sum); },
               ErrorCode::InvalidArgument, {"recv", "null"}, "null recv");
  expect_error([&] { tilecomm::allreduce(c, a.data(), a.data() + 1, 8, f, ReduceOp::Sum); },
               ErrorCode::InvalidArgument, {"overlap"}, "overlap, not in place");
  expect_error([&] { (void)tilecomm::iallreduce(c, a.data(), a.data() + 3, 8, f, ReduceOp::Max); },
               ErrorCode::InvalidArgument, {"overlap"}, "overlap, non-blocking");
  tilecomm::CollectiveOptions mpi;
  mpi.algorithm = "mpi";
  // `mpi` reduces bfloat16 (widened to float32, rounded once), so forcing it is no longer an error.
  EXPECT_NO_THROW(
      tilecomm::allreduce(c, a.data(), b.data(), 8, DataType::BFloat16, ReduceOp::Sum, mpi));
  tilecomm::CollectiveOptions unknown;
  unknown.algorithm = "no_such_algo";
  std::vector<std::string> names = tilecomm::algorithm_names(Collective::AllReduce);
  names.push_back("no_such_algo");
  expect_error([&] { tilecomm::allreduce(c, a.data(), b.data(), 8, f, ReduceOp::Sum, unknown); },
               ErrorCode::InvalidArgument, names, "unknown algorithm");
  // Null buffers with nothing to access are fine.
  EXPECT_NO_THROW(tilecomm::allreduce(c, nullptr, nullptr, 0, f, ReduceOp::Sum));
}

// A forced algorithm that cannot run the call is NotSupported, naming itself, the source of the
// choice and a reason; here shared-memory algorithms on pretend nodes of one rank each.
TEST(BadInput, ForcedAlgorithmThatDeclines) {
  if (world_size() < 2) GTEST_SKIP() << "one rank is always one node";
  tilecomm::CommConfig cfg;
  cfg.node_size = 1;
  tilecomm::Communicator c(MPI_COMM_WORLD, cfg);
  std::vector<float> a(64, 1.0f), b(64);
  int declined = 0;
  for (const std::string& name : tilecomm::algorithm_names(Collective::AllReduce)) {
    tilecomm::CollectiveOptions o;
    o.algorithm = name;
    try {
      tilecomm::allreduce(c, a.data(), b.data(), 64, DataType::Float32, ReduceOp::Sum, o);
      EXPECT_EQ(b[63], static_cast<float>(world_size())) << name;
    } catch (const tilecomm::Error& e) {
      ++declined;
      EXPECT_EQ(e.code(), ErrorCode::NotSupported) << e.what();
      EXPECT_NE(e.message().find("'" + name + "'"), std::string::npos) << e.message();
      EXPECT_NE(e.message().find("CollectiveOptions.algorithm"), std::string::npos) << e.message();
      EXPECT_GT(e.message().size(), e.message().rfind(": ") + 2) << "no reason: " << e.message();
    }
  }
  EXPECT_GT(declined, 0) << "no AllReduce algorithm needs a single node any more; pick another "
                            "declining case for this test";
}

TEST(BadInput, OtherCollectives) {
  auto& c = comm();
  const int p = world_size();
  const DataType f = DataType::Float32;
  std::vector<float> a(64 * p), b(64 * p);
  expect_error([&] { tilecomm::reduce_scatter(c, a.data(), a.data() + 1, 4, f, ReduceOp::Sum); },
               ErrorCode::InvalidArgument, {"overlap"}, "reduce_scatter overlap");
  expect_error(
      [&] { tilecomm::reduce_scatter(c, a.data(), b.data(), SIZE_MAX / 2, f, ReduceOp::Sum); },
      ErrorCode::InvalidArgument, {"recv_count"}, "reduce_scatter overflow");
  expect_error([&] { tilecomm::allgather(c, nullptr, b.data(), 4, f); }, ErrorCode::InvalidArgument,
               {"send", "null"}, "allgather null send");
  expect_error([&] { tilecomm::allgather(c, b.data() + 1, b.data(), 4, f); },
               ErrorCode::InvalidArgument, {"overlap"}, "allgather overlap");
  expect_error([&] { tilecomm::alltoall(c, a.data(), a.data() + 2, 4, f); },
               ErrorCode::InvalidArgument, {"overlap"}, "alltoall overlap");
  expect_error([&] { tilecomm::alltoall(c, a.data(), b.data(), static_cast<std::size_t>(-5), f); },
               ErrorCode::InvalidArgument, {"count", "-5"}, "alltoall negative count");
  tilecomm::CollectiveOptions unknown;
  unknown.algorithm = "no_such_algo";
  for (Collective coll : {Collective::ReduceScatter, Collective::AllGather, Collective::AllToAll}) {
    std::vector<std::string> names = tilecomm::algorithm_names(coll);
    names.push_back("no_such_algo");
    expect_error(
        [&] {
          if (coll == Collective::ReduceScatter)
            tilecomm::reduce_scatter(c, a.data(), b.data(), 4, f, ReduceOp::Sum, unknown);
          else if (coll == Collective::AllGather)
            tilecomm::allgather(c, a.data(), b.data(), 4, f, unknown);
          else
            tilecomm::alltoall(c, a.data(), b.data(), 4, f, unknown);
        },
        ErrorCode::InvalidArgument, names, "unknown algorithm");
  }
}

TEST(BadInput, AllToAllvLayouts) {
  auto& c = comm();
  const int p = world_size();
  std::vector<float> a(16 * p), b(16 * p);
  tilecomm::VarLayout good;
  good.capacity = 16 * p;
  for (int q = 0; q < p; ++q)
    good.counts.push_back(2), good.displs.push_back(16 * q);
  auto call = [&](const tilecomm::VarLayout& s, const tilecomm::VarLayout& r) {
    tilecomm::alltoallv(c, a.data(), s, b.data(), r, DataType::Float32);
  };
  tilecomm::VarLayout past_count = good;
  past_count.counts[0] = good.capacity + 1;
  expect_error([&] { call(past_count, good); }, ErrorCode::InvalidArgument,
               {"send_layout", "peer 0", std::to_string(good.capacity + 1)}, "count past buffer");
  tilecomm::VarLayout past_displ = good;
  past_displ.displs[p - 1] = good.capacity - 1;
  expect_error([&] { call(good, past_displ); }, ErrorCode::InvalidArgument,
               {"recv_layout", "peer " + std::to_string(p - 1), std::to_string(good.capacity - 1)},
               "displacement past buffer");
  tilecomm::VarLayout huge_displ = good;
  huge_displ.displs[0] = SIZE_MAX - 1;
  expect_error([&] { call(huge_displ, good); }, ErrorCode::InvalidArgument,
               {"send_layout", "peer 0"}, "displacement near SIZE_MAX");
  tilecomm::VarLayout too_many = good;
  too_many.counts.push_back(1);
  expect_error([&] { call(too_many, good); }, ErrorCode::InvalidArgument,
               {"send_layout", std::to_string(p + 1)}, "wrong number of counts");
  tilecomm::VarLayout too_few = good;
  too_few.displs.pop_back();
  expect_error([&] { call(good, too_few); }, ErrorCode::InvalidArgument,
               {"recv_layout", std::to_string(p - 1)}, "wrong number of displs");
  EXPECT_NO_THROW(call(good, good));
}

// Only the last rank makes bad calls: a call that communicated before rejecting would hang (and
// time out) here. Then the communicator still works for everyone.
TEST(BadInput, RejectedBeforeAnyCommunication) {
  auto& c = comm();
  std::vector<float> a(16, 1.0f), b(16);
  if (world_rank() == world_size() - 1) {
    EXPECT_THROW(
        tilecomm::allreduce(c, a.data(), a.data() + 1, 8, DataType::Float32, ReduceOp::Sum),
        tilecomm::Error);
    EXPECT_THROW(tilecomm::alltoall(c, nullptr, b.data(), 1, DataType::Float32), tilecomm::Error);
    tilecomm::CollectiveOptions unknown;
    unknown.algorithm = "no_such_algo";
    EXPECT_THROW((void)tilecomm::iallgather(c, a.data(), b.data(), 1, DataType::Float32, unknown),
                 tilecomm::Error);
  }
  tilecomm::allreduce(c, a.data(), b.data(), 16, DataType::Float32, ReduceOp::Sum);
  for (float x : b)
    EXPECT_EQ(x, static_cast<float>(world_size()));
}

// (node, local_rank, num_nodes, local_size) gathered from every rank must describe the same
// partition everywhere; pretend nodes of k ranks are consecutive blocks.
void check_layout(tilecomm::Communicator& c, int pretend) {
  const int p = world_size(), r = world_rank();
  ASSERT_EQ(c.rank(), r);
  ASSERT_EQ(c.size(), p);
  int mine[4] = {c.node(), c.local_rank(), c.num_nodes(), c.local_size()};
  std::vector<int> all(4 * p);
  MPI_Allgather(mine, 4, MPI_INT, all.data(), 4, MPI_INT, MPI_COMM_WORLD);
  for (int q = 0; q < p; ++q) {
    const int node = all[4 * q], local = all[4 * q + 1];
    EXPECT_EQ(c.node_of(q), node) << "rank " << q;
    EXPECT_EQ(all[4 * q + 2], c.num_nodes()) << "rank " << q;
    EXPECT_GE(node, 0);
    EXPECT_LT(node, c.num_nodes());
    EXPECT_GE(local, 0);
    EXPECT_LT(local, all[4 * q + 3]);
    if (pretend > 0) {
      EXPECT_EQ(node, q / pretend) << "pretend node of rank " << q;
      EXPECT_EQ(local, q % pretend) << "pretend local rank of rank " << q;
    }
    for (int o = 0; o < q; ++o)
      EXPECT_FALSE(all[4 * o] == node && all[4 * o + 1] == local)
          << "ranks " << o << " and " << q << " share node " << node << " local " << local;
  }
  int on_my_node = 0;
  for (int q = 0; q < p; ++q)
    on_my_node += all[4 * q] == c.node();
  EXPECT_EQ(on_my_node, c.local_size());
  if (pretend > 0) {
    EXPECT_EQ(c.num_nodes(), (p + pretend - 1) / pretend);
  } else if (pretend == 0) {
    EXPECT_EQ(c.num_nodes(), 1) << "one host";
  }
}

TEST(Communicator, NodeLayoutRealAndPretend) {
  check_layout(comm(), -1);
  for (int pretend : {0, 1, 2, 3}) {
    SCOPED_TRACE("node_size=" + std::to_string(pretend));
    tilecomm::CommConfig cfg;
    cfg.node_size = pretend;
    tilecomm::Communicator c(MPI_COMM_WORLD, cfg);
    check_layout(c, pretend);
    // And it can run collectives.
    std::vector<std::int32_t> x(5, world_rank()), y(5);
    tilecomm::allreduce(c, x.data(), y.data(), 5, DataType::Int32, ReduceOp::Sum);
    EXPECT_EQ(y[4], world_size() * (world_size() - 1) / 2);
  }
}

// Ranks arrive late by rank*20 ms; nobody may leave before the last one arrived.
TEST(Communicator, BarrierWaitsForEveryone) {
  for (int pretend : {-1, 1, 2}) {
    tilecomm::CommConfig cfg;
    cfg.node_size = pretend;
    tilecomm::Communicator c(MPI_COMM_WORLD, cfg);
    MPI_Barrier(MPI_COMM_WORLD);
    std::this_thread::sleep_for(std::chrono::milliseconds(20 * world_rank()));
    auto now_us = [] {
      return static_cast<long long>(std::chrono::duration_cast<std::chrono::microseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
    };
    long long t[2];
    t[0] = now_us();
    c.barrier();
    t[1] = now_us();
    long long last_in = 0, first_out = 0;
    MPI_Allreduce(&t[0], &last_in, 1, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(&t[1], &first_out, 1, MPI_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
    EXPECT_GE(first_out, last_in) << "node_size=" << pretend;
    c.barrier();
  }
}

}  // namespace
}  // namespace tct
