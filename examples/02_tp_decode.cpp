// 02_tp_decode: token-by-token decoding through tensor-parallel MLP blocks with GemvAllReduce.
//
// Decoding one token is a chain of matrix-vector products. With tensor parallelism each rank
// holds a K-slice (a block of columns) of every weight, W_r [M x K_r], and the matching slice of
// the input vector x_r; y = sum over ranks of W_r x_r is a GEMV followed by an AllReduce, which
// GemvAllReduce fuses. Every rank then has the whole y, applies a cheap elementwise activation and
// keeps its own slice as the next layer's input -- no other communication is needed.
//
// The model: --blocks MLP blocks, each an up-projection (hidden -> ffn) and a down-projection
// (ffn -> hidden). There are two layer shapes, so two contexts ("one context per shape"); every
// layer of a shape reuses its context with its own weights. The next token is the index of the
// largest output (a greedy pick), so the output drives the next step.
// Checks: sequential equals a plain C++ reference for the first token; shaped and fused equal
// sequential bitwise at every layer of every token (integer data: every sum is exact).
// Also timed per token: the layers' AllReduces alone ("allreduce only"), the most that overlapping
// them with the GEMVs could save; the last line says how much of it fused mode saved.
//
//   mpirun -np 2 ./02_tp_decode [--tokens 16] [--hidden 1024] [--ffn 4096] [--blocks 2]
//                               [--mode all|sequential|shaped|fused|auto]
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <vector>

#include "example_util.hpp"
#include "tilecomm/tilecomm.hpp"

using namespace tilecomm;

namespace {

// Contiguous slice [begin, begin + size) of n columns for `rank`; the first n % ranks ranks get one
// more, so K_r may differ between ranks (GemvAllReduce allows that, even K_r = 0).
struct Slice {
  std::size_t begin, size;
};
Slice slice_of(std::size_t n, int rank, int ranks) {
  const std::size_t base = n / ranks, extra = n % ranks, r = static_cast<std::size_t>(rank);
  return {r * base + std::min(r, extra), base + (r < extra)};
}

// Small-integer data, so every product and sum below is exact in float32.
float hash_int(std::uint64_t h, int lo, int hi) {
  h = h * 6364136223846793005ull + 1442695040888963407ull;
  return static_cast<float>(lo + static_cast<int>((h >> 33) % std::uint64_t(hi - lo + 1)));
}
float weight(std::size_t layer, std::size_t row, std::size_t col) {  // W_layer[row][col]
  return hash_int((layer * 7919 + row) * 65537 + col, -2, 2);
}
float embedding(std::size_t token, std::size_t i) {
  return hash_int(token * 104729 + i, -1, 2);
}

// The activation: a scaled, clipped leaky ReLU with integer outputs (a stand-in for a quantized
// GELU: large negative inputs give -1, the positive range is clipped like ReLU6).
float act(float v) {
  return std::clamp(std::floor(v / 8.0f), -1.0f, 6.0f);
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);  // tilecomm needs MULTIPLE
  int tokens = 16, blocks = 2;
  std::size_t hidden = 1024, ffn = 4096;
  std::string mode_flag = "all";
  CLI::App app{"Tensor-parallel decoding: GemvAllReduce per layer, per-token latency per mode"};
  app.add_option("--tokens", tokens, "tokens to decode (the first one is not timed)")
      ->check(CLI::Range(2, 100000));
  app.add_option("--hidden", hidden, "model width")->check(CLI::PositiveNumber);
  app.add_option("--ffn", ffn, "MLP inner width")->check(CLI::PositiveNumber);
  app.add_option("--blocks", blocks, "MLP blocks (2 layers each)")->check(CLI::Range(1, 64));
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
    Communicator comm(MPI_COMM_WORLD);
    Device device;  // CUs and slots from TILECOMM_* (RuntimeConfig::from_env)
    const int me = comm.rank(), ranks = comm.size();
    const auto modes = examples::modes_to_run(mode_flag);
    const std::size_t layers = 2 * static_cast<std::size_t>(blocks);

    // Layer l maps in_dim(l) -> out_dim(l): even layers go up (hidden -> ffn), odd ones down.
    auto in_dim = [&](std::size_t l) { return l % 2 == 0 ? hidden : ffn; };
    auto out_dim = [&](std::size_t l) { return l % 2 == 0 ? ffn : hidden; };

    // This rank's weights: W_l restricted to its column slice, stored [M x K_r] row-major.
    std::vector<std::vector<float>> w(layers);
    for (std::size_t l = 0; l < layers; ++l) {
      const Slice s = slice_of(in_dim(l), me, ranks);
      w[l].resize(out_dim(l) * s.size);
      for (std::size_t i = 0; i < out_dim(l); ++i)
        for (std::size_t j = 0; j < s.size; ++j)
          w[l][i * s.size + j] = weight(l, i, s.begin + j);
    }
    // One context per layer shape: M and this rank's K_r.
    GemvAllReduce up(comm, device, ffn, slice_of(hidden, me, ranks).size);
    GemvAllReduce down(comm, device, hidden, slice_of(ffn, me, ranks).size);

    // One token through every layer in `mode`. Returns each layer's full output (all ranks).
    auto decode = [&](std::size_t token, Mode mode) {
      std::vector<std::vector<float>> ys(layers);
      std::vector<float> full(hidden);  // the full input vector of the current layer
      for (std::size_t i = 0; i < hidden; ++i)
        full[i] = embedding(token, i);
      for (std::size_t l = 0; l < layers; ++l) {
        const Slice s = slice_of(in_dim(l), me, ranks);
        std::vector<float> x(full.begin() + s.begin, full.begin() + s.begin + s.size);
        ys[l].resize(out_dim(l));
        (l % 2 == 0 ? up : down).run(w[l].data(), x.data(), ys[l].data(), mode);
        full.resize(out_dim(l));
        std::transform(ys[l].begin(), ys[l].end(), full.begin(), act);
      }
      return ys;
    };

    if (me == 0)
      fmt::print(
          "02_tp_decode: {} ranks, {} CUs x {} slots each; {} layers ({} x [{} -> {} -> {}])"
          ", {} tokens; rank 0 holds K slices {} / {}\n",
          ranks, device.num_cus(), device.wg_slots_per_cu(), layers, blocks, hidden, ffn, hidden,
          tokens, slice_of(hidden, 0, ranks).size, slice_of(ffn, 0, ranks).size);

    // The communication of a token alone: each layer's AllReduce of M floats as the sequential
    // mode runs it (the canonical order). Fusion can save at most this much per token.
    std::vector<float> comm_in(std::max(hidden, ffn), 1.0f), comm_out(comm_in.size());
    auto comm_only = [&] {
      for (std::size_t l = 0; l < layers; ++l)
        allreduce(comm, comm_in.data(), comm_out.data(), out_dim(l), DataType::Float32,
                  ReduceOp::Sum, {"", ReduceOrder::Canonical});
    };
    std::vector<double> comm_ms;

    std::vector<double> ms[examples::kModeSlots];
    long long wrong_ref = 0, wrong_modes = 0;
    std::vector<std::size_t> generated;
    std::size_t token = 1;  // the "prompt"
    for (int step = 0; step < tokens; ++step) {
      std::vector<std::vector<float>> ys[examples::kModeSlots];
      for (Mode m : examples::in_turn(modes, step)) {
        const double t = examples::timed_ms([&] { ys[int(m)] = decode(token, m); });
        if (step > 0) ms[int(m)].push_back(t);  // the first token warms up and is not timed
      }
      const double t_comm = examples::timed_ms(comm_only);
      if (step > 0) comm_ms.push_back(t_comm);
      const auto& seq = ys[int(Mode::Sequential)];
      for (Mode m : modes)
        for (std::size_t l = 0; m != Mode::Sequential && l < layers; ++l)
          wrong_modes += examples::count_wrong(ys[int(m)][l], seq[l]);

      if (step == 0) {
        // Reference: the whole model on one rank with plain loops (every column of every W).
        std::vector<float> full(hidden);
        for (std::size_t i = 0; i < hidden; ++i)
          full[i] = embedding(token, i);
        for (std::size_t l = 0; l < layers; ++l) {
          std::vector<float> y(out_dim(l), 0.0f);
          for (std::size_t i = 0; i < out_dim(l); ++i)
            for (std::size_t j = 0; j < in_dim(l); ++j)
              y[i] += weight(l, i, j) * full[j];
          wrong_ref += examples::count_wrong(seq[l], y);
          full.resize(out_dim(l));
          std::transform(y.begin(), y.end(), full.begin(), act);
        }
      }
      // Greedy pick: the next token is the index of the largest final output (first on ties).
      const auto& last = seq.back();
      token = static_cast<std::size_t>(std::max_element(last.begin(), last.end()) - last.begin());
      generated.push_back(token);
    }

    wrong_ref = examples::sum_over_ranks(wrong_ref);
    wrong_modes = examples::sum_over_ranks(wrong_modes);
    if (me == 0) {
      fmt::print("  generated tokens: {}\n", fmt::join(generated, " "));
      examples::print_times("token", mode_flag, ms);
      if (mode_flag == "auto")
        fmt::print("  up-projections: {}; down-projections: {}\n",
                   examples::auto_state(up.auto_choice()),
                   examples::auto_state(down.auto_choice()));
      const examples::Spread c = examples::spread(comm_ms);
      fmt::print(
          "  allreduce only   median {:8.3f} ms  (the token's communication; range {:.3f}-{:.3f} "
          "ms)\n",
          c.median, c.min, c.max);
      const double seq = examples::median(ms[int(Mode::Sequential)]);
      if (c.median < 0.05 * seq)
        fmt::print("  communication is {:.1f} % of a sequential token: too little to recover\n",
                   100.0 * c.median / seq);
      else if (!ms[int(Mode::Fused)].empty())
        fmt::print("  fused saves {:.3f} ms per token = {:.0f} % of the communication (medians)\n",
                   seq - examples::median(ms[int(Mode::Fused)]),
                   100.0 * (seq - examples::median(ms[int(Mode::Fused)])) / c.median);
      fmt::print(
          "  check: sequential vs reference (token 0) {} wrong, other modes vs sequential "
          "{} wrong\n",
          wrong_ref, wrong_modes);
      fmt::print("{}\n", wrong_ref + wrong_modes == 0 ? "PASSED" : "FAILED");
    }
    rc = wrong_ref + wrong_modes == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    // Abort so that a failure on one rank cannot leave the others waiting.
    fmt::print(stderr, "02_tp_decode: {}\n", e.what());
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  MPI_Finalize();
  return rc;
}
