// Soak: many calls of the three fused operators (every mode, two shapes each, inputs changing per
// call) and of AllReduce/All-to-Allv (changing counts), each result checked exactly against a
// reference every rank computes on its own (small-integer inputs: every sum is exact). Resident
// memory (VmRSS) is read after a warm-up and at the end; growth beyond --max-growth-mb fails.
//
//   mpiexec -np 2 soak [--calls 10000] [--warmup 300] [--max-growth-mb 5]
//
// Prints one summary line per rank and exits non-zero on any wrong element or on growth.
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "../ops/moe_reference.hpp"
#include "tilecomm/tilecomm.hpp"

using namespace tilecomm;
using tilecomm::test::make_moe_call;
using tilecomm::test::MoeCall;
using tilecomm::test::MoeExperts;
using tilecomm::test::pointers;

namespace {

long arg(int argc, char** argv, const char* name, long fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return std::atol(argv[i + 1]);
  return fallback;
}

double rss_mb() {
  std::ifstream f("/proc/self/status");
  std::string key;
  while (f >> key) {
    if (key == "VmRSS:") {
      double kb = 0;
      f >> kb;
      return kb / 1024.0;
    }
    f.ignore(1 << 12, '\n');
  }
  return -1;
}

// Small integers in [-2, 2]: products and sums below stay exact in float32.
float small_int(std::uint64_t seed) {
  seed = seed * 6364136223846793005ull + 1442695040888963407ull;
  return static_cast<float>(static_cast<int>((seed >> 33) % 5) - 2);
}

constexpr Mode kModes[] = {Mode::Sequential, Mode::Shaped, Mode::Fused};

// ------------------------------------------------------------------ GemvAllReduce
struct GemvCase {
  std::unique_ptr<GemvAllReduce> op;
  std::size_t m, k;
  long run(int me, int p, long call, Mode mode) {
    std::vector<float> w(m * k), x(k), y(m, -7.0f);
    auto W = [&](int r, std::size_t i, std::size_t j) {
      return small_int(r * 1000003 + i * 131 + j + call);
    };
    auto X = [&](int r, std::size_t j) { return small_int(r * 7919 + j * 17 + call * 3); };
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t j = 0; j < k; ++j)
        w[i * k + j] = W(me, i, j);
    for (std::size_t j = 0; j < k; ++j)
      x[j] = X(me, j);
    op->run(w.data(), x.data(), y.data(), mode);
    long wrong = 0;
    for (std::size_t i = 0; i < m; ++i) {
      float ref = 0;
      for (int r = 0; r < p; ++r)
        for (std::size_t j = 0; j < k; ++j)
          ref += W(r, i, j) * X(r, j);
      wrong += y[i] != ref;
    }
    return wrong;
  }
};

// ------------------------------------------------------------------ EmbeddingAllToAll
// Rank r owns one table of rows(r) rows; global table t is rank t's table.
struct EmbCase {
  std::unique_ptr<EmbeddingAllToAll> op;
  std::size_t dim, batch;
  static std::size_t rows(int r) { return 20 + 3 * static_cast<std::size_t>(r); }
  static float T(int t, std::size_t row, std::size_t d) {
    return small_int(t * 4099 + row * 37 + d);
  }
  // Bag g of table t in call `call`: 0..3 indices.
  static std::vector<std::int64_t> bag(int t, std::size_t g, long call) {
    std::vector<std::int64_t> v((g + t + call) % 4);
    for (std::size_t j = 0; j < v.size(); ++j)
      v[j] = static_cast<std::int64_t>((g * 7 + j * 5 + call) % rows(t));
    return v;
  }
  long run(int me, int p, long call, Mode mode) {
    std::vector<float> table(rows(me) * dim);
    for (std::size_t row = 0; row < rows(me); ++row)
      for (std::size_t d = 0; d < dim; ++d)
        table[row * dim + d] = T(me, row, d);
    std::vector<std::int64_t> idx, off{0};
    for (std::size_t g = 0; g < batch; ++g) {
      for (auto i : bag(me, g, call))
        idx.push_back(i);
      off.push_back(static_cast<std::int64_t>(idx.size()));
    }
    const float* tables[] = {table.data()};
    EmbeddingBags bags[] = {{idx, off, {}}};
    const std::size_t lb = op->local_batch(), b0 = op->batch_begin();
    std::vector<float> out(lb * p * dim, -7.0f);
    op->run(tables, bags, out.data(), mode);
    long wrong = 0;
    for (std::size_t b = 0; b < lb; ++b)
      for (int t = 0; t < p; ++t)
        for (std::size_t d = 0; d < dim; ++d) {
          float ref = 0;
          for (auto i : bag(t, b0 + b, call))
            ref += T(t, static_cast<std::size_t>(i), d);
          wrong += out[(b * p + t) * dim + d] != ref;
        }
    return wrong;
  }
};

// ------------------------------------------------------------------ GemmAllToAll
// One expert per rank; source s routes cnt(s, g) rows to expert g.
struct GemmCase {
  std::unique_ptr<GemmAllToAll> op;
  std::size_t k, n;
  static float W(std::size_t g, std::size_t i, std::size_t j) {
    return small_int(g * 5 + i * 3 + j * 11);
  }
  long run(int me, int p, long call, Mode mode) {
    auto cnt = [&](int s, std::size_t g) {
      return static_cast<std::size_t>((s * 7 + g * 13 + call * 5) % 11);
    };
    auto X = [&](int s, std::size_t g, std::size_t i, std::size_t kk) {
      return small_int(s + g * 3 + i * 7 + kk * 13 + call);
    };
    const MoeExperts ex(p, [](int) { return std::size_t{1}; });
    const auto w = ex.weights(me, k, n, W);
    const auto wp = pointers(w);
    const MoeCall c = make_moe_call(ex, p, me, k, n, cnt, X, W);
    const auto& [recv, send, x, ref, tokens] = c;
    std::vector<float> y(ref.size(), -7.0f);
    op->run(wp, x.data(), recv, send, y.data(), mode);
    long wrong = 0;
    for (std::size_t i = 0; i < y.size(); ++i)
      wrong += y[i] != ref[i];
    return wrong;
  }
};

// ------------------------------------------------------------------ collectives
long run_allreduce(Communicator& comm, long call) {
  const int p = comm.size(), me = comm.rank();
  const std::size_t n = 1 + static_cast<std::size_t>(call * 37) % 5000;
  std::vector<std::int32_t> a(n), r(n, -1);
  for (std::size_t i = 0; i < n; ++i)
    a[i] = static_cast<std::int32_t>(me + i + call);
  allreduce(comm, a.data(), r.data(), n, DataType::Int32, ReduceOp::Sum);
  long wrong = 0;
  for (std::size_t i = 0; i < n; ++i)
    wrong += r[i] != static_cast<std::int32_t>(p * (i + call) + p * (p - 1) / 2);
  return wrong;
}

long run_alltoallv(Communicator& comm, long call) {
  const int p = comm.size(), me = comm.rank();
  auto cnt = [&](int s, int d) { return static_cast<std::size_t>((s * 5 + d * 3 + call) % 9); };
  VarLayout sl, rl;
  for (int q = 0; q < p; ++q) {
    sl.displs.push_back(sl.capacity);
    sl.counts.push_back(cnt(me, q));
    sl.capacity += cnt(me, q);
    rl.displs.push_back(rl.capacity);
    rl.counts.push_back(cnt(q, me));
    rl.capacity += cnt(q, me);
  }
  std::vector<std::int64_t> s(sl.capacity), r(rl.capacity, -1);
  for (int q = 0; q < p; ++q)
    for (std::size_t i = 0; i < sl.counts[q]; ++i)
      s[sl.displs[q] + i] = me * 1000 + q * 100 + i + call;
  alltoallv(comm, s.data(), sl, r.data(), rl, DataType::Int64);
  long wrong = 0;
  for (int q = 0; q < p; ++q)
    for (std::size_t i = 0; i < rl.counts[q]; ++i)
      wrong += r[rl.displs[q] + i] != static_cast<std::int64_t>(q * 1000 + me * 100 + i + call);
  return wrong;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  const long calls = arg(argc, argv, "--calls", 10000);
  const long warmup = arg(argc, argv, "--warmup", 300);
  const double max_growth = static_cast<double>(arg(argc, argv, "--max-growth-mb", 5));
  int rc = 0;
  {
    Communicator comm(MPI_COMM_WORLD);
    RuntimeConfig cfg = RuntimeConfig::from_env();
    cfg.num_cus = 2;
    cfg.wg_slots_per_cu = 2;
    Device dev(cfg);
    const int me = comm.rank(), p = comm.size();
    // Two shapes per operator (the second with a small tile: many tiles per call).
    GemvCase gemv[2] = {{std::make_unique<GemvAllReduce>(comm, dev, 100, 24), 100, 24},
                        {nullptr, 37, 9}};
    OpOptions small_tile;
    small_tile.tile = 4;
    gemv[1].op = std::make_unique<GemvAllReduce>(comm, dev, 37, 9, small_tile);
    EmbCase emb[2] = {
        {std::make_unique<EmbeddingAllToAll>(comm, dev, std::vector<std::size_t>{EmbCase::rows(me)},
                                             8, 13, Pooling::Sum),
         8, 13},
        {std::make_unique<EmbeddingAllToAll>(comm, dev, std::vector<std::size_t>{EmbCase::rows(me)},
                                             3, 40, Pooling::Sum, small_tile),
         3, 40}};
    GemmCase gemm[2] = {
        {std::make_unique<GemmAllToAll>(comm, dev, 1, 8, 12, 11 * p, 11 * p), 8, 12},
        {std::make_unique<GemmAllToAll>(comm, dev, 1, 5, 70, 11 * p, 11 * p, small_tile), 5, 70}};

    // Call i: kind i % 5 (three operators, then AllReduce and All-to-Allv), mode and shape vary.
    long wrong = 0;
    double rss_warm = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (long i = 0; i < calls; ++i) {
      if (i == warmup) {
        MPI_Barrier(MPI_COMM_WORLD);
        rss_warm = rss_mb();
      }
      const long call = i / 5;
      const Mode mode = kModes[call % 3];
      const int shape = static_cast<int>((call / 3) % 2);
      switch (i % 5) {
        case 0:
          wrong += gemv[shape].run(me, p, call, mode);
          break;
        case 1:
          wrong += emb[shape].run(me, p, call, mode);
          break;
        case 2:
          wrong += gemm[shape].run(me, p, call, mode);
          break;
        case 3:
          wrong += run_allreduce(comm, call);
          break;
        default:
          wrong += run_alltoallv(comm, call);
          break;
      }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    const double rss_end = rss_mb();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (warmup >= calls) rss_warm = rss_end;
    const double growth = rss_end - rss_warm;
    std::printf(
        "soak rank %d: %ld calls in %.1f s (%.0f us/call), wrong elements %ld, VmRSS after %ld "
        "warm-up calls %.1f MB, at end %.1f MB, growth %.2f MB (limit %.0f MB)\n",
        me, calls, s, 1e6 * s / static_cast<double>(calls), wrong, warmup, rss_warm, rss_end,
        growth, max_growth);
    std::fflush(stdout);
    if (wrong != 0 || growth > max_growth) rc = 1;
  }
  MPI_Finalize();
  return rc;
}
