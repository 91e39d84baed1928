#pragma once
// The performance model (issue 15 §2, docs/model.md): from an operator's shape, the rank layout
// and a calibrated Profile, the time of one call in each mode. Pure arithmetic, no MPI: Auto
// (OpContext), `tilecomm_info --explain` and a simulator use the same terms.
#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ops/gemv_allreduce/gemv_allreduce_plan.hpp"
#include "ops/model/profile.hpp"
#include "tilecomm/ops.hpp"

namespace tilecomm::model {

enum class OpKind { GemvAllReduce, EmbeddingAllToAll, GemmAllToAll, GemmReduceScatter };

/// "gemv_allreduce", "embedding_alltoall", "gemm_alltoall", "gemm_reduce_scatter".
std::string_view to_string(OpKind op) noexcept;
/// The inverse; Error(InvalidArgument) listing the names.
OpKind parse_op(std::string_view name);

/// Ranks, nodes (ranks spread evenly) and the CUs and WG slots of each rank's device.
struct Layout {
  int ranks = 1, nodes = 1, cus = 1, wg_slots = 1;
  int ranks_per_node() const { return (ranks + nodes - 1) / nodes; }
};

/// One call's shape, per rank. GemvAllReduce: m rows, k = K per rank, n vectors. GemmReduceScatter:
/// m rows, k = K per rank, n columns. GemmAllToAll: m = rows (tokens) this rank's experts compute,
/// k, n. EmbeddingAllToAll: m = global batch (bags), tables = tables per rank, pool = indices per
/// bag, n = dim. `tile`: the op's tile (rows, bags or token rows; 0: default_tile()).
struct OpShape {
  OpKind op = OpKind::GemvAllReduce;
  std::size_t m = 0, k = 0, n = 1, tables = 1, pool = 1, tile = 0;
};

/// Parses "M=4096,K=1024,n=1" (keys case-insensitive: m, k, n, dim (= n), batch and tokens
/// (= m), tables, experts (= tables), pool, tile). Error(InvalidArgument) naming a bad key or
/// value.
OpShape parse_shape(OpKind op, std::string_view text);

/// The off-node path as the tile rules take it: the link (`link_bytes_per_s`, else 1 / the MPI
/// fit's beta), and per message the CPU the MPI fits charge at both ends (intercepts) plus the
/// fused kernel's proxy latency. The defaults for a figure that is zero.
detail::OffNodePath off_node_path(const PathCost& mpi, double proxy_s, double link_bytes_per_s);
/// The path a profile measured (the link under load, Profile::proxy_s); the defaults where it has
/// no measured MPI path (a one-node calibration).
detail::OffNodePath off_node_path(const Profile& p);

/// The op's default tile for this layout, as its constructor chooses it (GemvAllReduce: the
/// two-shot rule, or one-shot's row blocks when gemv_fused_algorithm picks one-shot, cut for
/// `path`: the op's profile's off_node_path, else the defaults).
std::size_t default_tile(const OpShape& s, const Layout& l, const detail::OffNodePath& path = {});

/// Predicted seconds of one call per mode, and the terms they are made of.
struct Prediction {
  double sequential = 0, shaped = 0, fused = 0;
  double compute = 0;     ///< all of this rank's tiles on its CUs
  double collective = 0;  ///< the whole collective after the compute (sequential's second half)
  double tile = 0;        ///< one tile on one CU
  std::size_t tiles = 0;
  double at(Mode m) const {
    return m == Mode::Sequential ? sequential : m == Mode::Shaped ? shaped : fused;
  }
};

Prediction predict(const Profile& p, const OpShape& s, const Layout& l, const OpOptions& o);

/// Auto's use of the predictions (the slowest rank's, agreed): when the fastest mode is predicted
/// faster than every other by more than kModelMargin (best x (1 + margin) < other), settle on it
/// at once; otherwise measure the plausible candidates only: the modes predicted within the margin
/// of the best, in Sequential, Shaped, Fused order. The margin is the model's error on how the
/// modes of one call rank: on the balanced-shape rows (2026-11-26) it predicted fused 1.94x
/// sequential where fused measured 0.65x (GemmAllToAll, K = 1, one node: a 3x error); once the
/// shared-memory All-to-All ran 2-3x faster (2026-11-28), it predicted sequential 3.17x fused on
/// that row where sequential measured 0.73-1.35x (a 4.3x error, the other way). So a mode is only
/// trusted, or ruled out, 4x apart (3x until then; 20 % before that, when Auto with a profile
/// ruled out the fastest mode on 2 of 11 rows). Overlap alone gains at most 2x, so in practice the
/// model settles at once only on a mode whose rivals pay far more fixed or per-message costs.
inline constexpr double kModelMargin = 3.0;
struct ModelChoice {
  std::optional<Mode> settle;
  std::vector<Mode> candidates;
};
ModelChoice choose_from_model(const std::array<double, 3>& predicted, double margin = kModelMargin);

}  // namespace tilecomm::model
