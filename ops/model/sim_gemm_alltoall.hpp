#pragma once
// GemmAllToAll's calls as simulator programs, planned by the operator's own GemmAllToAllPlan
// (ops/gemm_alltoall/gemm_alltoall_plan.hpp). The simulated call is fused_perf's synthetic one:
// every rank routes shape.m rows over all experts (synthetic_moe_routing), shape.tables experts
// per rank, each K x N.
#include <cstdint>
#include <vector>

#include "collectives/topology.hpp"
#include "ops/model/sim.hpp"
#include "ops/model/sim_ops.hpp"

namespace tilecomm::model {

/// The fused call of rank topo.rank: GemmAllToAllImpl::run_fused, a BlockExchange with per-call
/// headers (block_exchange.cpp: send_header, produce, arrive, check_header).
SimRank gemm_alltoall_fused(const Profile& p, const SimSetup& s, const detail::Topology& topo);
/// The GEMM tiles of chunk c of nc (part c of this rank's experts, run_shaped; nc = 1: all,
/// run_sequential), in the order the unfused modes make them.
std::vector<double> gemm_alltoall_chunk_tiles(const Profile& p, const SimSetup& s,
                                              const detail::Topology& topo, std::size_t c,
                                              std::size_t nc);
/// The All-to-Allv of chunk c of nc (GemmAllToAllImpl::exchange): to each source the rows of this
/// rank's chunk experts, from each owner the rows of its chunk experts.
std::vector<SimStep> gemm_alltoall_chunk_collective(const Profile& p, const SimSetup& s,
                                                    const detail::Topology& topo, std::size_t c,
                                                    std::size_t nc, std::uint64_t base, double hot);

}  // namespace tilecomm::model
