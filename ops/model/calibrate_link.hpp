#pragma once
// The off-node link rate under load, for tilecomm::calibrate (calibrate.cpp).
#include "tilecomm/communicator.hpp"

namespace tilecomm::model {

/// Bytes per second one node's NIC sustains while every rank sends to every off-node rank at
/// once, in the library's eager pieces (63 KiB), round after round for at least `min_seconds` (a
/// token bucket in front of the link, tools/cluster's tbf, is drained by then): the busiest node's
/// bytes out per round over the slowest rank's time per round. 0 on one node. Collective over
/// `comm`.
double calibrate_link_rate(Communicator& comm, double min_seconds = 0.05);

}  // namespace tilecomm::model
