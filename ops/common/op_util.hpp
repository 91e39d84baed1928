#pragma once
// Small helpers shared by the operators: shaped-LDS sizing, even splits, BLAS set-up.

#include <cstddef>

#include "tilecomm/device.hpp"

namespace tilecomm::detail {

/// LDS bytes per compute WG in shaped mode so that, on every CU, fewer compute WGs are resident and
/// a slot plus LDS stay free for the communication kernel: with C CUs, s slots and capacity L,
/// r = s - ceil(free_cus * s / C) compute WGs fit per CU (at least 1), by asking L/(r+1)+1 bytes.
/// Returns 0 when no shaping is asked for (free_cus <= 0).
std::size_t shaped_lds_bytes(const Device& device, int free_cus);

/// [begin, end) of part i when n items are split into `parts` nearly equal contiguous parts (the
/// first n % parts parts get one more).
inline std::size_t split_begin(std::size_t n, std::size_t parts, std::size_t i) {
  return i * (n / parts) + (i < n % parts ? i : n % parts);
}

/// OpenBLAS runs single-threaded inside tiles: the device owns the parallelism. Idempotent.
void blas_single_threaded();

}  // namespace tilecomm::detail
