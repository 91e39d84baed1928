#pragma once
/// \file defaults.hpp
/// The default of every setting that has one, written once: RuntimeConfig and Env (the TILECOMM_*
/// variables, runtime/env.cpp) both start from these values.

#include <cstddef>

namespace tilecomm::defaults {

/// Compute units per Device (TILECOMM_CUS); 0: the cores in the affinity mask, shared among the
/// node's ranks when their masks overlap (see RuntimeConfig::num_cus).
inline constexpr int kNumCus = 0;
/// Resident-workgroup slots (worker threads) per CU (TILECOMM_WG_SLOTS).
inline constexpr int kWgSlotsPerCu = 2;
/// LDS capacity per CU, bytes (TILECOMM_LDS_BYTES).
inline constexpr std::size_t kLdsBytesPerCu = std::size_t{64} << 10;
/// Pin CU threads to cores when the affinity mask has exactly one core per CU (TILECOMM_PIN).
inline constexpr bool kPinThreads = true;
/// Busy-spin before an idle waiter yields and then sleeps, microseconds (TILECOMM_SPIN_US).
inline constexpr double kSpinUs = 50.0;
/// Deadline of every wait, seconds; 0: none (TILECOMM_TIMEOUT_S).
inline constexpr double kTimeoutS = 300.0;
/// Shared-memory data segment per rank, bytes (TILECOMM_SHM_BYTES).
inline constexpr std::size_t kShmBytes = std::size_t{8} << 20;
/// Pretend nodes of this many ranks; 0: the real nodes (TILECOMM_NODE_SIZE).
inline constexpr int kNodeSize = 0;
/// Verify mode: fingerprint every call across ranks (TILECOMM_CHECK).
inline constexpr bool kCheck = false;

}  // namespace tilecomm::defaults
