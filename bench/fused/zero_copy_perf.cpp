// zero_copy_perf: EmbeddingAllToAll's fused mode into caller-owned memory (on-node peers' tiles
// copied out of the inbox) against output() (stored straight into it), side by side in one run:
// the variants alternate call by call, so load from other jobs hits both alike. Tables float32 or
// bfloat16 (--dtype). Each call is preceded by a barrier and timed as the slowest rank; every
// call's output is checked against the first copying call's (bitwise; the inputs do not change).
//
//   mpirun -np 2 zero_copy_perf -b 4096 --pool 2 --dim 64 --tables 4 -n 200 -w 20
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstring>
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

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  std::size_t batch = 4096, pool = 2, dim = 64, ntab = 4, rows = 100000;
  int iters = 200, warmup = 20, cus = 0, slots = 0;
  std::string dtype = "float32";
  CLI::App app{"EmbeddingAllToAll fused: copy into caller memory vs zero-copy output()"};
  app.add_option("-b,--batch", batch, "global batch");
  app.add_option("--pool", pool, "indices per bag");
  app.add_option("--dim", dim, "embedding dim");
  app.add_option("--tables", ntab, "tables per rank");
  app.add_option("--rows", rows, "rows per table");
  app.add_option("--dtype", dtype, "table storage: float32 | bfloat16")
      ->check(CLI::IsMember({"float32", "bfloat16"}));
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
    EmbeddingAllToAll op(comm, dev, std::vector<std::size_t>(ntab, rows), dim, batch, Pooling::Sum);
    std::mt19937 g(1234u + comm.rank());
    std::vector<std::vector<float>> tables(ntab, std::vector<float>(rows * dim));
    std::vector<std::vector<bfloat16>> tables16(ntab);
    std::vector<std::vector<std::int64_t>> idx(ntab), off(ntab, std::vector<std::int64_t>(1, 0));
    std::vector<const float*> ptrs;
    std::vector<const bfloat16*> ptrs16;
    std::vector<EmbeddingBags> bags;
    for (std::size_t t = 0; t < ntab; ++t) {
      for (std::size_t i = 0; i < tables[t].size(); ++i) {
        tables[t][i] = small_int(i * 13 + t);
        tables16[t].push_back(bfloat16(tables[t][i]));
      }
      for (std::size_t b = 0; b < batch; ++b) {
        for (std::size_t j = 0; j < pool; ++j)
          idx[t].push_back(static_cast<std::int64_t>(g() % rows));
        off[t].push_back(static_cast<std::int64_t>(idx[t].size()));
      }
      ptrs.push_back(tables[t].data());
      ptrs16.push_back(tables16[t].data());
    }
    for (std::size_t t = 0; t < ntab; ++t)
      bags.push_back({idx[t], off[t], {}});
    const std::size_t n = op.local_batch() * op.num_tables() * dim;
    std::vector<float> own(n), ref;
    long long wrong = 0;
    std::vector<double> times[2];  // [0] caller-owned out (copy), [1] output() (zero-copy)
    for (int it = 0; it < warmup + iters; ++it)
      for (int zc = 0; zc < 2; ++zc) {
        float* out = zc ? op.output().data() : own.data();
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = MPI_Wtime();
        if (dtype == "bfloat16")
          op.run(ptrs16, bags, out, Mode::Fused);
        else
          op.run(ptrs, bags, out, Mode::Fused);
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
          "# EmbeddingAllToAll fused, {} ranks ({} nodes), {} CUs x {} slots per rank, batch {} "
          "pool {} dim {} tables/rank {} ({}), output {:.2f} MiB per rank; us per call, slowest "
          "rank, median [min, max] of {} calls\n",
          comm.size(), comm.num_nodes(), dev.num_cus(), dev.wg_slots_per_cu(), batch, pool, dim,
          ntab, dtype, static_cast<double>(n) * 4 / (1 << 20), iters);
      const Stats c = stats_of(times[0]), z = stats_of(times[1]);
      fmt::print("copy      {:.0f} [{:.0f}, {:.0f}]\nzero-copy {:.0f} [{:.0f}, {:.0f}]\n", c.median,
                 c.min, c.max, z.median, z.min, z.max);
      fmt::print("zero-copy / copy (medians) {:.3f}; wrong elements {}\n", z.median / c.median,
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
