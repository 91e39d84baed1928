// 01_dlrm_embedding: the sparse-feature layer of a DLRM-style recommender with EmbeddingAllToAll.
//
// Model parallelism for embeddings: each rank owns whole tables (different numbers of tables and
// very different row counts), looks up the bags of the *global* batch in its own tables, and an
// All-to-All gives every rank the pooled vectors of *its* slice of the batch for every table.
// EmbeddingAllToAll does both steps; its mode picks how they overlap.
//
// Per step: a fresh random batch whose indices follow a Zipf law (a few hot rows take most
// lookups, as real click logs do), one forward pass per mode, then DLRM's pairwise "interaction"
// (dot products of the pooled vectors of each sample) to show the output being used.
// Checks: sequential equals a plain C++ reference, shaped and fused equal sequential bitwise (table
// values are small integers, so every sum is exact). Exit code 1 on any mismatch.
//
//   mpirun -np 2 ./01_dlrm_embedding [--steps 16] [--batch 2048] [--dim 32] [--pool 20]
//                                    [--zipf 1.05] [--mode all|sequential|shaped|fused|auto]
#include <fmt/format.h>
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "example_util.hpp"
#include "tilecomm/tilecomm.hpp"

using namespace tilecomm;

namespace {

// The job's tables: rank r owns 2 + r % 2 of them, numbered globally in rank order (rank 0's
// first), as EmbeddingAllToAll numbers them. Row counts differ by more than 100x.
std::size_t tables_of(int rank) {
  return 2 + static_cast<std::size_t>(rank % 2);
}
std::size_t rows_of(std::size_t g) {
  constexpr std::size_t kRows[] = {60000, 2000, 30000, 500, 10000, 120000, 800, 5000};
  return kRows[g % std::size(kRows)];
}

// Table g's value at (row, col): a small integer in [-2, 2], so pooled sums stay exact in float.
// Any rank can compute any table's value, which is what makes the reference check possible.
float table_value(std::size_t g, std::size_t row, std::size_t col) {
  std::uint64_t h = (g * 1000003u + row) * 131u + col;
  h = h * 6364136223846793005ull + 1442695040888963407ull;
  return static_cast<float>(static_cast<int>((h >> 33) % 5) - 2);
}

// Zipf(s) over n ranks by inverse CDF. Rank k is mapped to row (k * 7919) % n, so the hot rows are
// scattered over the table as hashed ids would be (7919 is prime: the map is a permutation).
class Zipf {
 public:
  Zipf(std::size_t n, double s) : cdf_(n) {
    double acc = 0;
    for (std::size_t k = 0; k < n; ++k)
      cdf_[k] = acc += 1.0 / std::pow(double(k + 1), s);
    for (double& c : cdf_)
      c /= acc;
  }
  std::size_t rank(std::mt19937_64& rng) const {
    const double u = std::uniform_real_distribution<double>(0, 1)(rng);
    return std::min<std::size_t>(std::lower_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin(),
                                 cdf_.size() - 1);
  }
  std::size_t row(std::size_t rank) const { return (rank * 7919) % cdf_.size(); }

 private:
  std::vector<double> cdf_;
};

// The bags of one table over the global batch, in CSR form (indices + offsets).
struct Bags {
  std::vector<std::int64_t> indices, offsets{0};
  std::size_t hot = 0;  // lookups that hit the 1% hottest rows (for the report)
};

// Bag sizes are uniform in [1, 2*pool-1]; indices Zipf. Seeded by (seed, step, table): every rank
// draws the same bags for a table, whichever rank owns it.
Bags make_bags(const Zipf& zipf, std::size_t g, std::size_t batch, std::size_t pool,
               std::uint64_t seed, int step) {
  std::mt19937_64 rng(seed * 1000003u + std::uint64_t(step) * 1009u + g);
  Bags b;
  const std::size_t rows = rows_of(g);
  for (std::size_t bag = 0; bag < batch; ++bag) {
    const std::size_t len = 1 + rng() % (2 * pool - 1);
    for (std::size_t j = 0; j < len; ++j) {
      const std::size_t r = zipf.rank(rng);
      b.hot += r < std::max<std::size_t>(1, rows / 100);
      b.indices.push_back(static_cast<std::int64_t>(zipf.row(r)));
    }
    b.offsets.push_back(static_cast<std::int64_t>(b.indices.size()));
  }
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);  // tilecomm needs MULTIPLE
  int steps = 16;
  std::size_t batch = 2048, dim = 32, pool = 20;
  double zipf_s = 1.05;
  std::uint64_t seed = 42;
  std::string mode_flag = "all";
  CLI::App app{"DLRM-style sparse features: EmbeddingAllToAll over Zipf-distributed bags"};
  app.add_option("--steps", steps, "forward passes (the first one is not timed)")
      ->check(CLI::Range(2, 10000));
  app.add_option("--batch", batch, "global batch (bags per table)")->check(CLI::PositiveNumber);
  app.add_option("--dim", dim, "embedding dimension")->check(CLI::PositiveNumber);
  app.add_option("--pool", pool, "mean lookups per bag")->check(CLI::PositiveNumber);
  app.add_option("--zipf", zipf_s, "Zipf exponent of the index distribution");
  app.add_option("--seed", seed, "RNG seed");
  app.add_option("--mode", mode_flag, "all | sequential | shaped | fused | auto");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    MPI_Finalize();
    return rc;
  }

  int rc = 0;
  try {
    Communicator comm(MPI_COMM_WORLD);  // collective; duplicates MPI_COMM_WORLD
    Device device;                      // CUs and slots from TILECOMM_* (RuntimeConfig::from_env)
    const int me = comm.rank(), ranks = comm.size();
    const auto modes = examples::modes_to_run(mode_flag);

    // The global table layout, and this rank's tables (values fixed for the whole run).
    std::vector<std::size_t> first(ranks + 1, 0);
    for (int r = 0; r < ranks; ++r)
      first[r + 1] = first[r] + tables_of(r);
    const std::size_t num_tables = first[ranks];
    std::vector<std::size_t> my_rows;
    std::vector<std::vector<float>> my_tables;
    for (std::size_t g = first[me]; g < first[me + 1]; ++g) {
      my_rows.push_back(rows_of(g));
      my_tables.emplace_back(rows_of(g) * dim);
      for (std::size_t i = 0; i < rows_of(g); ++i)
        for (std::size_t c = 0; c < dim; ++c)
          my_tables.back()[i * dim + c] = table_value(g, i, c);
    }
    std::vector<const float*> table_ptrs;
    for (const auto& t : my_tables)
      table_ptrs.push_back(t.data());

    // One context for this shape (table sizes, dim, batch, pooling): created once, used each step.
    EmbeddingAllToAll op(comm, device, my_rows, dim, batch, Pooling::Sum);
    const std::size_t local_batch = op.local_batch(), out_elems = local_batch * num_tables * dim;
    std::vector<Zipf> zipf;
    for (std::size_t g = 0; g < num_tables; ++g)
      zipf.emplace_back(rows_of(g), zipf_s);

    if (me == 0) {
      fmt::print("01_dlrm_embedding: {} ranks, {} CUs x {} slots each; {} tables (rows:", ranks,
                 device.num_cus(), device.wg_slots_per_cu(), num_tables);
      for (std::size_t g = 0; g < num_tables; ++g)
        fmt::print(" {}", rows_of(g));
      fmt::print("), dim {}, global batch {}, ~{} lookups/bag, Zipf s={}\n", dim, batch, pool,
                 zipf_s);
    }

    std::vector<double> ms[examples::kModeSlots];
    long long wrong_ref = 0, wrong_modes = 0;
    double interaction_sum = 0, hot_share = 0;
    for (int step = 0; step < steps; ++step) {
      // This step's bags for every table (all ranks need them all for the reference check).
      std::vector<Bags> bags;
      std::size_t hot = 0, lookups = 0;
      for (std::size_t g = 0; g < num_tables; ++g) {
        bags.push_back(make_bags(zipf[g], g, batch, pool, seed, step));
        hot += bags.back().hot;
        lookups += bags.back().indices.size();
      }
      hot_share = double(hot) / double(lookups);
      // The operator takes, per local table, spans over that table's bags (no weights: all 1).
      std::vector<EmbeddingBags> my_bags;
      for (std::size_t g = first[me]; g < first[me + 1]; ++g)
        my_bags.push_back({bags[g].indices, bags[g].offsets, {}});

      // Forward pass in each mode. out is [local_batch x num_tables x dim].
      std::vector<float> out[examples::kModeSlots];
      for (Mode m : examples::in_turn(modes, step)) {
        out[int(m)].assign(out_elems, -777.0f);
        const double t =
            examples::timed_ms([&] { op.run(table_ptrs, my_bags, out[int(m)].data(), m); });
        if (step > 0) ms[int(m)].push_back(t);  // step 0 warms up caches and is not timed
      }

      // Reference for this rank's slice: plain loops over the (deterministic) tables.
      const std::vector<float>& seq = out[int(Mode::Sequential)];
      for (std::size_t b = 0; b < local_batch; ++b)
        for (std::size_t g = 0; g < num_tables; ++g) {
          const std::size_t bag = op.batch_begin() + b;
          for (std::size_t c = 0; c < dim; ++c) {
            float acc = 0;
            for (auto j = bags[g].offsets[bag]; j < bags[g].offsets[bag + 1]; ++j)
              acc += table_value(g, std::size_t(bags[g].indices[j]), c);
            wrong_ref += seq[(b * num_tables + g) * dim + c] != acc;
          }
        }
      for (Mode m : modes)
        if (m != Mode::Sequential) wrong_modes += examples::count_wrong(out[int(m)], seq);

      // DLRM interaction: for each sample, the dot product of every pair of its pooled vectors.
      // (A top MLP would take these features; here they are summed into a checksum.)
      for (std::size_t b = 0; b < local_batch; ++b)
        for (std::size_t t = 0; t < num_tables; ++t)
          for (std::size_t u = t + 1; u < num_tables; ++u) {
            const float* vt = &seq[(b * num_tables + t) * dim];
            const float* vu = &seq[(b * num_tables + u) * dim];
            double dot = 0;
            for (std::size_t c = 0; c < dim; ++c)
              dot += double(vt[c]) * vu[c];
            interaction_sum += dot;
          }
    }

    wrong_ref = examples::sum_over_ranks(wrong_ref);
    wrong_modes = examples::sum_over_ranks(wrong_modes);
    MPI_Allreduce(MPI_IN_PLACE, &interaction_sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    if (me == 0) {
      fmt::print("  last step: {:.1f}% of lookups hit the 1% hottest rows of their table\n",
                 100 * hot_share);
      examples::print_times("step", mode_flag, ms);
      if (mode_flag == "auto") fmt::print("  {}\n", examples::auto_state(op.auto_choice()));
      fmt::print("  interaction checksum (sum of pairwise dots, all steps): {:.0f}\n",
                 interaction_sum);
      fmt::print("  check: sequential vs reference {} wrong, other modes vs sequential {} wrong\n",
                 wrong_ref, wrong_modes);
      fmt::print("{}\n", wrong_ref + wrong_modes == 0 ? "PASSED" : "FAILED");
    }
    rc = wrong_ref + wrong_modes == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    // A tilecomm error is normally raised on every rank; abort anyway so that a rank-local
    // failure cannot leave the other ranks waiting.
    fmt::print(stderr, "01_dlrm_embedding: {}\n", e.what());
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  MPI_Finalize();
  return rc;
}
