#pragma once
// How an embedding call's lookups reuse their rows, as an LRU cache would see them: the input
// that lets the simulator charge skewed indices (hot rows looked up again) from the caches they
// hit. A benchmark measures it on its own indices (lookup_reuse); the simulator reads it
// (SimSetup::lookup_reuse, tilecomm_sim --lookup-reuse).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tilecomm::model {

/// One point of a reuse profile: the share of lookups an LRU cache of `bytes` (whole rows) hits.
struct ReusePoint {
  double bytes = 0, share = 0;
};

/// The reuse profile of one call as a loop repeats it: the lookups of `tables` (each table's
/// indices, in the order the kernel reads them: table by table, bag by bag), each row of
/// `row_bytes`. A lookup hits a cache of B bytes when it and the distinct rows looked up since
/// the same row's last lookup (in this call, else the loop's previous one) fit in B. Points at
/// every power of two from 4 KiB to 4 GiB, shares non-decreasing.
std::vector<ReusePoint> lookup_reuse(const std::vector<std::vector<std::int64_t>>& tables,
                                     std::size_t row_bytes);

/// The share a cache of `bytes` hits: linear in log2(bytes) between points, the first point's
/// share below it, the last's beyond (0 for an empty profile).
double reuse_share(const std::vector<ReusePoint>& profile, double bytes);

/// "BYTES:SHARE,BYTES:SHARE,..." (as format_reuse writes it). Error(InvalidArgument) naming the
/// item when a number is bad, a share is outside [0, 1], or the bytes or shares decrease.
std::vector<ReusePoint> parse_reuse(std::string_view text);
std::string format_reuse(const std::vector<ReusePoint>& profile);

}  // namespace tilecomm::model
