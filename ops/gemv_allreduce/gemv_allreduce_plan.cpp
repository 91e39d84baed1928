#include "ops/gemv_allreduce/gemv_allreduce_plan.hpp"

#include <algorithm>
#include <cmath>

#include "ops/common/op_util.hpp"
#include "ops/common/plan_layout.hpp"

namespace tilecomm::detail {
namespace {

/// Fused outputs (the AllReduce payload, M x n floats) up to this size take the one-shot protocol
/// (FusedAlgorithm::Auto) on one node: decode's projections (4-64 KiB per vector) are
/// latency-bound; above it, two-shot's fewer bytes per rank win. Between two nodes one-shot
/// takes every size: each node sends the other the payload S either way (two-shot: S / 2 of
/// partials to the owners, S / 2 of sums back), and one-shot needs one round, not two chained
/// through the owners' reduces, in eager blocks, not 16 KiB tiles. At 2 x 1 and 10 Gbit/s,
/// M = 262144 (1 MiB) fused two-shot took 1.39-1.42x sequential's time and one-shot 0.97-0.99x;
/// 1 and 5 Gbit/s level or better (docs/ops.md, "GEMV between two nodes").
constexpr std::size_t kOneShotMaxBytes = std::size_t{256} << 10;
/// Across more than two nodes one-shot also needs each node to send at most this much in all:
/// a node's leader sends the payload to every other node, (nodes - 1) x S, where two-shot sends
/// under 2 S. Measured at 3 and 4 emulated nodes x 1 rank, 1 Gbit/s (docs/ops.md, "GEMV across
/// more than two nodes"): at S = 16 KiB (32 and 48 KiB out) one-shot is level with
/// sequential and two-shot 51-67 % slower; at 32 KiB (64 and 96 KiB out) one-shot is 16-47 %
/// slower and two-shot 4-14 % faster; at 64 KiB one-shot is 52-135 % slower.
constexpr std::size_t kOneShotMaxNodeBytes = std::size_t{48} << 10;
/// Two-shot across nodes: every tile is an MPI message of this many bytes of Y (fewer when a WG
/// slot would otherwise get no tile). Measured at 2 and 4 emulated nodes, 1 Gbit/s, M = 64 Ki and
/// 256 Ki rows: 16 KiB tiles beat 4 KiB ones by 8-38 points of speed-up and tie with 32 KiB ones.
constexpr std::size_t kOffNodeTileBytes = std::size_t{16} << 10;
/// One-shot row blocks. The call's exposed communication is about the last block's transfer,
/// S / n x beta, plus the message cost of every block, n x c: n = sqrt(S beta / c) minimises it
/// across nodes, taken as the better of the multiples of the compute WGs either side (every WG
/// computes a block), with every block an eager message (kOffNodeEagerBytes: at 2 x 10 Gbit/s,
/// 128 KiB in 2 blocks of 64 KiB took 167 us, in the defaults' 6 blocks 120). On a node: two
/// blocks per compute WG, for balance. At least 16 rows. `bytes`: the payload, M x batch floats.
std::size_t one_shot_tile(std::size_t m, std::size_t bytes, std::size_t compute_wgs,
                          bool spans_nodes, const OffNodePath& path) {
  const std::size_t w = std::max<std::size_t>(1, compute_wgs);
  std::size_t n = 2 * w;
  if (spans_nodes) {
    const double s_beta = static_cast<double>(bytes) / path.bytes_per_us;
    const double c = std::max(path.message_us, 1e-3);
    auto exposed = [&](std::size_t blocks) { return double(blocks) * c + s_beta / double(blocks); };
    const double best = std::sqrt(s_beta / c);
    const std::size_t fewest = (bytes + kOffNodeEagerBytes - 1) / kOffNodeEagerBytes;
    const std::size_t below = std::max(
        {std::size_t{1}, static_cast<std::size_t>(best / double(w)), (fewest + w - 1) / w});
    n = below * w;
    if (exposed((below + 1) * w) < exposed(n)) n = (below + 1) * w;
  }
  return std::max<std::size_t>(16, ((m + n - 1) / n + 15) / 16 * 16);
}

}  // namespace

std::size_t GemvBlocks::first_block(int o) const {
  return split_begin(blocks, static_cast<std::size_t>(ranks), static_cast<std::size_t>(o));
}

int GemvBlocks::owner(std::size_t b) const {
  int o = 0;
  while (o + 1 < ranks && first_block(o + 1) <= b)
    ++o;
  return o;
}

FusedAlgorithm gemv_fused_algorithm(FusedAlgorithm requested, std::size_t payload_bytes,
                                    int nodes) {
  if (requested != FusedAlgorithm::Auto) return requested;
  const auto others = static_cast<std::size_t>(std::max(1, nodes) - 1);
  const bool one_shot =
      others == 1 || (payload_bytes <= kOneShotMaxBytes &&
                      (others == 0 || others * payload_bytes <= kOneShotMaxNodeBytes));
  return one_shot ? FusedAlgorithm::OneShot : FusedAlgorithm::TwoShot;
}

std::size_t gemv_default_tile(std::size_t m, std::size_t k, std::size_t n, FusedAlgorithm algorithm,
                              std::size_t wg_slots, int ranks, bool spans_nodes,
                              const OffNodePath& path) {
  // Two-shot on one node: about 8 tiles per WG slot of the job, a multiple of 16, 16..1024 rows
  // (4 KiB of Y: with n vectors, n times fewer rows). A block also carries enough work to pay
  // for its three tasks (min_node_tile_rows: a row reads k floats of W and stores and reduces n
  // partials), yet every WG slot of the job keeps two blocks: a thin W (k = 1: 1024 rows are
  // 12 KiB of work) takes far larger blocks.
  // Two-shot across nodes: each tile is an MPI message, and Open MPI's per-message cost over TCP
  // outweighs finer overlap (docs/ops.md, "Tile size across nodes"): kOffNodeTileBytes of Y, or
  // less when that would leave a WG slot of the rank without a block (every mode computes in
  // these tiles), even when some ranks get no block to reduce (M = 8192 on 4 nodes of 2 slots:
  // 2 blocks of 4096 rows were 4-13 % faster than sequential, 4 of 2048 rows 11-17 % slower).
  // One-shot: one_shot_tile() (the host drives the proxy: every WG slot computes).
  if (algorithm == FusedAlgorithm::OneShot)
    return one_shot_tile(m, m * n * sizeof(float), wg_slots, spans_nodes, path);
  const auto p = static_cast<std::size_t>(std::max(1, ranks));
  if (spans_nodes) {
    const std::size_t slots = std::max<std::size_t>(1, wg_slots);
    const std::size_t per_slot = ((m + slots - 1) / slots + 15) / 16 * 16;
    const std::size_t message = kOffNodeTileBytes / sizeof(float) / n / 16 * 16;
    return std::clamp<std::size_t>(per_slot, 16, std::max<std::size_t>(16, message));
  }
  const std::size_t target = 8 * wg_slots * p;
  const std::size_t max_tile = std::max<std::size_t>(16, 1024 / n);
  const std::size_t tile = std::clamp<std::size_t>((m / target + 15) / 16 * 16, 16, max_tile);
  const std::size_t paying =
      (min_node_tile_rows(double(k + 2 * n) * sizeof(float), double(k) * double(n)) + 15) / 16 * 16;
  const std::size_t most = m / std::max<std::size_t>(1, 2 * wg_slots * p) / 16 * 16;
  return std::max(tile, std::min(paying, most));
}

std::vector<std::size_t> gemv_two_shot_order(const Topology& topo, const GemvBlocks& g,
                                             bool remote_first) {
  const int me = topo.rank;
  const std::size_t blocks = g.blocks;
  const bool sums = relays_partials(topo);
  auto task = [&](GemvTwoShotTask kind, std::size_t b) {
    return static_cast<std::size_t>(kind) * blocks + b;
  };
  std::vector<std::size_t> order;
  bool pending = false;  // a node sum waits for the next compute to be in the list
  std::size_t node_sum = 0;
  auto compute = [&](std::size_t b) {
    order.push_back(task(GemvTwoShotTask::Compute, b));
    if (pending) order.push_back(node_sum), pending = false;
    const int o = g.owner(b);
    if (sums && !topo.on_node(o) && node_relay(topo, o, topo.node) == me)
      pending = true, node_sum = task(GemvTwoShotTask::NodeSum, b);
  };
  if (remote_first) {
    // Other owners' blocks first (off-node, then on-node, rotated), then each of mine followed by
    // its reduce, which waits for its own compute, which started first.
    for (int o : relay_destination_order(topo, true))
      for (std::size_t b = g.first_block(o); b < g.first_block(o + 1); ++b) {
        compute(b);
        if (o == me) order.push_back(task(GemvTwoShotTask::Reduce, b));
      }
  } else {
    for (std::size_t b = 0; b < blocks; ++b)
      compute(b);
  }
  if (pending) order.push_back(node_sum);
  if (!remote_first)
    for (std::size_t b = g.first_block(me); b < g.first_block(me + 1); ++b)
      order.push_back(task(GemvTwoShotTask::Reduce, b));
  for (std::size_t b = 0; b < blocks; ++b)
    if (g.owner(b) != me) order.push_back(task(GemvTwoShotTask::Gather, b));
  return order;
}

int gemv_leader(const Topology& topo, int node, std::size_t b) {
  const std::vector<int>& ranks = topo.node_ranks[node];
  return ranks[b % ranks.size()];
}

std::vector<std::size_t> gemv_one_shot_order(const Topology& topo, const GemvBlocks& g,
                                             std::size_t lag) {
  const std::size_t blocks = g.blocks;
  auto task = [&](GemvOneShotTask kind, std::size_t b) {
    return static_cast<std::size_t>(kind) * blocks + b;
  };
  const bool node_sums = topo.num_nodes > 1 && topo.local_size > 1;
  std::vector<std::size_t> node_reduces;
  for (std::size_t b = 0; b < blocks; ++b)
    if (node_sums && gemv_leader(topo, topo.node, b) == topo.rank) node_reduces.push_back(b);
  std::vector<std::size_t> order;
  std::size_t next = 0;  // next node reduce to list
  for (std::size_t b = 0; b < blocks; ++b) {
    order.push_back(task(GemvOneShotTask::Compute, b));
    while (next < node_reduces.size() && node_reduces[next] + lag <= b)
      order.push_back(task(GemvOneShotTask::NodeReduce, node_reduces[next++]));
  }
  for (; next < node_reduces.size(); ++next)
    order.push_back(task(GemvOneShotTask::NodeReduce, node_reduces[next]));
  order.push_back(task(GemvOneShotTask::Final, 0));  // one WG reduces every block, in order
  return order;
}

}  // namespace tilecomm::detail
