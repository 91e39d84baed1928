#include "ops/common/auto_mode.hpp"

#include <algorithm>
#include <iterator>

namespace tilecomm::detail {
namespace {
constexpr std::size_t kCandidates = std::size(kAutoCandidates);

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
}  // namespace

Mode choose_auto_mode(std::span<const double> slowest, std::span<const Mode> modes) {
  double med[kCandidates];
  bool have[kCandidates] = {};
  for (std::size_t m = 0; m < kCandidates; ++m) {
    std::vector<double> mine;
    for (std::size_t i = 0; i < slowest.size() && i < modes.size(); ++i)
      if (modes[i] == kAutoCandidates[m]) mine.push_back(slowest[i]);
    have[m] = !mine.empty();
    med[m] = have[m] ? median(std::move(mine)) : 0.0;
  }
  std::size_t best = 0;
  while (best + 1 < kCandidates && !have[best])
    ++best;  // the first measured candidate (sequential when it was measured)
  for (std::size_t m = best + 1; m < kCandidates; ++m)
    if (have[m] && med[m] < med[best] && (!have[0] || med[m] < (1.0 - kAutoMargin) * med[0]))
      best = m;
  return kAutoCandidates[best];
}

bool auto_choice_is_clear(std::span<const double> slowest, std::span<const Mode> modes,
                          Mode winner) {
  std::vector<double> mine;
  for (std::size_t i = 0; i < slowest.size() && i < modes.size(); ++i)
    if (modes[i] == winner) mine.push_back(slowest[i]);
  if (mine.empty()) return true;
  const double typical = median(std::move(mine));
  for (std::size_t i = 0; i < slowest.size() && i < modes.size(); ++i)
    if (modes[i] != winner && slowest[i] <= typical) return false;
  return true;
}

void AutoMode::set_candidates(std::vector<Mode> modes) {
  candidates_ = std::move(modes);
  if (candidates_.size() == 1) choice_ = candidates_.front();
}

Mode AutoMode::next() const {
  if (choice_) return *choice_;
  const std::size_t pass = calls_ / pass_calls();
  const std::size_t slot = calls_ % pass_calls() / block();  // the block within the pass
  return candidates_[(slot + pass) % candidates_.size()];
}

bool AutoMode::record(double seconds) {
  if (choice_) return false;
  if (measuring()) {
    samples_.push_back(seconds);
    modes_.push_back(next());
  }
  ++calls_;
  return calls_ == pass_calls() * static_cast<std::size_t>(1 + extensions_);
}

}  // namespace tilecomm::detail
