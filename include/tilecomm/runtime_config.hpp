#pragma once
/// \file runtime_config.hpp
/// RuntimeConfig: how a Device (the CPU device model) is built.

#include <cstddef>
#include <string>

#include "tilecomm/defaults.hpp"

namespace tilecomm {

/// How a Device is built. Start from from_env() to honour TILECOMM_* variables, then override.
struct RuntimeConfig {
  /// Compute units (CUs), one worker group each. 0 means: the cores in this process's affinity
  /// mask, shared with the other ranks of the node when their masks overlap — when node_ranks x
  /// (cores in the mask) exceeds the node's online cores, each rank takes
  /// max(1, min(cores in mask, online cores / node_ranks)). So `mpirun -np 2` on 2 cores without
  /// binding gives each rank 1 CU (not 2 CUs on 2 shared cores), and ranks bound to their own cores
  /// keep them all.
  int num_cus = defaults::kNumCus;
  /// Ranks sharing this node's cores (used only when num_cus = 0). from_env() takes it from the
  /// launcher (OMPI_COMM_WORLD_LOCAL_SIZE or MPI_LOCALNRANKS), 1 when there is none.
  int node_ranks = 1;
  /// Resident-workgroup slots per CU (worker threads per CU). LDS may allow fewer.
  int wg_slots_per_cu = defaults::kWgSlotsPerCu;
  /// LDS (shared scratch) capacity of each CU in bytes; a WG is placed only where its request fits.
  std::size_t lds_bytes_per_cu = defaults::kLdsBytesPerCu;
  /// Pin CU i's threads to the i-th core of the affinity mask when the mask has exactly num_cus
  /// cores (the default num_cus); with fewer CUs than cores, threads are left to the OS.
  bool pin_threads = defaults::kPinThreads;
  /// Record a timeline of every workgroup and user mark (see Device::trace()).
  bool trace = false;
  /// When non-empty (and trace is on), the Device writes its trace here when destroyed.
  std::string trace_path;
  /// Busy-spin this long (microseconds) before an idle waiter yields and then sleeps.
  double spin_us = defaults::kSpinUs;

  /// Defaults overridden by TILECOMM_CUS, _WG_SLOTS, _LDS_BYTES, _PIN, _TRACE, _SPIN_US.
  static RuntimeConfig from_env();
};

}  // namespace tilecomm
