// 03_moe_layer: a mixture-of-experts layer, expert-parallel, with top-1 and top-2 routing.
//
// Every rank holds --experts experts (global id g lives on rank g / experts) and --tokens tokens.
// A layer is:
//   1. gate:     each token picks k distinct experts with gate weights; the gate is skewed (Zipf),
//                so a few experts -- and the ranks that hold them -- get most of the tokens;
//   2. dispatch: token rows are sorted by expert and sent to the experts' ranks with
//                tilecomm::alltoallv (after a tilecomm::alltoall of the per-expert row counts);
//   3. experts:  GemmAllToAll multiplies each received row by its expert's W_g [K x N] and returns
//                every result row to the rank and position it came from -- the GEMM and the return
//                All-to-Allv are what the modes overlap;
//   4. combine:  each token's output is the gate-weighted sum of its k expert results.
// Each step also runs the layer with steps 2-3 as one GemmAllToAll::run_layer call on the dispatch
// buffer ("run_layer" lines): in fused mode each expert's GEMM tiles start as their rows arrive,
// so the dispatch overlaps compute too (and the regroup copy is gone).
// Checks: sequential equals a plain C++ reference (every expert's weights are a known function of
// its id), shaped and fused equal sequential bitwise (small integers and gate weights in eighths:
// every sum is exact). Exit code 1 on any mismatch.
//
//   mpirun -np 2 ./03_moe_layer [--steps 16] [--tokens 256] [--k-dim 128] [--n-dim 128]
//                               [--experts 2] [--skew 1.2] [--mode
//                               all|sequential|shaped|fused|auto] [--zero-copy]
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "example_util.hpp"
#include "tilecomm/tilecomm.hpp"

using namespace tilecomm;

namespace {

float hash_int(std::uint64_t h) {  // a small integer in [-2, 2]
  h = h * 6364136223846793005ull + 1442695040888963407ull;
  return static_cast<float>(static_cast<int>((h >> 33) % 5) - 2);
}
float expert_weight(std::size_t g, std::size_t kk, std::size_t n) {  // W_g[kk][n]
  return hash_int((g * 7919 + kk) * 65537 + n);
}

// The routing of this rank's tokens: expert[t * k + j] with gate weight gate[t * k + j].
struct Routing {
  std::vector<std::size_t> expert;
  std::vector<float> gate;
};

// A skewed gate: experts drawn from Zipf(skew) over the global ids, k distinct per token. Weights
// are multiples of 1/8 (exact): top-1 keeps p in [4/8, 7/8], top-2 splits 1 into p and 1 - p.
Routing route(std::size_t tokens, std::size_t k, std::size_t experts, double skew,
              std::mt19937_64& rng) {
  std::vector<double> zipf(experts);
  for (std::size_t g = 0; g < experts; ++g)
    zipf[g] = 1.0 / std::pow(double(g + 1), skew);
  std::discrete_distribution<std::size_t> pick(zipf.begin(), zipf.end());
  Routing r;
  for (std::size_t t = 0; t < tokens; ++t) {
    const std::size_t first = pick(rng);
    std::size_t second = first;
    while (k == 2 && second == first)
      second = pick(rng);
    const float p = float(4 + rng() % 4) / 8.0f;
    r.expert.push_back(first);
    r.gate.push_back(p);
    if (k == 2) {
      r.expert.push_back(second);
      r.gate.push_back(1.0f - p);
    }
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);  // tilecomm needs MULTIPLE
  int steps = 16;
  std::size_t tokens = 256, kdim = 128, ndim = 128, experts = 2;
  double skew = 1.2;
  std::uint64_t seed = 7;
  std::string mode_flag = "all";
  CLI::App app{"Mixture of experts: alltoallv dispatch, GemmAllToAll, combine; top-1 and top-2"};
  app.add_option("--steps", steps, "layer calls per routing (the first is not timed)")
      ->check(CLI::Range(2, 10000));
  app.add_option("--tokens", tokens, "tokens per rank")->check(CLI::PositiveNumber);
  app.add_option("--k-dim", kdim, "token width K")->check(CLI::PositiveNumber);
  app.add_option("--n-dim", ndim, "expert output width N")->check(CLI::PositiveNumber);
  app.add_option("--experts", experts, "experts per rank")->check(CLI::Range(1, 64));
  app.add_option("--skew", skew, "Zipf exponent of the gate (0: uniform)");
  app.add_option("--seed", seed, "RNG seed");
  app.add_option("--mode", mode_flag, "all | sequential | shaped | fused | auto");
  bool zero_copy = false;
  app.add_flag("--zero-copy", zero_copy,
               "fused mode returns the results into GemmAllToAll::output() (on-node owners store "
               "them in place: no copy) instead of a caller-owned buffer");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    MPI_Finalize();
    return rc;
  }

  int rc = 0;
  try {
    Communicator comm(MPI_COMM_WORLD);
    Device device;  // CUs and slots from TILECOMM_* (RuntimeConfig::from_env)
    const int me = comm.rank(), ranks = comm.size();
    const std::size_t P = static_cast<std::size_t>(ranks), E = experts, G = E * P;
    const auto modes = examples::modes_to_run(mode_flag);

    // This rank's experts' weights, and one context for the shape. Buffers are sized for top-2:
    // this rank routes out at most 2 rows per token, and receives at most that from every rank.
    std::vector<std::vector<float>> w(E, std::vector<float>(kdim * ndim));
    std::vector<const float*> w_ptrs;
    for (std::size_t e = 0; e < E; ++e) {
      for (std::size_t i = 0; i < kdim * ndim; ++i)
        w[e][i] = expert_weight(me * E + e, i / ndim, i % ndim);
      w_ptrs.push_back(w[e].data());
    }
    GemmAllToAll op(comm, device, E, kdim, ndim, 2 * tokens * P, 2 * tokens);
    op.set_weights(w_ptrs);  // fixed weights: packed once, not on every call

    if (me == 0)
      fmt::print(
          "03_moe_layer: {} ranks, {} CUs x {} slots each; {} experts ({} per rank), "
          "{} tokens/rank, K={} N={}, gate Zipf s={}\n",
          ranks, device.num_cus(), device.wg_slots_per_cu(), G, E, tokens, kdim, ndim, skew);

    long long wrong_ref = 0, wrong_modes = 0;
    for (std::size_t k : {1, 2}) {
      std::vector<double> ms[examples::kModeSlots],
          op_ms[examples::kModeSlots],    // whole layer; GemmAllToAll::run alone
          one_ms[examples::kModeSlots];   // whole layer with GemmAllToAll::run_layer
      std::vector<long long> load(G, 0);  // rows each expert received over the run (report)
      for (int step = 0; step < steps; ++step) {
        // 1. Gate. Token features and routing are seeded per (seed, k, step, rank).
        std::mt19937_64 rng(seed * 1000003u + k * 10007u + std::uint64_t(step) * 101u + me);
        std::vector<float> tok(tokens * kdim);
        for (auto& v : tok)
          v = hash_int(rng());
        const Routing r = route(tokens, k, G, skew, rng);

        // The dispatch buffer groups rows by global expert, in token order within an expert;
        // row_of[t * k + j] is where token t's j-th choice sits (its result comes back there).
        std::vector<std::size_t> send_counts(G, 0), row_of(tokens * k);
        for (std::size_t g : r.expert)
          ++send_counts[g];
        std::vector<std::size_t> next(G, 0);
        std::exclusive_scan(send_counts.begin(), send_counts.end(), next.begin(), std::size_t{0});
        std::vector<float> dispatch(tokens * k * kdim);
        for (std::size_t i = 0; i < tokens * k; ++i) {
          row_of[i] = next[r.expert[i]]++;
          std::copy_n(&tok[(i / k) * kdim], kdim, &dispatch[row_of[i] * kdim]);
        }

        // One MoE layer in `mode`; returns this rank's combined outputs [tokens x N].
        std::vector<std::size_t> recv_counts(E * P);
        double op_ms_now = 0;  // this rank's time in GemmAllToAll::run during the last layer()
        // `one_call`: steps 2b and 3 are one GemmAllToAll::run_layer call on the dispatch buffer
        // (dispatch, expert GEMMs and return; fused mode starts each expert's tiles as their rows
        // arrive) instead of alltoallv + regroup + run.
        auto layer = [&](Mode mode, std::vector<float>& y, bool one_call) {
          // 2a. Row counts: block p of `counts` = rows for rank p's experts (E entries).
          std::vector<std::int64_t> counts(G), incoming(G);
          for (std::size_t g = 0; g < G; ++g)
            counts[g] = std::int64_t(send_counts[g]);
          alltoall(comm, counts.data(), incoming.data(), E, DataType::Int64);
          // incoming[s * E + e]: rows rank s sends to local expert e.
          VarLayout out_l, in_l;
          for (std::size_t p = 0, o = 0, i = 0; p < P; ++p) {
            std::size_t n_out = 0, n_in = 0;
            for (std::size_t e = 0; e < E; ++e) {
              n_out += send_counts[p * E + e] * kdim;
              n_in += std::size_t(incoming[p * E + e]) * kdim;
              recv_counts[e * P + p] = std::size_t(incoming[p * E + e]);
            }
            out_l.counts.push_back(n_out), out_l.displs.push_back(o), o += n_out;
            in_l.counts.push_back(n_in), in_l.displs.push_back(i), i += n_in;
            out_l.capacity = o, in_l.capacity = i;
          }
          // The returned rows: a caller-owned buffer, or (--zero-copy, fused mode) the context's
          // output() view, read by combine() before the context's next call.
          std::vector<float> own;
          float* back = nullptr;
          if (zero_copy && mode == Mode::Fused) {
            back = op.output().data();
          } else {
            own.resize(tokens * k * ndim);
            back = own.data();
          }
          auto combine = [&] {  // 4. Combine: gate-weighted sum of each token's k results.
            y.assign(tokens * ndim, 0.0f);
            for (std::size_t i = 0; i < tokens * k; ++i)
              for (std::size_t n = 0; n < ndim; ++n)
                y[(i / k) * ndim + n] += r.gate[i] * back[row_of[i] * ndim + n];
          };
          if (one_call) {
            op.run_layer(dispatch.data(), recv_counts, send_counts, back, mode);
            combine();
            return;
          }
          // 2b. Token rows. They arrive grouped by source rank, then expert; GemmAllToAll wants
          // them grouped by expert, then source: regroup (the usual "permute" step of MoE).
          std::vector<float> arrived(in_l.capacity), x(in_l.capacity);
          alltoallv(comm, dispatch.data(), out_l, arrived.data(), in_l, DataType::Float32);
          std::size_t at = 0;
          for (std::size_t e = 0; e < E; ++e)
            for (std::size_t s = 0; s < P; ++s) {
              std::size_t from = in_l.displs[s];
              for (std::size_t e2 = 0; e2 < e; ++e2)
                from += recv_counts[e2 * P + s] * kdim;
              const std::size_t n = recv_counts[e * P + s] * kdim;
              std::copy_n(&arrived[from], n, &x[at]);
              at += n;
            }
          // 3. Expert GEMMs + return of the results to their tokens' ranks (dispatch order).
          const double t0 = MPI_Wtime();
          op.run(x.data(), recv_counts, send_counts, back, mode);
          op_ms_now = (MPI_Wtime() - t0) * 1e3;
          combine();
        };

        std::vector<float> y[examples::kModeSlots], y_one[examples::kModeSlots];
        for (Mode m : examples::in_turn(modes, step)) {
          const double t = examples::timed_ms([&] { layer(m, y[int(m)], false); });
          MPI_Allreduce(MPI_IN_PLACE, &op_ms_now, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
          const double t_one = examples::timed_ms([&] { layer(m, y_one[int(m)], true); });
          if (step > 0) {  // the first call warms up and is not timed
            ms[int(m)].push_back(t);
            op_ms[int(m)].push_back(op_ms_now);
            one_ms[int(m)].push_back(t_one);
          }
        }
        for (std::size_t e = 0; e < E; ++e)
          for (std::size_t s = 0; s < P; ++s)
            load[me * E + e] += recv_counts[e * P + s];

        // Reference: each token's gate-weighted expert products, with plain loops.
        const auto& seq = y[int(Mode::Sequential)];
        for (std::size_t t = 0; t < tokens; ++t)
          for (std::size_t n = 0; n < ndim; ++n) {
            float want = 0.0f;
            for (std::size_t j = 0; j < k; ++j) {
              float dot = 0.0f;
              for (std::size_t kk = 0; kk < kdim; ++kk)
                dot += tok[t * kdim + kk] * expert_weight(r.expert[t * k + j], kk, n);
              want += r.gate[t * k + j] * dot;
            }
            wrong_ref += seq[t * ndim + n] != want;
          }
        for (Mode m : modes) {
          if (m != Mode::Sequential) wrong_modes += examples::count_wrong(y[int(m)], seq);
          wrong_modes += examples::count_wrong(y_one[int(m)], seq);
        }
      }

      MPI_Allreduce(MPI_IN_PLACE, load.data(), int(G), MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
      if (me == 0) {
        const double mean = double(std::accumulate(load.begin(), load.end(), 0LL)) / double(G);
        std::vector<long long> per_layer(G);
        for (std::size_t g = 0; g < G; ++g)
          per_layer[g] = load[g] / steps;
        fmt::print(" top-{}: rows per expert per layer: {} (busiest {:.2f}x the mean)\n", k,
                   fmt::join(per_layer, " "),
                   double(*std::max_element(load.begin(), load.end())) / mean);
        examples::print_times("layer  ", mode_flag, ms);
        examples::print_times("experts", mode_flag, op_ms);
        examples::print_times("run_layer", mode_flag, one_ms);
        if (mode_flag == "auto")
          fmt::print("  {} (run); run_layer: {}\n", examples::auto_state(op.auto_choice()),
                     examples::auto_state(op.layer_auto_choice()));
      }
    }

    wrong_ref = examples::sum_over_ranks(wrong_ref);
    wrong_modes = examples::sum_over_ranks(wrong_modes);
    if (me == 0) {
      fmt::print("  check: sequential vs reference {} wrong, other modes vs sequential {} wrong\n",
                 wrong_ref, wrong_modes);
      fmt::print("{}\n", wrong_ref + wrong_modes == 0 ? "PASSED" : "FAILED");
    }
    rc = wrong_ref + wrong_modes == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    // Abort so that a failure on one rank cannot leave the others waiting.
    fmt::print(stderr, "03_moe_layer: {}\n", e.what());
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  MPI_Finalize();
  return rc;
}
