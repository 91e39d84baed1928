#pragma once
// GemvAllReduce's calls as simulator programs, planned by the operator's own GemvBlocks and task
// orders (ops/gemv_allreduce/gemv_allreduce_plan.hpp): the fused kernel's one-shot and two-shot
// forms, and the tile and block rules the unfused modes share (sim_ops.cpp).
#include <cstddef>

#include "collectives/topology.hpp"
#include "ops/gemv_allreduce/gemv_allreduce_plan.hpp"
#include "ops/model/sim.hpp"
#include "ops/model/sim_ops.hpp"

namespace tilecomm::model {

/// A GEMV tile of `rows`: its W streamed from memory, from the caches, or the warm share's blend.
double gemv_tile_s(const Profile& p, const SimSetup& s, std::size_t rows);
/// The call's row blocks at the simulated tile (sim_tile).
detail::GemvBlocks gemv_blocks(const SimSetup& s);
/// The fused algorithm the operator picks for the call (one-shot or two-shot).
FusedAlgorithm gemv_algorithm(const SimSetup& s);
/// The fused call of rank topo.rank: gemv_allreduce_one_shot.cpp's or gemv_allreduce_fused.cpp's
/// tasks, as gemv_algorithm picks.
SimRank gemv_allreduce_fused(const Profile& p, const SimSetup& s, const detail::Topology& topo);

}  // namespace tilecomm::model
