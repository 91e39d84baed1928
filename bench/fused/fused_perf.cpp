// fused_perf: the three modes of a fused operator side by side, with compute-only and
// collective-only measured in the same run, interleaved, so noise hits every variant alike, and
// the CPU time the ranks of a node spend in each (for the CPU-aware ideal).
//
//   mpirun -np 2 fused_perf --op gemv_allreduce -b 65536 -e 1048576 -f 2
//   mpirun -np 2 fused_perf --op embedding_alltoall --balance --json out.json --trace fused.json
//   mpirun -np 2 fused_perf --workload all        # the shapes of real models, every baseline
//                                                 # tuned (docs/workloads.md)
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "cpu_time.hpp"
#include "harness.hpp"
#include "op_bench.hpp"
#include "workload_table.hpp"

using namespace tilecomm;
using namespace tilecomm::bench;

namespace {

struct Options {
  std::string op = "gemv_allreduce";
  std::vector<std::string> modes = {"sequential", "shaped", "fused"};
  std::size_t begin = 0, end = 0, ratio = 0, dim = 0, tables = 0;
  double factor = 2;
  int iters = 10, warmup = 3, cus = 0, slots = 0;
  double lead_in_ms = 0, min_timed_ms = 0;
  int free_cus = 1, chunks = 4, tune_iters = 3;
  std::string shaped_policy = "lds", fused_algorithm = "auto";
  std::size_t tile = 0;
  bool check = true, balance = false, auto_mode = false;
  std::string json, trace, workload;
};

struct Row {
  std::string op;
  Shape shape;
  std::string shape_text;
  std::size_t bytes = 0;
  Stats compute, comm, mode[3];
  Stats compute_cpu, comm_cpu;  // CPU us summed over the node's ranks
  int cores = 1;                // the node's cores (its ranks' affinity masks)
  bool has[3] = {false, false, false};
  long long wrong = 0;
  // --auto: Mode::Auto on the fixed modes' context (measure() says why), timed once settled.
  Stats autom;
  std::string auto_choice;             // the mode it settled on ("" without --auto)
  int auto_trials = 0;                 // its calls before it settled (the user's first calls)
  Mode best_fixed = Mode::Sequential;  // the fixed mode of the lowest median in the rounds
  AutoAb ab;                           // then Auto against it, in an A/B of their own (harness.hpp)
};

Row measure(const Options& o, Communicator& comm, Device& dev, const NodeCpu& node,
            const std::string& op, const Shape& shape, bool write_trace) {
  OpOptions oo;
  oo.shaped.free_cus = o.free_cus;
  oo.shaped.chunks = o.chunks;
  oo.shaped.policy = parse_shaped_policy(o.shaped_policy);
  oo.tile = o.tile;
  oo.fused_algorithm = parse_fused_algorithm(o.fused_algorithm);
  auto bench = make_op_bench(op, comm, dev, shape, oo);
  Row row;
  row.op = op;
  row.cores = node.cores();
  row.shape = shape;
  row.shape_text = bench->shape();
  row.bytes = bench->bytes();
  std::vector<Mode> modes;
  for (const auto& m : o.modes)
    modes.push_back(parse_mode(m));
  if (std::find(modes.begin(), modes.end(), Mode::Auto) != modes.end())
    throw Error(ErrorCode::InvalidArgument,
                "--modes auto: fused_perf times the fixed modes side by side (auto picks one of "
                "them after its first calls)");
  std::vector<double> tc, tm, tcc, tmc, tmode[3], tauto;
  // --auto: Mode::Auto on the fixed modes' context (Auto keeps its own state per context; fixed
  // calls do not touch it), called until it settles (its trial calls, as a user's first calls;
  // not timed), then timed in the rounds below like the fixed modes. On the same context because
  // a second one doubles the buffers the rounds walk through: at the gemm_alltoall shm row (about
  // 8 MiB of shared inboxes and 2 MiB of results per rank and context, 32 MiB of L3) a second
  // context made its calls and compute_only() 2.3x and 3x slower in 2 of 3 runs, which Auto alone
  // was charged for (docs/model.md).
  const std::size_t auto_variant = 0;
  if (o.auto_mode) {
    const AutoSettled settled = settle_auto(*bench, auto_variant);
    row.auto_choice = std::string(to_string(settled.mode));
    row.auto_trials = settled.trials;
  }
  // Each round runs the variants in a drawn order (round_order): none always goes first (and pays
  // for waking an idle device), none always follows the same one.
  const int variants = 2 + static_cast<int>(modes.size()) + (o.auto_mode ? 1 : 0);
  for (int it = -o.warmup; it < 0 || another_round(it, o.iters, tc, o.min_timed_ms); ++it) {
    Timing c, m;
    double t[3] = {0, 0, 0}, ta = 0;
    for (const int v : round_order(variants, it + o.warmup)) {
      const auto run = [&] {
        if (v == 0) return timed(node, [&] { bench->compute_only(); });
        if (v == 1) return timed(node, [&] { bench->collective_only(); });
        if (v - 2 < static_cast<int>(modes.size()))
          return timed(node, [&] { bench->run(modes[v - 2]); });
        return timed(node, [&] { bench->run(Mode::Auto, auto_variant); });
      };
      const Timing r = led_in(o.lead_in_ms, run);  // untimed calls of its kind first (harness.hpp)
      if (v == 0)
        c = r;
      else if (v == 1)
        m = r;
      else if (v - 2 < static_cast<int>(modes.size()))
        t[int(modes[v - 2])] = r.wall;
      else
        ta = r.wall;
    }
    if (it < 0) continue;
    tc.push_back(c.wall);
    tm.push_back(m.wall);
    tcc.push_back(c.cpu);
    tmc.push_back(m.cpu);
    for (Mode mode : modes)
      tmode[int(mode)].push_back(t[int(mode)]);
    tauto.push_back(ta);
  }
  row.compute = stats_of(tc);
  row.comm = stats_of(tm);
  row.compute_cpu = stats_of(tcc);
  row.comm_cpu = stats_of(tmc);
  for (Mode mode : modes) {
    row.mode[int(mode)] = stats_of(tmode[int(mode)]);
    row.has[int(mode)] = true;
  }
  if (o.auto_mode && !modes.empty()) {
    row.autom = stats_of(tauto);
    row.best_fixed = modes.front();
    for (Mode mode : modes)
      if (row.mode[int(mode)].median < row.mode[int(row.best_fixed)].median) row.best_fixed = mode;
    row.ab =
        auto_ab(static_cast<int>(tc.size()), std::max(o.lead_in_ms, kAutoAbLeadInMs), [&](int v) {
          const Mode mode = v == 0 ? Mode::Auto : row.best_fixed;
          return timed(node, [&] { bench->run(mode, auto_variant); });
        });
  }
  if (o.check) {
    bench->run(Mode::Sequential);
    bench->record_reference();
    for (Mode mode : modes) {
      if (mode == Mode::Sequential) continue;
      bench->run(mode);
      row.wrong += bench->wrong_vs_sequential(mode);
    }
    if (o.auto_mode) {
      bench->run(Mode::Auto, auto_variant);
      row.wrong += bench->wrong_vs_sequential(Mode::Auto);
    }
    MPI_Allreduce(MPI_IN_PLACE, &row.wrong, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  }
  if (write_trace) write_fused_trace(comm, dev, *bench, o.trace);
  return row;
}

double reduction(const Row& r, Mode m) {
  if (!r.has[int(m)] || !r.has[0]) return 0;
  return 1.0 - r.mode[int(m)].median / r.mode[0].median;
}

// (sequential - fused) / (sequential - max(compute, comm)): 1 = perfect overlap.
double overlap_efficiency(const Row& r) {
  if (!r.has[0] || !r.has[2]) return 0;
  const double best = std::max(r.compute.median, r.comm.median);
  const double room = r.mode[0].median - best;
  return room > 0 ? (r.mode[0].median - r.mode[2].median) / room : 0;
}

// The best this machine allows once communication's CPU cost counts (issue 13, part 4): neither
// half can be shorter than alone, and the node's cores must run both halves' CPU time.
double ideal_cpu(const Row& r) {
  const double cpu = (r.compute_cpu.median + r.comm_cpu.median) / std::max(r.cores, 1);
  return std::max({r.compute.median, r.comm.median, cpu});
}

// (sequential - fused) / (sequential - ideal_cpu), or "n/a (saving < 5 %)" when the possible
// saving is under 5 % of sequential (then the figure is noise).
std::string recovered(const Row& r) {
  if (!r.has[0] || !r.has[2]) return "-";
  const double seq = r.mode[0].median, room = seq - ideal_cpu(r);
  if (room < 0.05 * seq) return "n/a (saving < 5 %)";
  return fmt::format("{:.2f}", (seq - r.mode[2].median) / room);
}

// --auto: Auto's median over the best fixed mode's in the rounds that picked that mode (biased
// against Auto where modes tie; the bar is judged on the A/B after them, Row::ab); 0 without
// --auto.
double auto_over_best(const Row& r) {
  const double best = r.mode[int(r.best_fixed)].median;
  return r.auto_choice.empty() || best == 0 ? 0 : r.autom.median / best;
}

double fused_over_ideal_cpu(const Row& r) {
  return r.has[2] ? r.mode[2].median / ideal_cpu(r) : 0;
}

nlohmann::json to_json(const Row& r, const Communicator& comm) {
  // One statistic (min or max) of every variant, by name.
  auto per_variant = [](const Row& row, double Stats::*field) {
    return nlohmann::json{{"compute", row.compute.*field},
                          {"comm", row.comm.*field},
                          {"sequential", row.mode[0].*field},
                          {"shaped", row.mode[1].*field},
                          {"fused", row.mode[2].*field}};
  };
  return {{"op", r.op},
          {"ranks", comm.size()},
          {"nodes", comm.num_nodes()},
          {"shape", r.shape_text},
          {"size", r.shape.size},
          {"ratio", r.shape.ratio},
          {"bytes", r.bytes},
          {"compute_us", r.compute.median},
          {"comm_us", r.comm.median},
          {"compute_cpu_us", r.compute_cpu.median},
          {"comm_cpu_us", r.comm_cpu.median},
          {"cores", r.cores},
          {"sequential_us", r.mode[0].median},
          {"shaped_us", r.mode[1].median},
          {"fused_us", r.mode[2].median},
          {"min_us", per_variant(r, &Stats::min)},
          {"max_us", per_variant(r, &Stats::max)},
          {"reduction_fused", reduction(r, Mode::Fused)},
          {"reduction_shaped", reduction(r, Mode::Shaped)},
          {"overlap_efficiency", overlap_efficiency(r)},
          {"ideal_us", std::max(r.compute.median, r.comm.median)},
          {"ideal_cpu_us", ideal_cpu(r)},
          {"fused_over_ideal_cpu", fused_over_ideal_cpu(r)},
          {"recovered", recovered(r)},
          {"auto_us", r.auto_choice.empty() ? nlohmann::json() : nlohmann::json(r.autom.median)},
          {"auto_choice", r.auto_choice},
          {"auto_trials", r.auto_trials},
          {"auto_over_best", auto_over_best(r)},
          {"auto_best_fixed", to_string(r.best_fixed)},
          {"auto_ab_us", r.ab.autom.median},
          {"auto_ab_best_us", r.ab.best.median},
          {"auto_ab_rounds", r.ab.rounds},
          {"auto_ab_over_best", r.ab.ratio()},
          {"wrong", r.wrong}};
}

// --op: sizes from -b to -e (or the balanced ratio with --balance); returns non-zero if any mode
// was wrong.
int run_ops(Options o, Communicator& comm, Device& dev, const NodeCpu& node) {
  int rc = 0;
  Shape base = default_shape(o.op);
  if (o.begin) base.size = o.begin;
  if (o.ratio) base.ratio = o.ratio;
  if (o.dim) base.dim = o.dim;
  if (o.tables) base.tables = o.tables;
  const bool root = comm.rank() == 0;
  if (o.balance) {
    // Geometric search on the ratio knob: compute grows with it, communication does not.
    std::size_t lo = 1, hi = 4096;
    for (int step = 0; step < 9 && hi > lo + 1; ++step) {
      Shape s = base;
      s.ratio = std::max<std::size_t>(1, static_cast<std::size_t>(std::sqrt(double(lo) * hi)));
      Options quick = o;
      quick.iters = 3;
      quick.warmup = 1;
      quick.modes = {};
      quick.auto_mode = false;
      quick.check = false;
      Row r = measure(quick, comm, dev, node, o.op, s, false);
      if (root)
        fmt::print("# balance: {} compute {:.0f} us, comm {:.0f} us\n", r.shape_text,
                   r.compute.median, r.comm.median);
      (r.compute.median < r.comm.median ? lo : hi) = s.ratio;
    }
    base.ratio = std::max<std::size_t>(1, static_cast<std::size_t>(std::sqrt(double(lo) * hi)));
    o.end = base.size;
  }
  if (!o.end) o.end = base.size;
  std::vector<Row> rows;
  if (root)
    fmt::print(
        "# {} on {} ranks ({} nodes), {} CUs x {} slots per rank; "
        "times in us: median [min, max] of the slowest rank\n"
        "{:<38} {:>10} {:>22} {:>22} {:>22} {:>22} {:>22} {:>7} {:>7} {:>7} {:>9} {:>8} {:>18} "
        "{:>6}\n",
        o.op, comm.size(), comm.num_nodes(), dev.num_cus(), dev.wg_slots_per_cu(), "shape", "bytes",
        "compute", "comm", "sequential", "shaped", "fused", "shaped%", "fused%", "overlap",
        "ideal_cpu", "f/id_cpu", "recovered", "wrong");
  for (std::size_t size = base.size; size <= o.end;
       size = std::max(size + 1, static_cast<std::size_t>(size * o.factor))) {
    Shape s = base;
    s.size = size;
    const bool last = static_cast<std::size_t>(size * o.factor) > o.end;
    Row r = measure(o, comm, dev, node, o.op, s, last && !o.trace.empty());
    rows.push_back(r);
    if (root) {
      fmt::print(
          "{:<38} {:>10} {:>22} {:>22} {:>22} {:>22} {:>22} {:>6.1f}% {:>6.1f}% {:>7.2f} {:>9.0f} "
          "{:>8.2f} {:>18} {:>6}\n",
          r.shape_text, r.bytes, cell(r.compute), cell(r.comm), cell(r.mode[0]), cell(r.mode[1]),
          cell(r.mode[2]), 100 * reduction(r, Mode::Shaped), 100 * reduction(r, Mode::Fused),
          overlap_efficiency(r), ideal_cpu(r), fused_over_ideal_cpu(r), recovered(r), r.wrong);
      if (!r.auto_choice.empty())
        fmt::print(
            "{:<38} auto {} ({} trial calls, then {}): {:.2f} x the best fixed mode; A/B against "
            "{} ({} rounds): auto {}, {} {}: {:.2f}\n",
            "", cell(r.autom), r.auto_trials, r.auto_choice, auto_over_best(r),
            to_string(r.best_fixed), r.ab.rounds, cell(r.ab.autom), to_string(r.best_fixed),
            cell(r.ab.best), r.ab.ratio());
      std::fflush(stdout);
    }
    if (o.factor <= 1) break;
  }
  if (root && !o.json.empty()) {
    nlohmann::json out = nlohmann::json::array();
    for (const Row& r : rows)
      out.push_back(to_json(r, comm));
    std::ofstream(o.json) << out.dump(2) << '\n';
  }
  for (const Row& r : rows)
    rc |= r.wrong != 0;
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  Options o;
  CLI::App app{"Fused operators: sequential vs shaped vs fused, with compute-only and comm-only"};
  app.add_option("--op", o.op,
                 "gemv_allreduce | embedding_alltoall | gemm_alltoall | gemm_reduce_scatter");
  app.add_option("--modes", o.modes, "modes to run (default all)")->delimiter(',');
  app.add_option("-b,--begin", o.begin,
                 "first size (GEMV: M, embedding: global batch, MoE: tokens per rank)");
  app.add_option("-e,--end", o.end, "last size");
  app.add_option("-f,--factor", o.factor, "size step factor");
  app.add_option("--ratio", o.ratio,
                 "balance knob (GEMV: K per rank, embedding: bag size, MoE: K)");
  app.add_option("--dim", o.dim, "embedding dim / MoE N");
  app.add_option("--tables", o.tables, "embedding tables / MoE experts per rank");
  app.add_option("-n,--iters", o.iters, "timed iterations");
  app.add_option("-w,--warmup", o.warmup, "warm-up iterations");
  app.add_option("--min-timed-ms", o.min_timed_ms,
                 "after the -n rounds, more rounds until the compute-only (--op) or sequential "
                 "(--workload) calls add up to this many ms of timed calls (at most 1000 rounds; "
                 "0: -n only)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--lead-in-ms", o.lead_in_ms,
                 "untimed calls of a variant right before each of its timed calls, for at least "
                 "this long (ms; 0: none): the timed call meets what a loop of that one mode "
                 "leaves (the emulated link's token bucket drained, the caches), as the "
                 "simulator's --repeated-call assumes")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--cus", o.cus, "compute units per rank (0: cores in mask)");
  app.add_option("--slots", o.slots, "WG slots per CU (0: TILECOMM_WG_SLOTS)");
  app.add_option("--free-cus", o.free_cus, "shaped: CUs' worth of slots left to the comm kernel");
  app.add_option("--chunks", o.chunks, "shaped: chunks");
  app.add_option("--shaped-policy", o.shaped_policy,
                 "shaped: lds (occupancy shaping) | cu_mask (a dedicated communication CU: needs "
                 "--cus >= 2) | nonblocking (chunks on every CU, collectives posted by the host)");
  app.add_option("--tile", o.tile, "tile size along the tiled dimension (0: the op's default)");
  app.add_option("--fused-algorithm", o.fused_algorithm,
                 "GEMV fused protocol: auto (the operator's choice) | one_shot | two_shot");
  app.add_option("-c,--check", o.check, "check every mode against sequential (1/0)");
  app.add_flag("--auto", o.auto_mode,
               "also Mode::Auto, on a context of its own: called until it settles (its trial "
               "calls, counted, not timed), then timed beside the fixed modes; prints its choice "
               "and its median over the best fixed mode's");
  app.add_flag("--balance", o.balance,
               "search the ratio where compute ~ communication, report there");
  app.add_option("--json", o.json, "write one JSON object per row");
  app.add_option("--trace", o.trace,
                 "write a Chrome trace of one fused iteration (--op: of the last row, to this "
                 "file; --workload: of each workload's case with the longest comm, to "
                 "PREFIX_<workload>.json)");
  app.add_option("--tune-iters", o.tune_iters,
                 "--workload: rounds per candidate when tuning the baselines' knobs");
  app.add_option("--workload", o.workload,
                 "run a model's shapes instead of --op: dlrm | llama-decode | mixtral-moe | all, "
                 "every baseline tuned and measured beside sequential and fused "
                 "(docs/workloads.md); --modes, --free-cus, --chunks, --shaped-policy apply to "
                 "--op only");
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
    if (o.cus) rcfg.num_cus = o.cus;
    if (o.slots) rcfg.wg_slots_per_cu = o.slots;
    Device dev(rcfg);
    const NodeCpu node;
    if (o.workload.empty()) {
      rc = run_ops(o, comm, dev, node);
    } else {
      WorkloadRun run{o.workload, o.iters, o.warmup, o.tune_iters,
                      {},         o.json,  o.trace,  o.min_timed_ms};
      run.base.tile = o.tile;
      rc = run_workloads(run, comm, dev, node);
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "fused_perf: {}\n", e.what());
    rc = 2;
  }
  MPI_Finalize();
  return rc;
}
