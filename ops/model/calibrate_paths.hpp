#pragma once
// The message paths' costs, for tilecomm::calibrate (calibrate.cpp): MPI and the on-node segment
// by ping-pong, and the fused kernel's proxy. Internal.
#include "ops/model/profile.hpp"
#include "tilecomm/communicator.hpp"
#include "tilecomm/device.hpp"

namespace tilecomm::model {

/// MPI ping-pong between rank 0 and `partner` (the others return at once): latency and per-byte
/// cost of a message, the CPU of its send and of its receive, 8 B - 1 MiB. Measured on rank 0.
PathCost calibrate_mpi(Communicator& comm, int partner);
/// Shared-memory ping-pong between rank 0 and local rank 1 through the node's symmetric segment
/// (collective over the node); `flag_s` gets the fit's intercept, a zero-byte handshake. Measured
/// on rank 0; unmeasured without a second rank on the node.
PathCost calibrate_shm(Communicator& comm, double& flag_s);
/// The fused kernel's off-node path as it runs: the one-way time of an 8-byte tile through the
/// proxy on rank 0; -1 elsewhere. Collective over `comm`.
double proxy_one_way(Communicator& comm, Device& device, int partner);

}  // namespace tilecomm::model
