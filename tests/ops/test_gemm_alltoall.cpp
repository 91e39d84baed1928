// GemmAllToAll: every mode equals a reference each rank computes for the rows it routed out,
// bitwise, into caller memory and (fused) into output(), chosen per rank and call; uneven and zero
// counts, several calls with changing routing and with the weights
// rewritten in place (same pointers) between calls, stragglers; in verify mode routing mismatches
// raise the same error on every rank.
#include <algorithm>

#include "ops_test_util.hpp"
#include "tilecomm/bench_hooks.hpp"

namespace tilecomm::test {
namespace {

std::size_t experts_of(int r) {
  return static_cast<std::size_t>(r % 2) + 1;
}

// The fused calls into output() of check() and check_layer(): first every rank zero-copy, then
// only the ranks of one parity (which alternates by call), the others into their own memory.
bool into_view(int variant, int me, int call) {
  return variant == 0 || (me + call) % 2 == 0;
}

// Compares y[0, ref.size()) with ref; the number of differing floats.
int count_wrong(const float* y, const std::vector<float>& ref) {
  int wrong = 0;
  for (std::size_t i = 0; i < ref.size(); ++i)
    wrong += y[i] != ref[i];
  return wrong;
}

void check(Communicator& comm, Device& dev, std::size_t k, std::size_t n, int calls,
           std::size_t tile = 0, OpOptions opt = {}) {
  const int p = comm.size(), me = comm.rank();
  const MoeExperts ex(p, experts_of);
  int call = 0;  // the weights change in place every call (the kernel packs them per call)
  auto W = [&call](std::size_t g, std::size_t i, std::size_t j) {
    return small_int(g * 5 + i * 3 + j * 11 + call * 2);
  };
  opt.tile = tile;
  GemmAllToAll op(comm, dev, experts_of(me), k, n, 2000, 2000, opt);
  ASSERT_EQ(op.num_experts(), ex.total());
  auto w = ex.weights(me, k, n, W);
  const auto wp = pointers(w);
  Straggler straggler(dev, 7u + me);
  for (call = 0; call < calls; ++call) {
    const auto now = ex.weights(me, k, n, W);  // this call's weights, into the same buffers
    for (std::size_t e = 0; e < w.size(); ++e)
      std::copy(now[e].begin(), now[e].end(), w[e].begin());
    // rows source s routes to expert g this call: uneven, with zeros
    auto cnt = [&](int s, std::size_t g) {
      return static_cast<std::size_t>((s * 7 + g * 13 + call * 5) % 23) * ((g + s + call) % 4 != 0);
    };
    auto X = [&](int s, std::size_t g, std::size_t i, std::size_t kk) {
      return small_int(s + g * 3 + i * 7 + kk * 13 + call);
    };
    const MoeCall c = make_moe_call(ex, p, me, k, n, cnt, X, W);
    const auto& [recv, send, x, ref, tokens] = c;
    for (Mode mode : kModes) {
      std::vector<float> y(ref.size(), -555.0f);
      straggler.before_call();
      op.run(wp, x.data(), recv, send, y.data(), mode);
      straggler.after_call();
      EXPECT_EQ(count_wrong(y.data(), ref), 0)
          << "mode " << to_string(mode) << " call " << call << " n " << n;
    }
    for (int variant = 0; variant < 2; ++variant) {
      std::vector<float> own(ref.size(), -555.0f);
      const bool view = into_view(variant, me, call);
      float* y = view ? op.output().data() : own.data();
      if (view) std::fill(y, y + ref.size(), -555.0f);
      straggler.before_call();
      op.run(wp, x.data(), recv, send, y, Mode::Fused);
      straggler.after_call();
      EXPECT_EQ(count_wrong(y, ref), 0) << "fused into " << (view ? "output()" : "own memory")
                                        << " variant " << variant << " call " << call;
    }
  }
}

// run_layer (dispatch + GEMM + return in one call) against the same reference, every mode and
// Auto, alternating with run() on the same context (they share the epochs, inboxes and flags),
// with stragglers; the weights change in place between calls.
// `scale` multiplies every row count (large inputs: a tile that read its rows before they had
// fully arrived would see the previous call's or zeros).
void check_layer(Communicator& comm, Device& dev, std::size_t k, std::size_t n, int calls,
                 std::size_t tile = 0, OpOptions opt = {}, std::size_t scale = 1) {
  const int p = comm.size(), me = comm.rank();
  const MoeExperts ex(p, experts_of);
  int call = 0;
  auto W = [&call](std::size_t g, std::size_t i, std::size_t j) {
    return small_int(g * 7 + i * 5 + j * 3 + call);
  };
  opt.tile = tile;
  GemmAllToAll op(comm, dev, experts_of(me), k, n, 2 * 18 * scale * p, 18 * scale * ex.total(),
                  opt);
  auto w = ex.weights(me, k, n, W);
  const auto wp = pointers(w);
  Straggler straggler(dev, 11u + me);
  for (call = 0; call < calls; ++call) {
    const auto now = ex.weights(me, k, n, W);
    for (std::size_t e = 0; e < w.size(); ++e)
      std::copy(now[e].begin(), now[e].end(), w[e].begin());
    auto cnt = [&](int s, std::size_t g) {
      return static_cast<std::size_t>((s * 5 + g * 11 + call * 3) % 19) *
             ((g + 2 * s + call) % 3 != 0);
    };
    auto X = [&](int s, std::size_t g, std::size_t i, std::size_t kk) {
      return small_int(s * 3 + g + i * 5 + kk * 7 + call);
    };
    const MoeCall c = make_moe_call(ex, p, me, k, n, cnt, X, W);
    for (Mode mode : {Mode::Sequential, Mode::Shaped, Mode::Fused, Mode::Auto}) {
      for (int which = 0; which < 2; ++which) {  // run_layer, then run() on the same context
        std::vector<float> y(c.ref.size(), -555.0f);
        straggler.before_call();
        if (which == 0)
          op.run_layer(wp, c.tokens.data(), c.recv, c.send, y.data(), mode);
        else
          op.run(wp, c.x.data(), c.recv, c.send, y.data(), mode);
        straggler.after_call();
        int wrong = 0;
        for (std::size_t i = 0; i < y.size(); ++i)
          wrong += y[i] != c.ref[i];
        EXPECT_EQ(wrong, 0) << (which == 0 ? "run_layer" : "run") << " mode " << to_string(mode)
                            << " call " << call << " k " << k << " n " << n;
      }
    }
    for (int variant = 0; variant < 2; ++variant) {  // fused run_layer into output()
      std::vector<float> own(c.ref.size(), -555.0f);
      const bool view = into_view(variant, me, call);
      float* y = view ? op.output().data() : own.data();
      if (view) std::fill(y, y + c.ref.size(), -555.0f);
      straggler.before_call();
      op.run_layer(wp, c.tokens.data(), c.recv, c.send, y, Mode::Fused);
      straggler.after_call();
      EXPECT_EQ(count_wrong(y, c.ref), 0)
          << "fused run_layer into " << (view ? "output()" : "own memory") << " variant " << variant
          << " call " << call;
    }
  }
  // One Auto call of each kind per call: settled after a pass of 3 blocks of a lead-in and
  // auto_rounds calls (up to 3 passes when not clear), on every rank alike, separately for
  // run_layer and run.
  if (calls >= 3 * 3 * (1 + opt.auto_rounds)) {
    for (const auto& choice : {op.layer_auto_choice(), op.auto_choice()}) {
      ASSERT_TRUE(choice.has_value());
      int mine = static_cast<int>(*choice), lo = 0, hi = 0;
      MPI_Allreduce(&mine, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
      MPI_Allreduce(&mine, &hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
      EXPECT_EQ(lo, hi);
    }
  } else if (calls < 3 * (1 + opt.auto_rounds)) {
    EXPECT_FALSE(op.layer_auto_choice().has_value());
  }
}

TEST(GemmAllToAll, LayerMatchesReferenceInEveryMode) {
  Communicator comm(MPI_COMM_WORLD);
  Device dev(test_device_config());
  check_layer(comm, dev, 12, 40, 3);
  check_layer(comm, dev, 5, 270, 2, 4);  // two column blocks, small row tiles
}

// With the default tile and N = 128, tiles to and from other nodes are 96 rows (about 48 KiB of
// results) and on-node ones 128 (4 x 32: a K = 16 row is too little work for a tile of
// its own, gemm_alltoall_node_rows): pairs of up to 216 rows mix whole and partial tiles of both
// tilings in one call (on pretend nodes), and run_layer's dispatch blocks follow each row step.
TEST(GemmAllToAll, LargerOffNodeTilesMatchTheReference) {
  Communicator comm(MPI_COMM_WORLD);
  Device dev(test_device_config());
  check_layer(comm, dev, 16, 128, 2, 0, {}, 12);
  // N = 300 (column blocks of 256 and 44 floats): off-node tiles of 48 rows (48 KiB, in steps of
  // 16: not a whole number of the 32-row tiles) beside on-node ones of whole 32-row tiles, so the
  // flags count 16 rows; both run() and run_layer().
  check_layer(comm, dev, 16, 300, 2, 0, {}, 12);
  check(comm, dev, 16, 300, 2);
}

// Inputs of ~0.5-1 MB per (source, expert) block: copies and MPI messages that take a while, so a
// tile that did not wait for its rows' flag would read a partly written input half (the per-call
// header, sent after the inputs, arrives long before them across nodes).
TEST(GemmAllToAll, LayerWaitsForLargeInputs) {
  Communicator comm(MPI_COMM_WORLD);
  Device dev(test_device_config());
  check_layer(comm, dev, 512, 8, 3, 64, {}, 24);
}

// Auto settles for run_layer on its own trials, apart from run()'s, on every rank alike.
TEST(GemmAllToAll, LayerAutoSettlesApartFromRun) {
  Communicator comm(MPI_COMM_WORLD);
  Device dev(test_device_config());
  OpOptions opt;
  opt.auto_rounds = 1;
  opt.auto_min_trial_ms = 0;                  // the schedule counted: no short-trial rounds
  check_layer(comm, dev, 8, 16, 18, 0, opt);  // 18 Auto calls of each kind: 1-3 passes of 6
}

// run_layer's own argument check: rows routed to an owner above its max_rows_in.
TEST(GemmAllToAll, LayerRejectsRowsAboveAnOwnersCapacity) {
  Communicator comm(MPI_COMM_WORLD);
  Device dev(test_device_config());
  const int p = comm.size(), me = comm.rank();
  GemmAllToAll op(comm, dev, 1, 4, 4, 10, 50);  // every rank: 1 expert, at most 10 rows in
  std::vector<std::size_t> recv(p, 0), send(op.num_experts(), 0);
  send[0] = 11;  // 11 rows to rank 0's expert, above its max_rows_in
  std::vector<float> tokens(11 * 4), y(11 * 4), w(16);
  const std::vector<const float*> wp{w.data()};
  if (me == 0) recv[0] = 11;  // this rank's own row count must match (else another Mismatch)
  for (Mode mode : kModes) {
    try {
      op.run_layer(wp, tokens.data(), recv, send, y.data(), mode);
      ADD_FAILURE() << "no error in mode " << to_string(mode);
    } catch (const Error& e) {
      EXPECT_TRUE(e.code() == ErrorCode::Mismatch || e.code() == ErrorCode::InvalidArgument)
          << e.what();
    }
  }
  std::vector<std::size_t> no_recv(p, 0);
  try {
    op.run_layer(wp, nullptr, no_recv, std::vector<std::size_t>(op.num_experts(), 1), y.data(),
                 Mode::Sequential);
    ADD_FAILURE() << "no error for null tokens";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tokens is null"), std::string::npos) << e.what();
  }
}

// output() is only for Mode::Fused (run and run_layer), and only the current call's view: every
// other use is an InvalidArgument before any communication (every rank passes the same kind of bad
// y, so no rank waits for another), and the context still works afterwards.
TEST(GemmAllToAll, OutputViewMisuseIsRejected) {
  Communicator comm(MPI_COMM_WORLD);
  Device dev(test_device_config());
  const int p = comm.size(), me = comm.rank();
  const MoeExperts ex(p, experts_of);
  const std::size_t k = 6, n = 10;
  auto W = [](std::size_t g, std::size_t i, std::size_t j) { return small_int(g + i * 3 + j); };
  GemmAllToAll op(comm, dev, experts_of(me), k, n, 8 * p, 8 * ex.total());
  const auto w = ex.weights(me, k, n, W);
  const auto wp = pointers(w);
  const MoeCall c = make_moe_call(
      ex, p, me, k, n,
      [](int s, std::size_t g) { return static_cast<std::size_t>(1 + (s + g) % 3); },
      [](int s, std::size_t g, std::size_t i, std::size_t kk) {
        return small_int(s + g * 5 + i + kk * 3);
      },
      W);
  EXPECT_EQ(op.output().size(), 8 * ex.total() * n);
  auto expect_invalid = [&](float* y, Mode mode, bool layer, const char* text) {
    try {
      if (layer)
        op.run_layer(wp, c.tokens.data(), c.recv, c.send, y, mode);
      else
        op.run(wp, c.x.data(), c.recv, c.send, y, mode);
      FAIL() << "no error for " << text;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::InvalidArgument) << e.what();
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
  };
  for (bool layer : {false, true}) {
    expect_invalid(op.output().data(), Mode::Sequential, layer, "only Mode::Fused");
    expect_invalid(op.output().data(), Mode::Shaped, layer, "only Mode::Fused");
    expect_invalid(op.output().data(), Mode::Auto, layer, "only Mode::Fused");
    expect_invalid(op.output().data() + 1, Mode::Fused, layer, "not output() of this call");
  }
  std::span<float> first = op.output();
  op.run(wp, c.x.data(), c.recv, c.send, first.data(), Mode::Fused);
  EXPECT_EQ(count_wrong(first.data(), c.ref), 0);
  EXPECT_NE(op.output().data(), first.data());  // the views alternate
  expect_invalid(first.data(), Mode::Fused, false, "not output() of this call");
  for (Mode mode : {Mode::Sequential, Mode::Fused}) {  // into the caller's memory
    std::vector<float> own(c.ref.size());
    op.run_layer(wp, c.tokens.data(), c.recv, c.send, own.data(), mode);
    EXPECT_EQ(count_wrong(own.data(), c.ref), 0) << to_string(mode);
  }
  std::span<float> next = op.output();
  EXPECT_EQ(next.data(), first.data());  // two fused calls later: the same half again
  op.run_layer(wp, c.tokens.data(), c.recv, c.send, next.data(), Mode::Fused);
  EXPECT_EQ(count_wrong(next.data(), c.ref), 0);
}

// set_weights(): the weights packed once; calls without weights (run and run_layer, every mode)
// use them, even after the caller's buffers change; a call with weights ends that packing.
TEST(GemmAllToAll, WeightsPackedOnceServeLaterCalls) {
  Communicator comm(MPI_COMM_WORLD);
  Device dev(test_device_config());
  const int p = comm.size(), me = comm.rank();
  const MoeExperts ex(p, experts_of);
  const std::size_t k = 9, n = 20;
  auto W = [](std::size_t g, std::size_t i, std::size_t j) { return small_int(g * 3 + i + j * 5); };
  GemmAllToAll op(comm, dev, experts_of(me), k, n, 500, 500);
  auto w = ex.weights(me, k, n, W);
  op.set_weights(pointers(w));
  for (auto& v : w)  // the caller's buffers change: the packed weights must not
    std::fill(v.begin(), v.end(), 99.0f);
  for (int call = 0; call < 2; ++call) {
    auto cnt = [&](int s, std::size_t g) {
      return static_cast<std::size_t>((s + 2 * g + call) % 5);
    };
    auto X = [&](int s, std::size_t g, std::size_t i, std::size_t kk) {
      return small_int(s + g + i * 3 + kk * 7 + call);
    };
    const MoeCall c = make_moe_call(ex, p, me, k, n, cnt, X, W);
    for (Mode mode : {Mode::Sequential, Mode::Shaped, Mode::Fused, Mode::Auto})
      for (int layer = 0; layer < 2; ++layer) {
        std::vector<float> y(c.ref.size(), -1.0f);
        if (layer)
          op.run_layer(c.tokens.data(), c.recv, c.send, y.data(), mode);
        else
          op.run(c.x.data(), c.recv, c.send, y.data(), mode);
        int wrong = 0;
        for (std::size_t i = 0; i < y.size(); ++i)
          wrong += y[i] != c.ref[i];
        EXPECT_EQ(wrong, 0) << (layer ? "run_layer" : "run") << " mode " << to_string(mode)
                            << " call " << call;
      }
  }
  // A call with weights packs them itself and ends set_weights()' packing.
  const MoeCall c = make_moe_call(
      ex, p, me, k, n, [](int, std::size_t) { return std::size_t{1}; },
      [](int, std::size_t, std::size_t, std::size_t) { return 1.0f; }, W);
  std::vector<float> y(c.ref.size());
  const auto fresh = ex.weights(me, k, n, W);
  op.run(pointers(fresh), c.x.data(), c.recv, c.send, y.data(), Mode::Sequential);
  EXPECT_EQ(y, c.ref);
  try {
    op.run(c.x.data(), c.recv, c.send, y.data(), Mode::Sequential);
    ADD_FAILURE() << "no error for a call without weights after a call with them";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument) << e.what();
    EXPECT_NE(std::string(e.what()).find("set_weights"), std::string::npos) << e.what();
  }
  std::vector<const float*> one_short(experts_of(me) - 1, fresh[0].data());
  EXPECT_THROW(op.set_weights(one_short), Error);
}

// run_layer's input halves (every peer's rows: the largest buffers of the context) are mapped by
// the first fused run_layer call only: a context that calls run(), or run_layer in other modes,
// never holds them. Results stay right across the mapping call.
TEST(GemmAllToAll, LayerInputsAreMappedByTheFirstFusedLayerCallOnly) {
  Communicator comm(MPI_COMM_WORLD);
  Device dev(test_device_config());
  const int p = comm.size(), me = comm.rank();
  const MoeExperts ex(p, experts_of);
  const std::size_t k = 9, n = 20;
  auto W = [](std::size_t g, std::size_t i, std::size_t j) { return small_int(g + i * 3 + j); };
  GemmAllToAll op(comm, dev, experts_of(me), k, n, 300, 300);
  op.set_weights(pointers(ex.weights(me, k, n, W)));
  const MoeCall c = make_moe_call(
      ex, p, me, k, n, [](int s, std::size_t g) { return static_cast<std::size_t>((s + g) % 4); },
      [](int s, std::size_t g, std::size_t i, std::size_t kk) { return small_int(s + g + i + kk); },
      W);
  std::vector<float> y(c.ref.size());
  for (Mode mode : {Mode::Sequential, Mode::Shaped, Mode::Fused}) {
    op.run(c.x.data(), c.recv, c.send, y.data(), mode);
    EXPECT_EQ(y, c.ref) << "run " << to_string(mode);
  }
  for (Mode mode : {Mode::Sequential, Mode::Shaped}) {
    op.run_layer(c.tokens.data(), c.recv, c.send, y.data(), mode);
    EXPECT_EQ(y, c.ref) << "run_layer " << to_string(mode);
  }
  EXPECT_EQ(bench::layer_input_bytes(op), 0u);
  for (int call = 0; call < 3; ++call) {
    std::fill(y.begin(), y.end(), -1.0f);
    op.run_layer(c.tokens.data(), c.recv, c.send, y.data(), Mode::Fused);
    EXPECT_EQ(y, c.ref) << "fused run_layer call " << call;
  }
  // Two halves of every other rank's rows (at most 300 each) x K floats, plus flags.
  EXPECT_GE(bench::layer_input_bytes(op), p > 1 ? 2 * (p - 1) * 300 * k * sizeof(float) : 0u);
}

TEST(GemmAllToAll, MatchesReferenceInEveryMode) {
  Communicator comm(MPI_COMM_WORLD);
  Device dev(test_device_config());
  check(comm, dev, 24, 40, 3);
  check(comm, dev, 7, 300, 2);     // two column blocks, the last one partial
  check(comm, dev, 16, 33, 2, 5);  // small row tiles
}

TEST(GemmAllToAll, NonDefaultOptions) {
  Communicator comm(MPI_COMM_WORLD);
  Device dev(test_device_config());
  OpOptions in_rank_order;  // tiles in plain rank order instead of remote first
  in_rank_order.remote_first = false;
  check(comm, dev, 9, 20, 2, 0, in_rank_order);
  OpOptions one_chunk;  // shaped: one chunk, no CU left free
  one_chunk.shaped = {0, 1};
  check(comm, dev, 9, 20, 1, 0, one_chunk);
  OpOptions many_chunks;  // shaped: more chunks than this rank has experts (empty chunks)
  many_chunks.shaped = {2, 7};
  check(comm, dev, 9, 20, 1, 0, many_chunks);
}

// Verify mode (forced on, whatever TILECOMM_CHECK says): the routing is agreed across ranks per
// call. Without it only the ranks whose counts disagree raise (test_alltoall_skew.cpp).
TEST(GemmAllToAll, RoutingMismatchRaisesOnEveryRank) {
  CommConfig verified;
  verified.check = 1;
  Communicator comm(MPI_COMM_WORLD, verified);
  Device dev(test_device_config());
  const int p = comm.size(), me = comm.rank();
  GemmAllToAll op(comm, dev, experts_of(me), 4, 4, 100, 100);
  const std::size_t G = op.num_experts();
  std::vector<std::size_t> recv(experts_of(me) * p, 1), send(G, 1);
  if (me == 0) send[G - 1] = 2;  // rank 0 routes one row more than the last expert expects
  std::vector<float> x(100 * 4), y(100 * 4);
  std::vector<std::vector<float>> w(experts_of(me), std::vector<float>(16));
  std::vector<const float*> wp;
  for (auto& v : w)
    wp.push_back(v.data());
  for (Mode mode : kModes) {
    try {
      op.run(wp, x.data(), recv, send, y.data(), mode);
      FAIL() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::Mismatch);
      EXPECT_NE(std::string(e.what()).find("rank 0 routes 2 rows to expert"), std::string::npos)
          << e.what();
    }
  }
  // Local argument errors: reported on the rank that made them, and named on the others.
  std::vector<std::size_t> short_send(me == 0 ? G - 1 : G, 1);
  try {
    op.run(wp, x.data(), recv, short_send, y.data(), Mode::Fused);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find(me == 0 ? "send_counts has" : "rank 0"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tilecomm::test

namespace tilecomm::test {
namespace {

// Regression: fused MoE across nodes once created MPI datatypes for tile shapes lazily from
// several WGs at once (a data race on the context's type cache that crashed in MPI_Testsome).
// Many distinct tile shapes in one call make the race likely; the datatypes are now created by the
// host before the kernels launch.
TEST(GemmAllToAll, ManyTileShapesInOneCall) {
  Communicator comm(MPI_COMM_WORLD);
  Device dev(test_device_config());
  const int p = comm.size(), me = comm.rank();
  for (int round = 0; round < 4; ++round) {
    OpOptions opt;
    opt.tile = 64;
    GemmAllToAll op(comm, dev, 2, 4, 96, 64 * 2 * p, 64 * 2 * p, opt);
    const std::size_t G = op.num_experts();
    auto cnt = [&](int s, std::size_t g) {
      return 1 + static_cast<std::size_t>(s * 17 + g * 29 + round * 7) % 63;
    };
    std::vector<std::size_t> recv(2 * p), send(G);
    std::size_t rows_in = 0, rows_out = 0;
    for (std::size_t e = 0; e < 2; ++e)
      for (int s = 0; s < p; ++s)
        rows_in += recv[e * p + s] = cnt(s, op.first_expert() + e);
    for (std::size_t g = 0; g < G; ++g)
      rows_out += send[g] = cnt(me, g);
    std::vector<float> x(rows_in * 4, 1.0f), w0(4 * 96, 1.0f), w1(4 * 96, 2.0f), y(rows_out * 96);
    std::vector<const float*> wp = {w0.data(), w1.data()};
    op.run(wp, x.data(), recv, send, y.data(), Mode::Fused);
    std::size_t row = 0;
    for (std::size_t g = 0; g < G; ++g)
      for (std::size_t i = 0; i < send[g]; ++i, ++row)
        ASSERT_EQ(y[row * 96], g % 2 == 0 ? 4.0f : 8.0f) << "expert " << g << " row " << i;
  }
}

// A thin GEMM (K = 2, N = 256) takes on-node tiles of several 32-row flags (128 rows:
// gemm_alltoall_node_rows), and blocks of up to 300 rows split into whole and partial ones: every
// mode puts each row where the source routed it. x row (e, s, i) on the owner is f(s, g, i), so
// the source knows what each of its rows must be.
TEST(GemmAllToAll, ThinGemmTakesLargerOnNodeTiles) {
  Communicator comm(MPI_COMM_WORLD);
  Device dev(test_device_config());
  const int p = comm.size(), me = comm.rank();
  const std::size_t k = 2, n = 256, per = 300;
  GemmAllToAll op(comm, dev, 2, k, n, per * 2 * p, per * 2 * p);
  EXPECT_EQ(op.tile_rows(), 32u);
  const std::size_t G = op.num_experts();
  auto cnt = [&](int s, std::size_t g) {
    return 1 + static_cast<std::size_t>(s * 131 + g * 71) % per;
  };
  auto f = [](int s, std::size_t g, std::size_t i) { return small_int(s * 7 + g * 3 + i); };
  std::vector<std::size_t> recv(2 * p), send(G);
  std::vector<float> x;
  for (std::size_t e = 0; e < 2; ++e)
    for (int s = 0; s < p; ++s) {
      const std::size_t g = op.first_expert() + e;
      recv[e * p + s] = cnt(s, g);
      for (std::size_t i = 0; i < recv[e * p + s]; ++i)
        x.insert(x.end(), k, f(s, g, i));
    }
  std::size_t rows_out = 0;
  for (std::size_t g = 0; g < G; ++g)
    rows_out += send[g] = cnt(me, g);
  std::vector<float> w0(k * n, 1.0f), w1(k * n, 2.0f);
  const std::vector<const float*> wp = {w0.data(), w1.data()};
  for (Mode mode : {Mode::Sequential, Mode::Shaped, Mode::Fused}) {
    std::vector<float> y(rows_out * n, -1.0f);
    op.run(wp, x.data(), recv, send, y.data(), mode);
    std::size_t row = 0, wrong = 0;
    for (std::size_t g = 0; g < G; ++g)
      for (std::size_t i = 0; i < send[g]; ++i, ++row) {
        const float want = static_cast<float>(k) * f(me, g, i) * (g % 2 == 0 ? 1.0f : 2.0f);
        for (std::size_t c = 0; c < n; ++c)
          wrong += y[row * n + c] != want;
      }
    EXPECT_EQ(wrong, 0u) << to_string(mode);
  }
}

// The benchmark hook's All-to-Allv exchanges what the last call routed: before any call it has
// nothing to go by and says so (it read empty routing and crashed when fused_perf's drawn round
// order first put it before compute_only()).
TEST(GemmAllToAll, BenchCollectiveBeforeAnyCallIsRefused) {
  Communicator comm(MPI_COMM_WORLD);
  Device dev(test_device_config());
  GemmAllToAll op(comm, dev, 1, 4, 8, 16, 16);
  std::vector<float> y(16 * 8);
  try {
    bench::collective_only(op, y.data());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidUsage);
    EXPECT_NE(std::string(e.what()).find("no routing"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tilecomm::test
