#pragma once
// What the simulator's operator programs share (sim_ops.cpp, sim_gemv_allreduce.cpp,
// sim_gemm_alltoall.cpp): message keys, the kernels' launch, the cores and the fused kernel's WGs
// of a rank. Private to ops/model.
#include <cstddef>
#include <cstdint>

#include "collectives/topology.hpp"
#include "ops/model/profile.hpp"
#include "ops/model/sim_ops.hpp"

namespace tilecomm::model::sim_detail {

inline constexpr double kFloat = sizeof(float);
// Message keys: kind << 40 | index (the kinds of one op never share a (source, destination,
// key)); collectives from kCollective + 16 x chunk.
inline constexpr std::uint64_t kPartial = 1ull << 40, kReduced = 2ull << 40, kNodeSum = 3ull << 40;
inline constexpr std::uint64_t kBlock = 4ull << 40, kChunkDone = 5ull << 40,
                               kCollective = 6ull << 40, kHeader = 7ull << 40;

// A kernel's launch and wait: one WG's, or, when its WGs take more than one slot, one WG per
// slot's (Profile::launch_grid_s: the workers beyond the first come in; where a rank has fewer
// cores than slots, each is a context switch on the first one's core). Older profiles: launch_s.
inline double kernel_launch_s(const Profile& p, std::size_t wgs, int slots) {
  return wgs > 1 && slots > 1 && p.launch_grid_s > 0 ? p.launch_grid_s : p.launch_s;
}

inline double cores_of(const SimSetup& s) {
  return s.cpu_share > 0 ? s.cpu_share : s.cus;
}

// The WGs of a fused kernel (FusedPlan::run): one per slot on one node; across nodes, where the
// host thread drives the proxy, one per CU.
inline int fused_wgs(const SimSetup& s, const detail::Topology& topo) {
  return topo.num_nodes > 1 ? s.cus : s.slots;
}

}  // namespace tilecomm::model::sim_detail
