#pragma once
// Mode::Auto, the measured part (issue 15): a context's first calls try every mode in turn, then
// every rank settles on the same one, for good.
//
// Schedule (the same on every rank, by call count): one warm-up round (sequential, shaped, fused;
// not measured: the first call of a mode pays for lazily built buffers, the proxy's start and cold
// caches), then `rounds` measured rounds in the same order. After the last one the ranks agree on
// the slowest rank's time of every measured call (one small AllReduce, the only extra
// communication Auto ever costs) and settle on choose_auto_mode() of it.
#include <cstddef>
#include <optional>
#include <span>
#include <vector>

#include "tilecomm/ops.hpp"

namespace tilecomm::detail {

/// The modes Auto tries, in the order of a round.
inline constexpr Mode kAutoCandidates[] = {Mode::Sequential, Mode::Shaped, Mode::Fused};

/// How much faster than sequential another mode must measure to be chosen: the noise margin that
/// keeps Auto from settling on a mode that is no faster (sequential is the simplest path).
inline constexpr double kAutoMargin = 0.05;

/// The mode to settle on, from the slowest rank's time of each measured call in schedule order
/// (rounds x the candidates): per mode the median of its calls; the fastest median wins, but a
/// mode other than sequential only when its median is below (1 - kAutoMargin) x sequential's;
/// between two such modes, the lower median (exact ties: the earlier candidate).
Mode choose_auto_mode(std::span<const double> slowest);

class AutoMode {
 public:
  /// `rounds` measured rounds (>= 1).
  explicit AutoMode(int rounds) : rounds_(rounds) {}
  /// The mode of the next call: its trial mode while trying, then the choice.
  Mode next() const;
  /// While trying: this rank's time of the call just run in next()'s mode. Returns true when it
  /// was the last trial call: the caller then agrees across ranks (slowest()) and settles.
  bool record(double seconds);
  /// This rank's times of the measured calls, in schedule order (valid once record() is true).
  std::vector<double>& samples() { return samples_; }
  void settle(Mode mode) { choice_ = mode; }
  /// The settled mode; empty while trying.
  std::optional<Mode> choice() const { return choice_; }

 private:
  int rounds_;
  std::size_t calls_ = 0;  // calls recorded, warm-up included
  std::vector<double> samples_;
  std::optional<Mode> choice_;
};

}  // namespace tilecomm::detail
