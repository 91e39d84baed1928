#pragma once
/// \file calibrate.hpp
/// Calibration of the performance model behind Mode::Auto (docs/model.md): measures this machine's
/// compute, message and overhead costs and writes them as a JSON profile.

#include <string>

#include "tilecomm/communicator.hpp"
#include "tilecomm/device.hpp"

namespace tilecomm {

struct CalibrateOptions {
  /// Where rank 0 writes the profile: "" = TILECOMM_PROFILE, else the default path
  /// ($XDG_CACHE_HOME or ~/.cache, tilecomm/profile-<host>-<version>.json).
  std::string path;
  /// Rank 0 prints a summary table to stdout.
  bool print = true;
};

/// Collective over `comm` (any size; 1 rank measures no paths). Every rank times the compute
/// kernels on one CU of its own (at once, as in a real call); rank 0 and a partner time the
/// message paths (shared memory with an on-node partner, MPI with an off-node one, or with an
/// on-node one when the job has no second node: the pretend-node path), the flags, a kernel
/// launch on `device` and a barrier. Rank 0 writes the profile (its host's compute figures) and
/// every rank returns the path. About 2 s at 2 ranks on 2 cores.
std::string calibrate(Communicator& comm, Device& device, const CalibrateOptions& options = {});

}  // namespace tilecomm
