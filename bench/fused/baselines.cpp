// Tuning the baselines' knobs (bench/fused/baselines.hpp): few iterations per candidate,
// interleaved so load hits every candidate alike; the winner is then measured side by side with
// the other variants by the workload table.
#include "baselines.hpp"

#include <fmt/format.h>

#include "harness.hpp"

namespace tilecomm::bench {

std::string baseline_name(Baseline b) {
  switch (b) {
    case Baseline::SequentialBestCollective:
      return "seq_best_coll";
    case Baseline::ShapedLds:
      return "shaped_lds";
    case Baseline::ShapedNonBlocking:
      return "shaped_nonblocking";
    case Baseline::ShapedCuMask:
      return "shaped_cu_mask";
  }
  return "?";
}

std::vector<Candidate> candidates(Baseline b, Collective c, int cus, const OpOptions& base) {
  std::vector<Candidate> out;
  if (b == Baseline::SequentialBestCollective) {
    for (const std::string& name : algorithm_names(c)) {
      OpOptions o = base;
      o.algorithm = name;
      out.push_back({fmt::format("algorithm={}", name), Mode::Sequential, o});
    }
    return out;
  }
  const ShapedPolicy policy = b == Baseline::ShapedLds           ? ShapedPolicy::Lds
                              : b == Baseline::ShapedNonBlocking ? ShapedPolicy::NonBlocking
                                                                 : ShapedPolicy::CuMask;
  // LDS on one CU: free_cus = 1 leaves one CU's worth of slots, clamped to all but one slot.
  const int max_free = policy == ShapedPolicy::NonBlocking ? 1
                       : policy == ShapedPolicy::Lds       ? std::max(1, cus - 1)
                                                           : cus - 1;
  for (int chunks : {2, 4, 8})
    for (int free = 1; free <= max_free; ++free) {
      OpOptions o = base;
      o.algorithm.clear();
      o.shaped = {free, chunks, policy};
      out.push_back({policy == ShapedPolicy::NonBlocking
                         ? fmt::format("chunks={}", chunks)
                         : fmt::format("chunks={} free_cus={}", chunks, free),
                     Mode::Shaped, o});
    }
  return out;
}

Tuned tune(OpBench& bench, Baseline b, const std::vector<Candidate>& cands, int iters,
           const NodeCpu& node) {
  Tuned t;
  t.baseline = b;
  if (cands.empty()) {
    t.knob = "n/a (needs >= 2 CUs)";
    return t;
  }
  struct Live {
    std::size_t cand, variant;
    std::vector<double> times;
  };
  std::vector<Live> live;
  for (std::size_t i = 0; i < cands.size(); ++i) {
    const std::size_t v = bench.add_variant(cands[i].options);
    // Warm-up call; arguments are checked on every rank before any communication, so a
    // candidate the collective cannot run fails on every rank alike.
    int failed = 0;
    std::string why;
    try {
      bench.run(cands[i].mode, v);
    } catch (const Error& e) {
      failed = 1;
      why = e.what();
    }
    MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (failed) {
      bench.drop_variant(v);
      t.tried.emplace_back(cands[i].knob, -1);
      t.rejected.push_back(fmt::format("{}: {}", cands[i].knob, why));
      continue;
    }
    live.push_back({i, v, {}});
  }
  if (live.empty()) {
    t.knob = "n/a (every candidate rejected)";
    return t;
  }
  for (int it = 0; it < iters; ++it)
    for (std::size_t j = 0; j < live.size(); ++j) {
      Live& l = live[(j + static_cast<std::size_t>(it)) % live.size()];
      l.times.push_back(timed(node, [&] { bench.run(cands[l.cand].mode, l.variant); }).wall);
    }
  std::size_t best = 0;
  for (std::size_t j = 0; j < live.size(); ++j) {
    const double m = stats_of(live[j].times).median;
    t.tried.emplace_back(cands[live[j].cand].knob, m);
    if (m < stats_of(live[best].times).median) best = j;
  }
  for (std::size_t j = 0; j < live.size(); ++j)
    if (j != best) bench.drop_variant(live[j].variant);
  t.available = true;
  t.knob = cands[live[best].cand].knob;
  t.mode = cands[live[best].cand].mode;
  t.variant = live[best].variant;
  return t;
}

}  // namespace tilecomm::bench
