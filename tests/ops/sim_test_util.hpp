#pragma once
// What the simulator's tests (test_sim.cpp, test_sim_collectives.cpp) share.
#include "ops/model/sim.hpp"
#include "ops/model/sim_ops.hpp"

namespace tilecomm::model::test {

inline constexpr double kMs = 1e-3;

// No CPU for messages, no flag or proxy latency: only what a test sets.
inline SimCosts bare(double latency_s, double bytes_per_s) {
  SimCosts c;
  c.net.latency_s = latency_s;
  c.net.link_bytes_per_s = bytes_per_s;
  return c;
}

// An operator call on `nodes` x `ranks_per_node` ranks of one CU and one slot each.
inline SimSetup one_slot(const OpShape& shape, int nodes, int ranks_per_node) {
  SimSetup s;
  s.shape = shape;
  s.nodes = nodes;
  s.ranks_per_node = ranks_per_node;
  s.cus = 1;
  s.slots = 1;
  return s;
}

}  // namespace tilecomm::model::test
