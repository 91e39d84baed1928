// zero_copy_perf: the fused mode of EmbeddingAllToAll or GemmAllToAll (--op) into caller-owned
// memory (on-node peers' tiles copied out of the inbox) against output() (stored straight into
// place), side by side in one run: the variants alternate call by call, so load from other jobs
// hits both alike. Each call is preceded by a barrier and timed as the slowest rank; every call's
// output is checked against the first copying call's (bitwise; the inputs do not change).
//
//   mpirun -np 2 zero_copy_perf -b 4096 --pool 2 --dim 64 --tables 4 -n 200 -w 20
//   mpirun -np 2 zero_copy_perf --op gemm_alltoall --tokens 512 --k 1024 --dim 1024 --experts 2
//     (MoE: every rank routes --tokens rows, spread evenly over every expert of the job; run() of
//     dispatched rows, or run_layer() with --layer)
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "tilecomm/tilecomm.hpp"

using namespace tilecomm;

namespace {

struct Stats {
  double median = 0, min = 0, max = 0;
};

Stats stats_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v.front(), v.back()};
}

float small_int(std::uint64_t i) {
  i = i * 6364136223846793005ull + 1442695040888963407ull;
  return static_cast<float>(static_cast<int>((i >> 33) % 5) - 2);
}

/// One operator under test: run(out) makes one fused call into `out`; view() is output() of the
/// next call; floats its output's size; what describes the shape.
struct Case {
  std::function<void(float* out)> run;
  std::function<float*()> view;
  std::size_t floats = 0;
  std::string what;
};

struct Shape {
  std::size_t batch = 4096, pool = 2, dim = 64, ntab = 4, rows = 100000;
  std::string dtype = "float32";
  std::size_t tokens = 512, k = 1024, experts = 2;
  bool layer = false;
};

// The inputs live as long as the returned Case (captured by value in shared state).
Case embedding_case(Communicator& comm, Device& dev, const Shape& s) {
  struct State {
    std::unique_ptr<EmbeddingAllToAll> op;
    std::vector<std::vector<float>> tables;
    std::vector<std::vector<bfloat16>> tables16;
    std::vector<std::vector<std::int64_t>> idx, off;
    std::vector<const float*> ptrs;
    std::vector<const bfloat16*> ptrs16;
    std::vector<EmbeddingBags> bags;
  };
  auto st = std::make_shared<State>();
  st->op = std::make_unique<EmbeddingAllToAll>(comm, dev, std::vector<std::size_t>(s.ntab, s.rows),
                                               s.dim, s.batch, Pooling::Sum);
  std::mt19937 g(1234u + comm.rank());
  st->tables.assign(s.ntab, std::vector<float>(s.rows * s.dim));
  st->tables16.resize(s.ntab);
  st->idx.resize(s.ntab);
  st->off.assign(s.ntab, std::vector<std::int64_t>(1, 0));
  for (std::size_t t = 0; t < s.ntab; ++t) {
    for (std::size_t i = 0; i < st->tables[t].size(); ++i) {
      st->tables[t][i] = small_int(i * 13 + t);
      st->tables16[t].push_back(bfloat16(st->tables[t][i]));
    }
    for (std::size_t b = 0; b < s.batch; ++b) {
      for (std::size_t j = 0; j < s.pool; ++j)
        st->idx[t].push_back(static_cast<std::int64_t>(g() % s.rows));
      st->off[t].push_back(static_cast<std::int64_t>(st->idx[t].size()));
    }
    st->ptrs.push_back(st->tables[t].data());
    st->ptrs16.push_back(st->tables16[t].data());
  }
  for (std::size_t t = 0; t < s.ntab; ++t)
    st->bags.push_back({st->idx[t], st->off[t], {}});
  const bool bf16 = s.dtype == "bfloat16";
  Case c;
  c.run = [st, bf16](float* out) {
    if (bf16)
      st->op->run(st->ptrs16, st->bags, out, Mode::Fused);
    else
      st->op->run(st->ptrs, st->bags, out, Mode::Fused);
  };
  c.view = [st] { return st->op->output().data(); };
  c.floats = st->op->local_batch() * st->op->num_tables() * s.dim;
  c.what = fmt::format("EmbeddingAllToAll fused, batch {} pool {} dim {} tables/rank {} ({})",
                       s.batch, s.pool, s.dim, s.ntab, s.dtype);
  return c;
}

Case gemm_case(Communicator& comm, Device& dev, const Shape& s) {
  const int p = comm.size();
  const std::size_t total = s.experts * p;
  // Every rank routes `tokens` rows, spread evenly over the job's experts (the first tokens % G
  // experts one more).
  auto rows_to = [&](std::size_t g) { return s.tokens / total + (g < s.tokens % total); };
  struct State {
    std::unique_ptr<GemmAllToAll> op;
    std::vector<std::size_t> recv, send;
    std::vector<float> x;
  };
  auto st = std::make_shared<State>();
  std::size_t rows_in = 0;
  const std::size_t first = s.experts * comm.rank();
  for (std::size_t e = 0; e < s.experts; ++e)
    for (int src = 0; src < p; ++src) {
      st->recv.push_back(rows_to(first + e));
      rows_in += rows_to(first + e);
    }
  for (std::size_t g = 0; g < total; ++g)
    st->send.push_back(rows_to(g));
  st->op = std::make_unique<GemmAllToAll>(comm, dev, s.experts, s.k, s.dim, rows_in, s.tokens);
  std::vector<std::vector<float>> w(s.experts, std::vector<float>(s.k * s.dim));
  std::vector<const float*> wp;
  for (std::size_t e = 0; e < s.experts; ++e) {
    for (std::size_t i = 0; i < w[e].size(); ++i)
      w[e][i] = small_int(i * 7 + first + e);
    wp.push_back(w[e].data());
  }
  st->op->set_weights(wp);  // packed once: the calls time the GEMMs and the exchange
  st->x.resize(std::max(rows_in, s.tokens) * s.k);
  for (std::size_t i = 0; i < st->x.size(); ++i)
    st->x[i] = small_int(i * 3 + comm.rank());
  Case c;
  const bool layer = s.layer;
  c.run = [st, layer](float* out) {
    if (layer)
      st->op->run_layer(st->x.data(), st->recv, st->send, out, Mode::Fused);
    else
      st->op->run(st->x.data(), st->recv, st->send, out, Mode::Fused);
  };
  c.view = [st] { return st->op->output().data(); };
  c.floats = s.tokens * s.dim;
  c.what =
      fmt::format("GemmAllToAll fused {}, {} tokens routed per rank, K {} N {}, {} experts/rank",
                  layer ? "run_layer" : "run", s.tokens, s.k, s.dim, s.experts);
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  Shape shape;
  std::string op_name = "embedding_alltoall";
  int iters = 200, warmup = 20, cus = 0, slots = 0;
  CLI::App app{"Fused all-to-all operators: copy into caller memory vs zero-copy output()"};
  app.add_option("--op", op_name, "embedding_alltoall | gemm_alltoall")
      ->check(CLI::IsMember({"embedding_alltoall", "gemm_alltoall"}));
  app.add_option("-b,--batch", shape.batch, "embedding: global batch");
  app.add_option("--pool", shape.pool, "embedding: indices per bag");
  app.add_option("--dim", shape.dim, "embedding dim / MoE N");
  app.add_option("--tables", shape.ntab, "embedding: tables per rank");
  app.add_option("--rows", shape.rows, "embedding: rows per table");
  app.add_option("--dtype", shape.dtype, "embedding table storage: float32 | bfloat16")
      ->check(CLI::IsMember({"float32", "bfloat16"}));
  app.add_option("--tokens", shape.tokens, "MoE: rows each rank routes out");
  app.add_option("--k", shape.k, "MoE: K");
  app.add_option("--experts", shape.experts, "MoE: experts per rank");
  app.add_flag("--layer", shape.layer, "MoE: run_layer (dispatch fused too) instead of run");
  app.add_option("-n,--iters", iters, "timed calls per variant");
  app.add_option("-w,--warmup", warmup, "warm-up calls per variant");
  app.add_option("--cus", cus, "compute units per rank (0: default)");
  app.add_option("--slots", slots, "WG slots per CU (0: default)");
  int rc = 0;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    rc = app.exit(e);
    MPI_Finalize();
    return rc;
  }
  try {
    Communicator comm(MPI_COMM_WORLD);
    RuntimeConfig rcfg = RuntimeConfig::from_env();
    if (cus) rcfg.num_cus = cus;
    if (slots) rcfg.wg_slots_per_cu = slots;
    Device dev(rcfg);
    const Case c =
        op_name == "gemm_alltoall" ? gemm_case(comm, dev, shape) : embedding_case(comm, dev, shape);
    const std::size_t n = c.floats;
    std::vector<float> own(n), ref;
    long long wrong = 0;
    std::vector<double> times[2];  // [0] caller-owned out (copy), [1] output() (zero-copy)
    for (int it = 0; it < warmup + iters; ++it)
      for (int zc = 0; zc < 2; ++zc) {
        float* out = zc ? c.view() : own.data();
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = MPI_Wtime();
        c.run(out);
        double dt = (MPI_Wtime() - t0) * 1e6;
        MPI_Allreduce(MPI_IN_PLACE, &dt, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (ref.empty()) ref.assign(out, out + n);
        for (std::size_t i = 0; i < n; ++i)
          wrong += out[i] != ref[i];
        if (it >= warmup) times[zc].push_back(dt);
      }
    MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (comm.rank() == 0) {
      fmt::print(
          "# {}, {} ranks ({} nodes), {} CUs x {} slots per rank, output {:.2f} MiB per rank; us "
          "per call, slowest rank, median [min, max] of {} calls\n",
          c.what, comm.size(), comm.num_nodes(), dev.num_cus(), dev.wg_slots_per_cu(),
          static_cast<double>(n) * 4 / (1 << 20), iters);
      const Stats cp = stats_of(times[0]), z = stats_of(times[1]);
      fmt::print("copy      {:.0f} [{:.0f}, {:.0f}]\nzero-copy {:.0f} [{:.0f}, {:.0f}]\n",
                 cp.median, cp.min, cp.max, z.median, z.min, z.max);
      fmt::print("zero-copy / copy (medians) {:.3f}; wrong elements {}\n", z.median / cp.median,
                 wrong);
    }
    rc = wrong != 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "zero_copy_perf: {}\n", e.what());
    rc = 2;
  }
  MPI_Finalize();
  return rc;
}
