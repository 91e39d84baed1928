// Reuse (LRU stack) distances of a repeated lookup stream, by a Fenwick tree over positions: a
// position holds 1 while it is the latest lookup of its row, so the rows looked up since a row's
// last lookup are the ones counted between the two positions.
#include "ops/model/lookup_reuse.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "tilecomm/error.hpp"

namespace tilecomm::model {

namespace {

class Fenwick {
 public:
  explicit Fenwick(std::size_t n) : tree_(n + 1, 0) {}
  void add(std::size_t i, int v) {
    for (++i; i < tree_.size(); i += i & (~i + 1))
      tree_[i] += v;
  }
  long long prefix(std::size_t i) const {  // positions [0, i)
    long long s = 0;
    for (; i > 0; i -= i & (~i + 1))
      s += tree_[i];
    return s;
  }

 private:
  std::vector<long long> tree_;
};

constexpr int kFirstLog2 = 12, kLastLog2 = 32;  // 4 KiB .. 4 GiB

}  // namespace

std::vector<ReusePoint> lookup_reuse(const std::vector<std::vector<std::int64_t>>& tables,
                                     std::size_t row_bytes) {
  std::vector<std::uint64_t> call;
  for (std::size_t t = 0; t < tables.size(); ++t)
    for (std::int64_t row : tables[t])
      call.push_back((std::uint64_t(t) << 40) ^ std::uint64_t(row));
  // Rows a hit needs (itself and the distinct rows in between), counted over the second call.
  std::vector<std::size_t> needs;
  needs.reserve(call.size());
  const std::size_t n = call.size();
  Fenwick latest(2 * n);
  std::unordered_map<std::uint64_t, std::size_t> last;
  for (std::size_t i = 0; i < 2 * n; ++i) {
    const std::uint64_t key = call[i % n];
    auto it = last.find(key);
    if (it != last.end()) {
      if (i >= n)
        needs.push_back(std::size_t(latest.prefix(i) - latest.prefix(it->second + 1)) + 1);
      latest.add(it->second, -1);
      it->second = i;
    } else {
      last.emplace(key, i);
    }
    latest.add(i, 1);
  }
  std::sort(needs.begin(), needs.end());
  std::vector<ReusePoint> out;
  for (int b = kFirstLog2; b <= kLastLog2; ++b) {
    const double bytes = std::ldexp(1.0, b);
    const auto rows = static_cast<std::size_t>(bytes / double(std::max<std::size_t>(row_bytes, 1)));
    const auto hits = std::upper_bound(needs.begin(), needs.end(), rows) - needs.begin();
    out.push_back({bytes, n ? double(hits) / double(n) : 0.0});
  }
  return out;
}

double reuse_share(const std::vector<ReusePoint>& profile, double bytes) {
  if (profile.empty()) return 0;
  if (bytes <= profile.front().bytes) return profile.front().share;
  for (std::size_t i = 1; i < profile.size(); ++i) {
    const ReusePoint &a = profile[i - 1], &b = profile[i];
    if (bytes <= b.bytes) {
      const double w = std::log2(bytes / a.bytes) / std::log2(b.bytes / a.bytes);
      return a.share + w * (b.share - a.share);
    }
  }
  return profile.back().share;
}

std::vector<ReusePoint> parse_reuse(std::string_view text) {
  std::vector<ReusePoint> out;
  auto bad = [](std::string_view item, const char* why) {
    return Error(ErrorCode::InvalidArgument,
                 fmt::format("lookup reuse: '{}' {} (expected BYTES:SHARE,...)", item, why));
  };
  while (!text.empty()) {
    const auto comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
    const auto colon = item.find(':');
    if (colon == std::string_view::npos) throw bad(item, "is not BYTES:SHARE");
    ReusePoint p;
    try {
      std::size_t used_b = 0, used_s = 0;
      const std::string b(item.substr(0, colon)), s(item.substr(colon + 1));
      p.bytes = std::stod(b, &used_b);
      p.share = std::stod(s, &used_s);
      if (used_b != b.size() || used_s != s.size()) throw bad(item, "has a bad number");
    } catch (const std::logic_error&) {
      throw bad(item, "has a bad number");
    }
    if (!(p.bytes > 0)) throw bad(item, "has bytes <= 0");
    if (!(p.share >= 0 && p.share <= 1)) throw bad(item, "has a share outside [0, 1]");
    if (!out.empty() && (p.bytes <= out.back().bytes || p.share < out.back().share))
      throw bad(item, "does not follow the point before it (bytes must rise, shares not fall)");
    out.push_back(p);
  }
  return out;
}

std::string format_reuse(const std::vector<ReusePoint>& profile) {
  std::string out;
  for (const ReusePoint& p : profile)
    out += fmt::format("{}{:.0f}:{:.6g}", out.empty() ? "" : ",", p.bytes, p.share);
  return out;
}

}  // namespace tilecomm::model
