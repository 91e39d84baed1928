// EmbeddingAllToAll: every mode equals a reference each rank computes for its own slice from the
// (deterministically generated) tables of every rank, bitwise; uneven batches, empty tables and
// bags, weights, both poolings, stragglers; bad indices and offsets name the table and bag. Every
// call also runs with the tables in bfloat16 (small integers: exact, so bitwise the same) in
// every mode, and fused into output() (zero-copy) with either table type.
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
    std::vector<std::vector<bfloat16>> w16(tables_of(me));
    std::vector<const bfloat16*> tables16;
    std::vector<EmbeddingBags> bags;
    for (std::size_t t = 0; t < tables_of(me); ++t) {
      const Table& T = all[first + t];
      tables.push_back(T.w.data());
      for (float v : T.w) {
        w16[t].push_back(bfloat16(v));
        EXPECT_EQ(static_cast<float>(w16[t].back()), v);  // small integers: exact in bfloat16
      }
      tables16.push_back(w16[t].data());
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
    // Modes x {float32, bfloat16} into caller-owned memory, then fused into output().
    for (int variant = 0; variant < 8; ++variant) {
      const bool bf16 = variant % 2 == 1, zero_copy = variant >= 6;
      const Mode mode = zero_copy ? Mode::Fused : kModes[variant / 2];
      std::vector<float> own(ref.size(), -777.0f);
      std::span<float> out = own;
      if (zero_copy) {
        out = op.output();
        ASSERT_EQ(out.size(), ref.size());
      }
      straggler.before_call();
      if (bf16)
        op.run(tables16, bags, out.data(), mode);
      else
        op.run(tables, bags, out.data(), mode);
      straggler.after_call();
      int wrong = 0;
      for (std::size_t i = 0; i < out.size(); ++i)
        wrong += out[i] != ref[i];
      EXPECT_EQ(wrong, 0) << "mode " << to_string(mode) << (bf16 ? " bfloat16" : " float32")
                          << (zero_copy ? " into output()" : "") << " batch " << batch << " dim "
                          << dim << " call " << call;
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

// output() is only for Mode::Fused, and only the current call's view: every other use is an
// InvalidArgument before any communication (every rank passes the same kind of bad out here, so
// no rank waits for another), and the context still works afterwards.
TEST(EmbeddingAllToAll, OutputViewMisuseIsRejected) {
  Communicator comm(MPI_COMM_WORLD);
  Device dev(test_device_config());
  const std::size_t dim = 4, batch = 2 * static_cast<std::size_t>(comm.size());  // bags everywhere
  std::vector<float> table(10 * dim);
  for (std::size_t i = 0; i < table.size(); ++i)
    table[i] = static_cast<float>(i / dim);  // row r holds r
  EmbeddingAllToAll op(comm, dev, {10}, dim, batch, Pooling::Sum);
  const auto expected = static_cast<float>(op.batch_begin() % 10);  // bag 0 of any table
  std::vector<const float*> tables = {table.data()};
  std::vector<std::int64_t> idx, off = {0};
  for (std::size_t b = 0; b < batch; ++b) {
    idx.push_back(static_cast<std::int64_t>(b % 10));
    off.push_back(static_cast<std::int64_t>(idx.size()));
  }
  EmbeddingBags bags{idx, off, {}};
  auto expect_invalid = [&](float* out, Mode mode, const char* text) {
    try {
      op.run(tables, {&bags, 1}, out, mode);
      FAIL() << "no error for " << text;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::InvalidArgument) << e.what();
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
  };
  expect_invalid(op.output().data(), Mode::Sequential, "only Mode::Fused");
  expect_invalid(op.output().data(), Mode::Shaped, "only Mode::Fused");
  expect_invalid(op.output().data(), Mode::Auto, "only Mode::Fused");
  expect_invalid(op.output().data() + 1, Mode::Fused, "not output() of this call");
  std::span<float> first = op.output();
  op.run(tables, {&bags, 1}, first.data(), Mode::Fused);
  EXPECT_EQ(first[0], expected);
  EXPECT_NE(op.output().data(), first.data());  // the views alternate
  expect_invalid(first.data(), Mode::Fused, "not output() of this call");
  std::vector<float> own(first.size());
  op.run(tables, {&bags, 1}, own.data(), Mode::Fused);
  EXPECT_EQ(own[0], expected);
  std::span<float> next = op.output();
  EXPECT_EQ(next.data(), first.data());  // two fused calls later: the same half again
  op.run(tables, {&bags, 1}, next.data(), Mode::Fused);
  EXPECT_EQ(next[0], expected);
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
