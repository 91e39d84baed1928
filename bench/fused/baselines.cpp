// Tuning the baselines' knobs (bench/fused/baselines.hpp): few iterations per candidate,
// interleaved so load hits every candidate alike; the winner is then measured side by side with
// the other variants by the workload table.
#include "baselines.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

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

std::string probe_algorithm(Collective c, std::size_t bytes, const std::string& algorithm) {
  // Allocated before the probe communicator, freed after it.
  Communicator probe(MPI_COMM_WORLD);
  const int p = probe.size();
  const CollectiveOptions o{algorithm};
  try {
    switch (c) {
      case Collective::AllReduce: {
        std::vector<float> buf(std::max<std::size_t>(bytes / sizeof(float), 1));
        allreduce(probe, buf.data(), buf.data(), buf.size(), DataType::Float32, ReduceOp::Sum, o);
        break;
      }
      case Collective::ReduceScatter: {
        const std::size_t each = std::max<std::size_t>(bytes / sizeof(float) / p, 1);
        std::vector<float> send(each * p), recv(each);
        reduce_scatter(probe, send.data(), recv.data(), each, DataType::Float32, ReduceOp::Sum, o);
        break;
      }
      case Collective::AllToAllv: {
        VarLayout layout;
        for (int q = 0; q < p; ++q) {
          layout.counts.push_back(1);
          layout.displs.push_back(static_cast<std::size_t>(q));
        }
        layout.capacity = static_cast<std::size_t>(p);
        std::vector<float> send(p), recv(p);
        alltoallv(probe, send.data(), layout, recv.data(), layout, DataType::Float32, o);
        break;
      }
      default:
        return fmt::format("no probe for {}", to_string(c));
    }
  } catch (const Error& e) {
    return e.what();
  }
  return {};
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
    if (!cands[i].options.algorithm.empty()) {
      const std::string why =
          probe_algorithm(bench.collective(), bench.bytes(), cands[i].options.algorithm);
      if (!why.empty()) {
        t.tried.emplace_back(cands[i].knob, -1);
        t.rejected.push_back(fmt::format("{}: {}", cands[i].knob, why));
        continue;
      }
    }
    const std::size_t v = bench.add_variant(cands[i].options);
    // Warm-up call. An operator checks its options on every rank before any communication, so
    // a candidate it rejects fails on every rank alike (a collective that declines would leave
    // the communicator unusable: probe_algorithm ruled those out first).
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
