#pragma once
// Argument validation of the collective calls, callable without communication (used by post() in
// api.cpp, and by the fuzzers in fuzz/).

#include "collectives/algorithm.hpp"

namespace tilecomm::detail {

/// Validates `a` as the call on rank `rank` of `size` ranks would see it: dtype and op are enum
/// values, counts times element size (times `size` where the collective says so) fit in int64, All-
/// to-Allv layouts have `size` counts and displacements within their capacity, buffers are non-null
/// where bytes are accessed, and send and recv do not overlap unless exactly in place (then sets
/// a.in_place). Throws Error(InvalidArgument) naming the argument and value; touches no memory.
void validate_layout(CollArgs& a, int rank, int size);

}  // namespace tilecomm::detail
