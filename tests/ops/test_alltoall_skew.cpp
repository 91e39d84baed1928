// EmbeddingAllToAll and GemmAllToAll without per-call synchronisation (issue 12): verify mode off
// (CommConfig::check = 0), so nothing orders a rank's calls against its peers' but the fused
// exchange itself (epoch-parity inboxes, done flags, per-call headers).
//  - Many back-to-back fused calls under random per-rank stragglers, with routing that changes
//    every call (zero rows between some pairs, zero-expert and zero-table ranks), on one node and
//    on pretend nodes of 1 and 2 ranks: every output exactly equals a reference.
//  - A rank that exchanges nothing with a late peer runs ahead of it, by at most two calls.
//  - A routing mismatch raises Error(Mismatch) on the two ranks whose counts disagree; no rank
//    waits longer than the communicator's deadline.
//  - A rank that rejects its own arguments raises at once; its peers end in Error(Timeout).
//  - A failed call's stale messages never reach the next communicator (repeated under skew).
// (Verify mode still reports mismatches and bad arguments on every rank: test_gemm_alltoall.cpp,
// test_embedding_alltoall.cpp.)
#include <chrono>
#include <random>
#include <span>
#include <thread>

#include "ops_test_util.hpp"

namespace tilecomm::test {
namespace {

CommConfig unverified(int node_size, double timeout_s = 60.0) {
  CommConfig c;
  c.node_size = node_size;
  c.timeout_s = timeout_s;
  c.check = 0;
  return c;
}

// Node sizes to run: one node, pretend nodes of one rank (every peer over MPI), and of two.
std::vector<int> node_sizes(int p) {
  std::vector<int> sizes = {0, 1};
  if (p > 2) sizes.push_back(2);
  return sizes;
}

std::uint64_t mix(std::uint64_t a, std::uint64_t b, std::uint64_t c) {
  std::uint64_t h = a * 0x9E3779B97F4A7C15ull ^ (b + 0x632BE59BD9B4E019ull) * 0xC2B2AE3D27D4EB4Full;
  h ^= (c + 1) * 0x165667B19E3779F9ull;
  h ^= h >> 29;
  h *= 0xBF58476D1CE4E5B9ull;
  return h ^ (h >> 32);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::size_t gemm_experts_of(int r) {
  return static_cast<std::size_t>((r + 1) % 3);  // 1, 2, 0, 1: a rank without experts at np >= 3
}

// Back-to-back fused GemmAllToAll calls; the counts change every call and are 0 for whole pairs
// (source, owner) in some calls. Every output must equal the reference exactly. `layer`: every
// other call is a run_layer call (dispatch too: its input halves are reused under the same skew).
// `zero_copy`: about two calls in three run into output() (each rank chooses on its own, so owners
// see zero-copy and copying sources in one call), read 0-3 ms late.
void gemm_skewed_calls(Communicator& comm, Device& dev, int calls, bool layer = false,
                       bool zero_copy = false) {
  const int p = comm.size(), me = comm.rank();
  const MoeExperts ex(p, gemm_experts_of);
  std::vector<int> owner;
  for (int r = 0; r < p; ++r)
    owner.insert(owner.end(), ex.local(r), r);
  const std::size_t k = 5, n = 12;
  OpOptions opt;
  opt.tile = 4;  // several row tiles per block
  GemmAllToAll op(comm, dev, gemm_experts_of(me), k, n, 40 * p, 40 * p, opt);
  auto W = [](std::size_t g, std::size_t i, std::size_t j) {
    return small_int(g * 5 + i * 3 + j * 11);
  };
  const auto w = ex.weights(me, k, n, W);
  const auto wp = pointers(w);
  Straggler straggler(dev, 1234u + 17u * me);
  std::mt19937 rng(99u + 7u * me);
  std::uniform_int_distribution<int> late(0, 3000);  // microseconds before reading output()
  for (int call = 0; call < calls; ++call) {
    auto cnt = [&](int s, std::size_t g) -> std::size_t {
      if (mix(s, owner[g], call) % 3 == 0) return 0;  // the pair exchanges nothing this call
      const std::uint64_t h = mix(s, g, call + 1000);
      return h % 4 == 0 ? 0 : static_cast<std::size_t>(h % 11);
    };
    auto X = [&](int s, std::size_t g, std::size_t i, std::size_t kk) {
      return small_int(s + g * 3 + i * 7 + kk * 13 + call * 17);
    };
    const MoeCall c = make_moe_call(ex, p, me, k, n, cnt, X, W);
    const auto& [recv, send, x, ref, tokens] = c;
    std::vector<float> own(ref.size(), -555.0f);
    const bool view = zero_copy && mix(me, call, 7) % 3 != 0;
    float* y = view ? op.output().data() : own.data();
    straggler.before_call(call % 4 == 0 ? 4000 : 1500);
    if (layer && call % 2 == 0)
      op.run_layer(wp, tokens.data(), recv, send, y, Mode::Fused);
    else
      op.run(wp, x.data(), recv, send, y, Mode::Fused);
    straggler.after_call();
    if (view) std::this_thread::sleep_for(std::chrono::microseconds(late(rng)));
    int wrong = 0;
    for (std::size_t i = 0; i < ref.size(); ++i)
      wrong += y[i] != ref[i];
    EXPECT_EQ(wrong, 0) << "call " << call << " of " << calls << ", " << ref.size() << " values"
                        << (view ? " into output()" : "");
  }
}

TEST(AllToAllSkew, GemmBackToBackWithChangingRouting) {
  for (int ns : node_sizes(test::world_size())) {
    SCOPED_TRACE("node_size " + std::to_string(ns));
    Communicator comm(MPI_COMM_WORLD, unverified(ns));
    Device dev(test_device_config());
    gemm_skewed_calls(comm, dev, 40);
  }
}

// The same into output() (zero-copy, chosen per rank and call), run() and run_layer alternating.
TEST(AllToAllSkew, GemmBackToBackZeroCopy) {
  for (int ns : node_sizes(test::world_size())) {
    SCOPED_TRACE("node_size " + std::to_string(ns));
    Communicator comm(MPI_COMM_WORLD, unverified(ns));
    Device dev(test_device_config());
    gemm_skewed_calls(comm, dev, 40, true, true);
  }
}

TEST(AllToAllSkew, GemmLayerBackToBackWithChangingRouting) {
  for (int ns : node_sizes(test::world_size())) {
    SCOPED_TRACE("node_size " + std::to_string(ns));
    Communicator comm(MPI_COMM_WORLD, unverified(ns));
    Device dev(test_device_config());
    gemm_skewed_calls(comm, dev, 40, true);
  }
}

// Back-to-back fused EmbeddingAllToAll calls; the tables and bags change every call. Rank r owns
// r % 3 tables (rank 0 none, so it only receives) and batches smaller than the ranks leave some
// ranks without bags (they only send). With `zero_copy` every call runs into output() and the
// rank reads it only after a random delay (a late reader: a peer that stored a later call into the
// view before this rank's next call began would show up as wrong values).
void embedding_skewed_calls(Communicator& comm, Device& dev, std::size_t batch, int calls,
                            bool zero_copy = false) {
  const int p = comm.size(), me = comm.rank();
  const std::size_t dim = 6;
  auto tables_of = [](int r) { return static_cast<std::size_t>(r % 3); };
  std::size_t first = 0, total = 0;
  for (int r = 0; r < p; ++r) {
    if (r < me) first += tables_of(r);
    total += tables_of(r);
  }
  const std::size_t rows = 9;
  OpOptions opt;
  opt.tile = 2;
  EmbeddingAllToAll op(comm, dev, std::vector<std::size_t>(tables_of(me), rows), dim, batch,
                       Pooling::Sum, opt);
  Straggler straggler(dev, 4321u + 31u * me);
  std::mt19937 rng(777u + 13u * me);
  std::uniform_int_distribution<int> late(0, 3000);  // microseconds before reading output()
  for (int call = 0; call < calls; ++call) {
    auto value = [&](std::size_t gt, std::size_t row, std::size_t d) {
      return small_int(gt * 101 + row * 7 + d * 3 + call * 13);
    };
    // Bag b of table gt: indices (b + j * gt + call) % rows for j < (b + call + gt) % 4.
    auto bag = [&](std::size_t gt, std::size_t b) {
      std::vector<std::int64_t> idx;
      for (std::size_t j = 0; j < (b + call + gt) % 4; ++j)
        idx.push_back(static_cast<std::int64_t>((b + j * gt + call) % rows));
      return idx;
    };
    std::vector<std::vector<float>> w(tables_of(me));
    std::vector<std::vector<std::int64_t>> idx(tables_of(me)), off(tables_of(me));
    std::vector<const float*> tables;
    std::vector<EmbeddingBags> bags;
    for (std::size_t t = 0; t < tables_of(me); ++t) {
      for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t d = 0; d < dim; ++d)
          w[t].push_back(value(first + t, r, d));
      off[t].push_back(0);
      for (std::size_t b = 0; b < batch; ++b) {
        for (std::int64_t i : bag(first + t, b))
          idx[t].push_back(i);
        off[t].push_back(static_cast<std::int64_t>(idx[t].size()));
      }
    }
    for (std::size_t t = 0; t < tables_of(me); ++t) {
      tables.push_back(w[t].data());
      bags.push_back({idx[t], off[t], {}});
    }
    const std::size_t lb = op.local_batch(), b0 = op.batch_begin();
    std::vector<float> ref(lb * total * dim, 0.0f);
    for (std::size_t b = 0; b < lb; ++b)
      for (std::size_t gt = 0; gt < total; ++gt)
        for (std::int64_t i : bag(gt, b0 + b))
          for (std::size_t d = 0; d < dim; ++d)
            ref[(b * total + gt) * dim + d] += value(gt, static_cast<std::size_t>(i), d);
    std::vector<float> own(ref.size(), -777.0f);
    const std::span<float> out = zero_copy ? op.output() : std::span<float>(own);
    straggler.before_call(call % 4 == 0 ? 4000 : 1500);
    op.run(tables, bags, out.data(), Mode::Fused);
    straggler.after_call();
    if (zero_copy) std::this_thread::sleep_for(std::chrono::microseconds(late(rng)));
    int wrong = 0;
    for (std::size_t i = 0; i < out.size(); ++i)
      wrong += out[i] != ref[i];
    EXPECT_EQ(wrong, 0) << "call " << call << " batch " << batch
                        << (zero_copy ? " into output()" : "");
  }
}

TEST(AllToAllSkew, EmbeddingBackToBack) {
  const int p = test::world_size();
  for (int ns : node_sizes(p)) {
    SCOPED_TRACE("node_size " + std::to_string(ns));
    Communicator comm(MPI_COMM_WORLD, unverified(ns));
    Device dev(test_device_config());
    embedding_skewed_calls(comm, dev, 23, 30);
    embedding_skewed_calls(comm, dev, static_cast<std::size_t>(p - 1), 12);  // a rank without bags
  }
}

// The same into output() (zero-copy), reading each call's results late.
TEST(AllToAllSkew, EmbeddingBackToBackZeroCopy) {
  const int p = test::world_size();
  for (int ns : node_sizes(p)) {
    SCOPED_TRACE("node_size " + std::to_string(ns));
    Communicator comm(MPI_COMM_WORLD, unverified(ns));
    Device dev(test_device_config());
    embedding_skewed_calls(comm, dev, 23, 30, true);
    embedding_skewed_calls(comm, dev, static_cast<std::size_t>(p - 1), 12, true);
  }
}

// The layout of the two tests below: rank 0 owns no table and holds the only bag (global batch
// 1); every other rank owns one table whose values name the rank and the call, and only sends its
// pooled row 1 to rank 0.
struct SendOnlyToRankZero {
  static constexpr std::size_t kDim = 4, kRows = 3;
  explicit SendOnlyToRankZero(int rank) : me(rank) {}
  SendOnlyToRankZero(const SendOnlyToRankZero&) = delete;  // bags point into idx and off
  std::vector<std::size_t> table_rows() const {
    return me == 0 ? std::vector<std::size_t>{} : std::vector<std::size_t>{kRows};
  }
  /// This rank's tables and bags for call `call`.
  void prepare(int call) {
    table.resize(kRows * kDim);
    for (std::size_t i = 0; i < table.size(); ++i)
      table[i] = static_cast<float>(me * 1000 + call * 10) + static_cast<float>(i);
    tables.clear();
    bags.clear();
    if (me != 0) {
      tables.push_back(table.data());
      bags.push_back({idx, off, {}});
    }
  }
  /// Rank 0's output for rank r's table (global table r - 1), element d, in call `call`.
  static float expected(int r, int call, std::size_t d) {
    return static_cast<float>(r * 1000 + call * 10 + kDim + d);
  }
  const int me;
  const std::vector<std::int64_t> idx = {1}, off = {0, 1};
  std::vector<float> table;
  std::vector<const float*> tables;
  std::vector<EmbeddingBags> bags;
};

// The zero-copy guard on its own: rank 0 owns no table and holds the only bag, every other rank
// owns one table and only sends to rank 0, so nothing but the guard holds them back. Rank 0 reads
// each call's output() 30 ms after the call returned; meanwhile the others have finished the next
// call (the other view) and are at the one after, which stores into this view: they must wait
// until rank 0 begins its next call. Without the guard (the done flag raised at the end of the
// call, as for a caller-owned out) rank 0 reads a later call's values. One node only: off-node
// tiles are received by this rank's own MPI receives, posted when its call begins.
TEST(AllToAllSkew, ZeroCopyOutputLastsUntilTheNextCall) {
  const int p = test::world_size(), me = test::world_rank();
  if (p < 2) GTEST_SKIP() << "needs two ranks";
  Communicator comm(MPI_COMM_WORLD, unverified(0));
  Device dev(test_device_config());
  SendOnlyToRankZero in(me);
  const std::size_t dim = SendOnlyToRankZero::kDim;
  EmbeddingAllToAll op(comm, dev, in.table_rows(), dim, 1, Pooling::Sum);
  std::mt19937 rng(55u + me);
  int wrong = 0;
  for (int call = 1; call <= 8; ++call) {
    in.prepare(call);
    if (me != 0) std::this_thread::sleep_for(std::chrono::microseconds(rng() % 500));
    const std::span<float> out = op.output();
    op.run(in.tables, in.bags, out.data(), Mode::Fused);
    if (me != 0) continue;
    std::this_thread::sleep_for(std::chrono::milliseconds(30));  // the late reader
    for (int r = 1; r < p; ++r)
      for (std::size_t d = 0; d < dim; ++d)
        wrong += out[(r - 1) * dim + d] != SendOnlyToRankZero::expected(r, call, d);
  }
  EXPECT_EQ(wrong, 0) << "values of a later call in output() before the next call began";
  comm.barrier();
}

// Rank 0 owns no table and holds the only bag (global batch 1); every other rank owns one table
// and has no bag: they only send to rank 0 and receive nothing. Rank 0 starts 2 s late. The others
// must finish calls 1 and 2 without it (nothing orders their calls against rank 0's); on one node
// their call 3 stores into the inbox half of call 1, so it must wait until rank 0 has read it.
TEST(AllToAllSkew, RunsAheadOfAPeerItOnlySendsTo) {
  const int p = test::world_size(), me = test::world_rank();
  if (p < 2) GTEST_SKIP() << "needs two ranks";
  for (int ns : {0, 1}) {
    SCOPED_TRACE("node_size " + std::to_string(ns));
    Communicator comm(MPI_COMM_WORLD, unverified(ns));
    Device dev(test_device_config());
    SendOnlyToRankZero in(me);
    const std::size_t dim = SendOnlyToRankZero::kDim;
    EmbeddingAllToAll op(comm, dev, in.table_rows(), dim, 1, Pooling::Sum);
    ASSERT_EQ(op.local_batch(), me == 0 ? 1u : 0u);
    const double late_s = 2.0;
    comm.barrier();
    const auto t0 = std::chrono::steady_clock::now();
    if (me == 0) std::this_thread::sleep_for(std::chrono::duration<double>(late_s));
    double after_two = 0.0;
    for (int call = 1; call <= 4; ++call) {
      in.prepare(call);
      std::vector<float> out(op.local_batch() * op.num_tables() * dim, -1.0f);
      op.run(in.tables, in.bags, out.data(), Mode::Fused);
      if (call == 2) after_two = seconds_since(t0);
      if (me != 0 && call == 3 && ns == 0)  // waited for rank 0 to finish call 1
        EXPECT_GE(seconds_since(t0), late_s) << "call 3 overwrote rank 0's inbox of call 1";
      for (int r = 1; r < p && me == 0; ++r)
        for (std::size_t d = 0; d < dim; ++d)
          EXPECT_EQ(out[(r - 1) * dim + d], SendOnlyToRankZero::expected(r, call, d))
              << "call " << call << " from rank " << r;
    }
    if (me != 0) EXPECT_LT(after_two, late_s * 0.75) << "calls 1 and 2 waited for rank 0";
    comm.barrier();
  }
}

// Rank 0 routes one row more to the last expert than its owner expects; verify mode off.
// The two ranks of that pair each find it in the other's header; nobody waits past the deadline.
// The same for run_layer, where the owner's tiles of rank 0's rows check its header before they
// wait for the rows (across nodes the longer dispatch message may instead fail the receive:
// Error(MpiError), truncation).
TEST(AllToAllSkew, GemmMismatchWithoutVerifyMode) {
  const int p = test::world_size(), me = test::world_rank();
  const double timeout_s = 2.0;
  for (int ns : node_sizes(p))
    for (bool layer : {false, true}) {
      SCOPED_TRACE("node_size " + std::to_string(ns) + (layer ? " run_layer" : " run"));
      Communicator comm(MPI_COMM_WORLD, unverified(ns, timeout_s));
      Device dev(test_device_config());
      GemmAllToAll op(comm, dev, 1, 4, 4, 100, 100);
      const std::size_t G = op.num_experts();
      std::vector<std::size_t> recv(p, 1), send(G, 1);
      if (me == 0) send[G - 1] = 2;
      std::vector<float> x(100 * 4, 1.0f), y(100 * 4), w(16, 1.0f);
      std::vector<const float*> wp = {w.data()};
      const auto t0 = std::chrono::steady_clock::now();
      std::string code = "OK", what;
      try {
        if (layer)
          op.run_layer(wp, x.data(), recv, send, y.data(), Mode::Fused);
        else
          op.run(wp, x.data(), recv, send, y.data(), Mode::Fused);
      } catch (const Error& e) {
        code = to_string(e.code());
        what = e.what();
      }
      const double s = seconds_since(t0);
      EXPECT_LT(s, timeout_s + 3.0) << code << ": " << what;
      const std::string expected = "rank 0 routes 2 rows to expert " + std::to_string(G - 1) +
                                   " (on rank " + std::to_string(p - 1) + "), which expects 1 rows";
      const bool truncated = layer && ns > 0 && me == p - 1 && code == "MpiError";
      if ((me == 0 || me == p - 1) && !truncated) {
        EXPECT_EQ(code, "Mismatch") << what;
        EXPECT_NE(what.find(expected), std::string::npos) << what;
        // A mismatch found once tiles moved fails the context: the next call is refused at once.
        // (One rank: the pair is the rank itself, found before any tile moves: still usable.)
        if (p > 1) {
          try {
            op.run(wp, x.data(), recv, send, y.data(), Mode::Fused);
            ADD_FAILURE() << "no error after the failed call";
          } catch (const Error& e) {
            EXPECT_EQ(e.code(), ErrorCode::InvalidUsage) << e.what();
          }
        }
      } else if (!truncated) {
        EXPECT_TRUE(code == "OK" || code == "Timeout") << code << ": " << what;
      }
    }
}

// A failed call leaves messages in flight: sends to a peer that gave up and cancelled its
// receives, receives cancelled under a peer's sends. Nothing of them may reach the next
// communicator built after the failed one is destroyed (Open MPI reuses a freed communicator's
// context id: stale messages matched into the new one crashed in MPI_Win_allocate_shared or left
// its calls waiting until the deadline). Repeated, with random per-rank delays, since the stale
// traffic depends on timing; every good call after a failed one must be exact.
TEST(AllToAllSkew, FailedCallsLeaveNothingForTheNextCommunicator) {
  const int p = test::world_size(), me = test::world_rank();
  if (p < 2) GTEST_SKIP() << "needs peers";
  std::mt19937 rng(4321u + 13u * me);
  std::uniform_int_distribution<int> late(0, 2000);  // microseconds before the call
  for (int rep = 0; rep < 4; ++rep)
    for (bool layer : {false, true}) {
      SCOPED_TRACE("rep " + std::to_string(rep) + (layer ? " run_layer" : " run"));
      std::vector<float> x(100 * 4, 1.0f), y(100 * 4, -1.0f), w(16, 1.0f);
      const std::vector<const float*> wp = {w.data()};
      {
        Communicator comm(MPI_COMM_WORLD, unverified(1, 1.0));
        Device dev(test_device_config());
        GemmAllToAll op(comm, dev, 1, 4, 4, 100, 100);
        std::vector<std::size_t> recv(p, 3), send(op.num_experts(), 3);
        if (me == 0) send[op.num_experts() - 1] = 4;  // the last rank expects 3
        std::this_thread::sleep_for(std::chrono::microseconds(late(rng)));
        try {
          if (layer)
            op.run_layer(wp, x.data(), recv, send, y.data(), Mode::Fused);
          else
            op.run(wp, x.data(), recv, send, y.data(), Mode::Fused);
        } catch (const Error&) {  // which rank sees what: GemmMismatchWithoutVerifyMode
        }
      }
      Communicator comm(MPI_COMM_WORLD, unverified(1, 30.0));
      Device dev(test_device_config());
      GemmAllToAll op(comm, dev, 1, 4, 4, 100, 100);
      std::vector<std::size_t> recv(p, 3), send(op.num_experts(), 3);
      std::this_thread::sleep_for(std::chrono::microseconds(late(rng)));
      if (layer)
        op.run_layer(wp, x.data(), recv, send, y.data(), Mode::Fused);
      else
        op.run(wp, x.data(), recv, send, y.data(), Mode::Fused);
      // Rows of ones through 4 x 4 weights of ones: every received element is 4 (run_layer
      // dispatches the same ones first).
      for (std::size_t i = 0; i < 3 * static_cast<std::size_t>(p) * 4; ++i)
        ASSERT_EQ(y[i], 4.0f) << "element " << i;
    }
}

// A proxy that fails (here: a dispatched input longer than the receive its owner posted, an MPI
// truncation error) ends the call at once: the owner's WG that waits for that input stops too,
// instead of waiting for the communicator's whole deadline (60 s here; it did before).
TEST(AllToAllSkew, GemmLayerTruncatedInputEndsTheCallAtOnce) {
  const int p = test::world_size(), me = test::world_rank();
  if (p != 2) GTEST_SKIP() << "two ranks: both end at once (rank 0 by the header's mismatch)";
  Communicator comm(MPI_COMM_WORLD, unverified(1, 60.0));
  Device dev(test_device_config());
  GemmAllToAll op(comm, dev, 1, 4, 4, 100, 100);
  std::vector<std::size_t> recv(p, 1), send(op.num_experts(), 1);
  if (me == 0) send[1] = 2;  // rank 1 expects 1 row: rank 0's 2-row input is truncated there
  std::vector<float> x(100 * 4, 1.0f), y(100 * 4), w(16, 1.0f);
  const std::vector<const float*> wp = {w.data()};
  const auto t0 = std::chrono::steady_clock::now();
  std::string code = "OK", what;
  try {
    op.run_layer(wp, x.data(), recv, send, y.data(), Mode::Fused);
  } catch (const Error& e) {
    code = to_string(e.code());
    what = e.what();
  }
  EXPECT_LT(seconds_since(t0), 10.0) << code << ": " << what;
  if (me == 0)
    EXPECT_EQ(code, "Mismatch") << what;
  else if (code == "MpiError")
    EXPECT_NE(what.find("receiving tile (tag"), std::string::npos) << what;
  else
    EXPECT_EQ(code, "Mismatch") << what;
}

// The first fused run_layer call maps the dispatch inputs' shared memory (a blocking collective
// allocation). Without verify mode, a rank that raises on a bad argument before that call moves
// anything must leave its peers a Timeout within the deadline, never a hang in the allocation.
TEST(AllToAllSkew, GemmLayerBadArgumentOnTheMappingCallWithoutVerifyMode) {
  const int p = test::world_size(), me = test::world_rank();
  if (p == 1) GTEST_SKIP() << "needs peers";
  const double timeout_s = 2.0;
  Communicator comm(MPI_COMM_WORLD, unverified(0, timeout_s));
  Device dev(test_device_config());
  GemmAllToAll op(comm, dev, 1, 4, 4, 100, 100);
  std::vector<std::size_t> recv(p, 1), send(op.num_experts(), 1);
  std::vector<float> x(100 * 4, 1.0f), y(100 * 4), w(16, 1.0f);
  const std::vector<const float*> wp = {w.data()};
  const auto t0 = std::chrono::steady_clock::now();
  std::string code = "OK";
  try {
    op.run_layer(wp, me == 0 ? nullptr : x.data(), recv, send, y.data(), Mode::Fused);
  } catch (const Error& e) {
    code = to_string(e.code());
  }
  EXPECT_LT(seconds_since(t0), timeout_s + 3.0) << code;
  EXPECT_EQ(code, me == 0 ? "InvalidArgument" : "Timeout");
}

// Without verify mode a count that cannot pair up with this rank's own expert is found locally,
// before any tile moves, and the context stays usable.
TEST(AllToAllSkew, GemmLocalMismatchLeavesContextUsable) {
  if (test::world_size() != 1) GTEST_SKIP() << "one rank: the pair is the rank itself";
  Communicator comm(MPI_COMM_WORLD, unverified(0));
  Device dev(test_device_config());
  GemmAllToAll op(comm, dev, 1, 4, 4, 10, 10);
  std::vector<float> x(40, 1.0f), y(40), w(16, 1.0f);
  std::vector<const float*> wp = {w.data()};
  std::vector<std::size_t> recv = {1}, send = {2};
  try {
    op.run(wp, x.data(), recv, send, y.data(), Mode::Fused);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Mismatch);
    EXPECT_NE(std::string(e.what()).find("rank 0 routes 2 rows to expert 0 (on rank 0)"),
              std::string::npos)
        << e.what();
  }
  send = {1};
  op.run(wp, x.data(), recv, send, y.data(), Mode::Fused);
  EXPECT_EQ(y[0], 4.0f);
}

// Without verify mode a rank that rejects its own arguments raises at once, before any tile
// moves; the peers that expect its tiles wait until the deadline (Error(Timeout), context failed).
TEST(AllToAllSkew, EmbeddingBadInputWithoutVerifyMode) {
  const int p = test::world_size(), me = test::world_rank();
  if (p < 2) GTEST_SKIP() << "needs two ranks";
  const double timeout_s = 2.0;
  Communicator comm(MPI_COMM_WORLD, unverified(0, timeout_s));
  Device dev(test_device_config());
  std::vector<float> table(10 * 4, 1.0f);
  EmbeddingAllToAll op(comm, dev, {10}, 4, 3, Pooling::Sum);
  std::vector<float> out(op.local_batch() * op.num_tables() * 4);
  std::vector<const float*> tables = {table.data()};
  std::vector<std::int64_t> idx = {1, me == 0 ? 10 : 2}, off = {0, 1, 1, 2};
  EmbeddingBags bags{idx, off, {}};
  const auto t0 = std::chrono::steady_clock::now();
  try {
    op.run(tables, {&bags, 1}, out.data(), Mode::Fused);
    // A rank without bags (global batch 3 < 4 ranks) expects nothing from rank 0.
    EXPECT_EQ(op.local_batch(), 0u) << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), me == 0 ? ErrorCode::InvalidArgument : ErrorCode::Timeout) << e.what();
    if (me == 0)
      EXPECT_NE(std::string(e.what()).find("table 0 bag 2: index 10"), std::string::npos)
          << e.what();
  }
  EXPECT_LT(seconds_since(t0), timeout_s + 3.0);
}

}  // namespace
}  // namespace tilecomm::test
