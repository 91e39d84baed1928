#pragma once
// Issue 13's bars for one row of the workload table, from its medians (docs/workloads.md,
// "Variants and tuning"): the CPU-aware ideal, what overlap could save, the recovered fraction,
// and the verdicts fused_perf prints.
#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <string>

namespace tilecomm::bench {

struct Bars {
  /// max(compute, comm, (compute_cpu + comm_cpu) / cores).
  double ideal_cpu = 0;
  /// min(sequential - ideal_cpu, compute, comm): overlap hides at most the shorter half, so a
  /// sequential median that sat high by noise is not taken for room to save.
  double possible_saving = 0;
  /// possible_saving < 5 % of sequential: the recovered fraction is noise, and the only bar is
  /// "fused not slower than the best other variant".
  bool small_saving = false;
  /// (sequential - fused) / (sequential - ideal_cpu); empty when small_saving.
  std::optional<double> recovered;
  bool faster_than_all = false;       ///< fused < best other
  bool not_slower_than_best = false;  ///< fused <= best other
  bool recovered_075 = false;         ///< recovered >= 0.75 (false when small_saving)
  bool within_115_ideal = false;      ///< fused <= 1.15 x ideal_cpu (false when small_saving)

  /// As the table prints it; a missed bar in bold.
  std::string text() const {
    auto yes_no = [](bool b) { return b ? "yes" : "**no**"; };
    if (small_saving)
      return fmt::format("saving < 5 %: not slower than best other {}",
                         yes_no(not_slower_than_best));
    return fmt::format("faster than all {}; recovered >= 0.75 {}; <= 1.15 ideal_cpu {}",
                       yes_no(faster_than_all), yes_no(recovered_075), yes_no(within_115_ideal));
  }
};

/// The bars of a row: medians of compute-only, comm-only (wall), their CPU times summed over a
/// node's ranks, the node's cores, and the medians of sequential, of the fastest other variant
/// and of fused (all in one unit).
inline Bars judge(double compute, double comm, double compute_cpu, double comm_cpu, int cores,
                  double sequential, double best_other, double fused) {
  Bars b;
  b.ideal_cpu = std::max({compute, comm, (compute_cpu + comm_cpu) / std::max(cores, 1)});
  b.possible_saving = std::min({sequential - b.ideal_cpu, compute, comm});
  b.small_saving = b.possible_saving < 0.05 * sequential;
  b.faster_than_all = fused < best_other;
  b.not_slower_than_best = fused <= best_other;
  if (!b.small_saving) {
    b.recovered = (sequential - fused) / (sequential - b.ideal_cpu);
    b.recovered_075 = *b.recovered >= 0.75;
    b.within_115_ideal = fused <= 1.15 * b.ideal_cpu;
  }
  return b;
}

}  // namespace tilecomm::bench
