#pragma once
// Mode::Auto, the measured part (issue 15): a context's first calls try every mode in turn, then
// every rank settles on the same one, for good.
//
// With a cost profile (ops/model/, docs/model.md) the context first predicts every mode: a clear
// winner is settled on before any trial call (settle()), else only the plausible candidates are
// tried (set_candidates()); the schedule below then runs over those.
//
// Schedule (the same on every rank, by call count): passes of one block per candidate, each block
// a lead-in call of its mode (not measured: the first call of a mode pays for lazily built
// buffers, the proxy's start and cold caches, and it leaves behind what that mode leaves) and
// `rounds` measured calls of the same mode; pass p runs the candidates' blocks in their order
// rotated by p. So every measured call follows a call of its own mode, as every call will once
// Auto has settled: a call inherits what the call before it left — ranks leaving a fused call
// unevenly, a drained token bucket on a shaped link, caches — and in the earlier schedule (rounds
// of one call per mode, rotated) sequential mostly followed fused and shaped sequential (under it,
// at 2 emulated nodes and 5 Gbit/s, Auto once settled on shaped, which then ran 1.15x
// sequential). Each measured call starts with a barrier: otherwise a call would be charged the
// ranks' exit skew of the call before it. After the first pass the ranks agree on the slowest
// rank's time of every measured call (one small AllReduce) and settle on choose_auto_mode() of it —
// unless that choice is not clear (auto_choice_is_clear), or the measured calls took under
// OpOptions::auto_min_trial_ms in all: then another pass follows (at most kAutoExtensions, or
// kAutoShortExtensions, times; unclear trials under kAutoUnclearTrialFactor x that bound count as
// short), and the ranks agree again.
// Barriers and the AllReduces are the only communication Auto adds, and only while trying.
#include <cstddef>
#include <iterator>
#include <optional>
#include <span>
#include <vector>

#include "tilecomm/ops.hpp"

namespace tilecomm::detail {

/// The modes Auto tries, in the order of a round.
inline constexpr Mode kAutoCandidates[] = {Mode::Sequential, Mode::Shaped, Mode::Fused};

/// How much faster than sequential another mode must measure to be chosen: the margin that keeps
/// Auto on sequential (the simplest path) when the modes tie. It was 5 %, the bar's own width: on
/// the one-node GEMV row, fused measured 7-13 % faster in the timed rounds, but its median over
/// 9-12 trial calls missed 0.95x sequential's in 3 of 4 checks on 2026-11-28, and Auto stayed
/// 1.10-1.12x off the best. A mode that wins by less than 2 % and is in truth a little slower
/// costs that little.
inline constexpr double kAutoMargin = 0.02;

/// The mode to settle on, from the slowest rank's time of each measured call and the mode it ran:
/// per mode the median of its calls (modes without calls take no part); the fastest median wins,
/// but when sequential was measured a mode other than sequential only when its median is below
/// (1 - kAutoMargin) x sequential's; between two such modes, the lower median (exact ties: the
/// earlier candidate).
Mode choose_auto_mode(std::span<const double> slowest, std::span<const Mode> modes);

/// How many times Auto may add a pass (`rounds` more measured calls of every candidate) when the
/// trials are not clear.
inline constexpr int kAutoExtensions = 2;

/// Trials shorter in all than OpOptions::auto_min_trial_ms (the slowest rank's measured calls,
/// summed) are extended too, at most kAutoShortExtensions times: three calls a mode of
/// sub-millisecond calls are a few ms of a shared machine's time, too few samples to rank modes
/// 10-30 % apart (a 0.4 ms GemmAllToAll row settled on shaped "clearly" and then ran 1.36x fused's
/// time). Short calls make the extra passes cheap: at most 9 passes of 12 calls (3 candidates, 3
/// rounds).
inline constexpr int kAutoShortExtensions = 8;

/// Trials that are not clear may also extend past kAutoExtensions, up to kAutoShortExtensions in
/// all, while they add up to under this many times OpOptions::auto_min_trial_ms (200 ms at the
/// default 20 ms): modes 5-10 % apart need more than 9 calls each to be told apart (above), and on
/// calls of a few ms the extra passes cost a fraction of a second, once.
inline constexpr double kAutoUnclearTrialFactor = 10;

/// Whether the trials tell `winner` (choose_auto_mode's) apart from every other measured mode: each
/// other mode's fastest call is slower than the winner's median. Otherwise their calls overlap so
/// much that three samples a mode can rank them either way (a 5 Gbit/s row settled on shaped at
/// 1.1-1.3x fused's time), and Auto measures another pass (AutoMode::extend).
bool auto_choice_is_clear(std::span<const double> slowest, std::span<const Mode> modes,
                          Mode winner);

class AutoMode {
 public:
  /// `rounds` measured calls per candidate and pass (>= 1); trials under `min_trial_seconds` in
  /// all are short.
  explicit AutoMode(int rounds, double min_trial_seconds = 0)
      : rounds_(rounds), min_trial_seconds_(min_trial_seconds) {}
  /// Tries only `modes` (a non-empty subset of kAutoCandidates, in its order); before the first
  /// call. One candidate settles on it at once.
  void set_candidates(std::vector<Mode> modes);
  const std::vector<Mode>& candidates() const { return candidates_; }
  /// The mode of the next call: its trial mode while trying, then the choice.
  Mode next() const;
  /// Whether the next call is a measured trial call (the caller starts it with a barrier): not a
  /// block's lead-in.
  bool measuring() const { return !choice_ && calls_ % block() != 0; }
  /// While trying: this rank's time of the call just run in next()'s mode. Returns true when it
  /// was the last trial call: the caller then agrees across ranks (slowest()) and settles.
  bool record(double seconds);
  /// This rank's times of the measured calls, in schedule order (valid once record() is true),
  /// and the mode each ran.
  std::vector<double>& samples() { return samples_; }
  const std::vector<Mode>& sample_modes() const { return modes_; }
  void settle(Mode mode) { choice_ = mode; }
  /// After a last trial call whose result was not clear: one more pass, `rounds` more measured
  /// calls of every candidate (the samples so far are kept), at most kAutoExtensions times
  /// (can_extend()).
  void extend() { ++extensions_; }
  bool can_extend() const { return extensions_ < kAutoExtensions; }
  /// Whether trials that were `clear` (auto_choice_is_clear) and took `trial_seconds` in all
  /// extend: unclear ones while can_extend(); then, while fewer than kAutoShortExtensions
  /// extensions have run, unclear ones under kAutoUnclearTrialFactor x min_trial_seconds and clear
  /// ones under min_trial_seconds.
  bool should_extend(bool clear, double trial_seconds) const {
    if (!clear && can_extend()) return true;
    const double budget = clear ? min_trial_seconds_ : kAutoUnclearTrialFactor * min_trial_seconds_;
    return trial_seconds < budget && extensions_ < kAutoShortExtensions;
  }
  /// The settled mode; empty while trying.
  std::optional<Mode> choice() const { return choice_; }

 private:
  // A block: a lead-in and `rounds_` measured calls of one mode; a pass: one block per candidate.
  std::size_t block() const { return static_cast<std::size_t>(rounds_) + 1; }
  std::size_t pass_calls() const { return candidates_.size() * block(); }
  int rounds_, extensions_ = 0;
  double min_trial_seconds_;
  std::vector<Mode> candidates_{std::begin(kAutoCandidates), std::end(kAutoCandidates)};
  std::size_t calls_ = 0;  // calls recorded, lead-ins included
  std::vector<double> samples_;
  std::vector<Mode> modes_;
  std::optional<Mode> choice_;
};

}  // namespace tilecomm::detail
