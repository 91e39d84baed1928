// EmbeddingAllToAll: every mode equals a reference each rank computes for its own slice from the
// (deterministically generated) tables of every rank, bitwise; uneven batches, empty tables and
// bags, weights, both poolings, stragglers; bad indices and offsets name the table and bag.
#include "ops_test_util.hpp"

namespace tilecomm::test {
namespace {

struct Table {
  std::size_t rows;
  std::vector<float> w;
  std::vector<std::int64_t> idx, off;
  std::vector<float> weights;
};

// Global table gt, the same on every rank.
Table make_table(std::size_t gt, std::size_t dim, std::size_t batch, int call) {
  Table t;
  t.rows = 20 + gt * 13;
  t.w.resize(t.rows * dim);
  for (std::size_t i = 0; i < t.w.size(); ++i)
    t.w[i] = small_int(i * 3 + gt + 100 * call);
  std::mt19937 g(static_cast<unsigned>(gt * 1000 + call));
  t.off.push_back(0);
  for (std::size_t b = 0; b < batch; ++b) {
    const int n = static_cast<int>(g() % 5);  // empty bags too
    for (int j = 0; j < n; ++j) {
      t.idx.push_back(static_cast<std::int64_t>(g() % t.rows));
      if (gt % 2) t.weights.push_back(small_int(g(), 1));
    }
    t.off.push_back(static_cast<std::int64_t>(t.idx.size()));
  }
  return t;
}

std::size_t tables_of(int r) {
  return static_cast<std::size_t>(r % 3);
}  // 0, 1 or 2 tables

void check(Communicator& comm, Device& dev, std::size_t dim, std::size_t batch, Pooling pooling,
           int calls, std::size_t tile = 0) {
  const int p = comm.size(), me = comm.rank();
  std::size_t first = 0, total = 0;
  for (int r = 0; r < p; ++r) {
    if (r < me) first += tables_of(r);
    total += tables_of(r);
  }
  std::vector<std::size_t> rows;
  for (std::size_t t = 0; t < tables_of(me); ++t)
    rows.push_back(20 + (first + t) * 13);
  OpOptions opt;
  opt.tile = tile;
  EmbeddingAllToAll op(comm, dev, rows, dim, batch, pooling, opt);
  ASSERT_EQ(op.num_tables(), total);
  ASSERT_EQ(op.first_table(), first);
  Straggler straggler(dev, 99u + me);
  for (int call = 0; call < calls; ++call) {
    std::vector<Table> all;
    for (std::size_t gt = 0; gt < total; ++gt)
      all.push_back(make_table(gt, dim, batch, call));
    std::vector<const float*> tables;
    std::vector<EmbeddingBags> bags;
    for (std::size_t t = 0; t < tables_of(me); ++t) {
      const Table& T = all[first + t];
      tables.push_back(T.w.data());
      bags.push_back({T.idx, T.off, T.weights});
    }
    const std::size_t lb = op.local_batch(), b0 = op.batch_begin();
    std::vector<float> ref(lb * total * dim);
    for (std::size_t b = 0; b < lb; ++b)
      for (std::size_t gt = 0; gt < total; ++gt) {
        const Table& T = all[gt];
        float* o = &ref[(b * total + gt) * dim];
        const std::size_t g = b0 + b;
        for (auto j = T.off[g]; j < T.off[g + 1]; ++j)
          for (std::size_t d = 0; d < dim; ++d)
            o[d] += (T.weights.empty() ? 1.0f : T.weights[j]) * T.w[T.idx[j] * dim + d];
        if (pooling == Pooling::Mean && T.off[g + 1] > T.off[g])
          for (std::size_t d = 0; d < dim; ++d)
            o[d] /= static_cast<float>(T.off[g + 1] - T.off[g]);
      }
    for (Mode mode : kModes) {
      std::vector<float> out(ref.size(), -777.0f);
      straggler.before_call();
      op.run(tables, bags, out.data(), mode);
      straggler.after_call();
      int wrong = 0;
      for (std::size_t i = 0; i < out.size(); ++i)
        wrong += out[i] != ref[i];
      EXPECT_EQ(wrong, 0) << "mode " << to_string(mode) << " batch " << batch << " dim " << dim;
    }
  }
}

TEST(EmbeddingAllToAll, MatchesReferenceInEveryMode) {
  Communicator comm(MPI_COMM_WORLD);
  Device dev(test_device_config());
  check(comm, dev, 8, 37, Pooling::Sum, 2);
  check(comm, dev, 5, 101, Pooling::Mean, 2);
  check(comm, dev, 16, 3, Pooling::Sum, 1);      // fewer bags than ranks at np 4
  check(comm, dev, 4, 250, Pooling::Sum, 1, 7);  // explicit tile
}

TEST(EmbeddingAllToAll, EmptyBatch) {
  Communicator comm(MPI_COMM_WORLD);
  Device dev(test_device_config());
  check(comm, dev, 4, 0, Pooling::Sum, 1);
}

TEST(EmbeddingAllToAll, ManyCalls) {
  Communicator comm(MPI_COMM_WORLD);
  Device dev(test_device_config());
  check(comm, dev, 6, 64, Pooling::Mean, 8);
}

// Verify mode (forced on, whatever TILECOMM_CHECK says) agrees on bad arguments per call; without
// it the peers of the rank that raised end in Timeout (test_alltoall_skew.cpp).
TEST(EmbeddingAllToAll, BadInputIsReportedOnEveryRank) {
  CommConfig verified;
  verified.check = 1;
  Communicator comm(MPI_COMM_WORLD, verified);
  Device dev(test_device_config());
  const int me = comm.rank();
  std::vector<float> table(10 * 4, 1.0f);
  EmbeddingAllToAll op(comm, dev, {10}, 4, 3, Pooling::Sum);
  std::vector<float> out(op.local_batch() * op.num_tables() * 4);
  std::vector<const float*> tables = {table.data()};
  auto expect_error = [&](std::vector<std::int64_t> idx, std::vector<std::int64_t> off,
                          const char* text) {
    // Rank 0 passes the bad bags; every other rank passes good ones and must still get an error.
    std::vector<std::int64_t> good_idx = {1, 2}, good_off = {0, 1, 1, 2};
    EmbeddingBags bags{me == 0 ? idx : good_idx, me == 0 ? off : good_off, {}};
    try {
      op.run(tables, {&bags, 1}, out.data(), Mode::Fused);
      FAIL() << "no error for " << text;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
      const std::string what = e.what();
      if (me == 0)
        EXPECT_NE(what.find(text), std::string::npos) << what;
      else
        EXPECT_NE(what.find("rank 0"), std::string::npos) << what;
    }
  };
  expect_error({1, 10}, {0, 1, 1, 2}, "table 0 bag 2: index 10");
  expect_error({1, -1}, {0, 1, 1, 2}, "index -1");
  expect_error({1, 2}, {0, 2, 1, 2}, "offsets decrease");
  expect_error({1, 2}, {1, 1, 1, 2}, "offsets[0] = 1");
  expect_error({1, 2}, {0, 1, 2}, "offsets has 3 entries");
  // And the context still works afterwards.
  std::vector<std::int64_t> idx = {1, 2}, off = {0, 1, 1, 2};
  EmbeddingBags bags{idx, off, {}};
  op.run(tables, {&bags, 1}, out.data(), Mode::Fused);
}

TEST(EmbeddingAllToAll, MismatchedDimRaisesOnEveryRank) {
  Communicator comm(MPI_COMM_WORLD);
  Device dev(test_device_config());
  if (comm.size() == 1) GTEST_SKIP() << "needs two ranks";
  EXPECT_THROW(EmbeddingAllToAll(comm, dev, {4}, comm.rank() == 0 ? 8 : 16, 10, Pooling::Sum),
               Error);
}

}  // namespace
}  // namespace tilecomm::test
