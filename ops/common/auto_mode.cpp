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
  for (std::size_t m = 0; m < kCandidates; ++m) {
    std::vector<double> mine;
    for (std::size_t i = 0; i < slowest.size() && i < modes.size(); ++i)
      if (modes[i] == kAutoCandidates[m]) mine.push_back(slowest[i]);
    med[m] = mine.empty() ? 0.0 : median(std::move(mine));
  }
  std::size_t best = 0;  // sequential
  for (std::size_t m = 1; m < kCandidates; ++m)
    if (med[m] < (1.0 - kAutoMargin) * med[0] && med[m] < med[best]) best = m;
  return kAutoCandidates[best];
}

Mode AutoMode::next() const {
  if (choice_) return *choice_;
  const std::size_t round = calls_ / kCandidates;  // round 0 is the warm-up
  return kAutoCandidates[(calls_ + round - (round > 0)) % kCandidates];
}

bool AutoMode::record(double seconds) {
  if (choice_) return false;
  if (calls_ >= kCandidates) {  // the first round is the warm-up
    samples_.push_back(seconds);
    modes_.push_back(next());
  }
  ++calls_;
  return calls_ == kCandidates * (static_cast<std::size_t>(rounds_) + 1);
}

}  // namespace tilecomm::detail
