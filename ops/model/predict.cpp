// The model's formulas; docs/model.md states them in prose.
#include "ops/model/predict.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>

#include "ops/embedding_alltoall/embedding_alltoall_plan.hpp"
#include "ops/gemm_alltoall/gemm_alltoall_plan.hpp"
#include "ops/gemm_reduce_scatter/gemm_reduce_scatter_plan.hpp"
#include "ops/gemv_allreduce/gemv_allreduce_plan.hpp"
#include "tilecomm/error.hpp"

namespace tilecomm::model {
namespace {

constexpr std::array<Mode, 3> kModes = {Mode::Sequential, Mode::Shaped, Mode::Fused};
constexpr double kFloat = sizeof(float);

std::size_t ceil_div(std::size_t a, std::size_t b) {
  return b ? (a + b - 1) / b : 0;
}

// The path between two ranks of the layout's busiest class: off-node when the job spans nodes.
// A path the profile did not measure borrows the other's figures.
const PathCost& path(const Profile& p, bool off_node) {
  const PathCost& want = off_node ? p.mpi : p.shm;
  const PathCost& other = off_node ? p.shm : p.mpi;
  return want.measured || !other.measured ? want : other;
}

// Collective of `bytes` per rank over p ranks: messages x alpha + bytes moved x beta (+ the bytes
// reduced x the reduction's per-byte cost). AllReduce as ReduceScatter + AllGather.
struct Coll {
  double time = 0;  // wall time
  double cpu = 0;   // CPU it takes from the cores (shm: the copies; MPI: per-message CPU)
};
enum class CollKind { AllReduce, AllToAll, ReduceScatter };
Coll collective(const Profile& p, const Layout& l, CollKind kind, double bytes) {
  const int ranks = l.ranks;
  if (ranks <= 1) return {};
  const bool off = l.nodes > 1;
  const PathCost& pc = path(p, off);
  const double share = (ranks - 1.0) / ranks * bytes;  // bytes each rank sends per step
  const double steps = kind == CollKind::AllReduce ? 2.0 : 1.0;
  const double msgs = steps * (ranks - 1);
  const double msg_bytes = bytes / ranks;
  const double reduced = kind == CollKind::AllToAll ? 0.0 : share;
  Coll c;
  c.time = msgs * pc.alpha() + steps * share * pc.beta() + p.reduce.c[1] * reduced;
  c.cpu = (off ? msgs * (pc.cpu_send.at(msg_bytes) + pc.cpu_recv.at(msg_bytes))
               : steps * share * pc.beta()) +
          p.reduce.c[1] * reduced;
  return c;
}

// What one rank's fused kernel does: tiles, their compute, the messages they become.
struct Work {
  std::size_t tiles = 0;
  double tile_s = 0;      // one tile on one CU
  double tile_bytes = 0;  // one tile's message
  double off_bytes = 0;   // one off-node tile's message (GemmAllToAll's are larger)
  double payload = 0;     // the collective's bytes per rank (sequential, shaped)
  CollKind kind = CollKind::AllToAll;
  double msgs_off = 0, msgs_on = 0;  // fused: messages to off-node / other on-node ranks
  double reduce_bytes = 0;           // fused: bytes this rank adds
};

// The GEMV fused protocol the operator runs for this shape and layout by default
// (gemv_allreduce_plan.hpp).
bool gemv_one_shot(const OpShape& s, const Layout& l) {
  return detail::gemv_fused_algorithm(FusedAlgorithm::Auto, s.m * s.n * sizeof(float), l.nodes) ==
         FusedAlgorithm::OneShot;
}

Work work_of(const Profile& p, const OpShape& s, const Layout& l, const OpOptions& o) {
  const double ranks = l.ranks, q = l.ranks_per_node();
  const double off = (ranks - q) / ranks, on = (q - 1) / ranks;  // shares of destinations
  const std::size_t tile = s.tile ? s.tile : default_tile(s, l, off_node_path(p));
  Work w;
  switch (s.op) {
    case OpKind::GemvAllReduce: {
      w.tiles = ceil_div(s.m, tile);
      w.tile_s = p.gemv.at(double(tile), double(tile) * s.k * s.n);
      w.tile_bytes = double(tile) * s.n * kFloat;
      w.payload = double(s.m) * s.n * kFloat;
      w.kind = CollKind::AllReduce;
      if (gemv_one_shot(s, l)) {  // one-shot: every block to every peer, reduced everywhere
        w.msgs_off = w.tiles * (ranks - q);
        w.msgs_on = w.tiles * (q - 1);
        w.reduce_bytes = (ranks - 1) * w.payload;
      } else {  // two-shot: a block's partial to its owner, the sum back
        w.msgs_off = 2 * w.tiles * off;
        w.msgs_on = 2 * w.tiles * on;
        w.reduce_bytes = (ranks - 1) / ranks * w.payload;
      }
      break;
    }
    case OpKind::EmbeddingAllToAll: {
      const std::size_t bags_per_dest = ceil_div(s.m, static_cast<std::size_t>(l.ranks));
      w.tiles = static_cast<std::size_t>(l.ranks) * s.tables * ceil_div(bags_per_dest, tile);
      const double t = std::min<double>(tile, bags_per_dest);
      w.tile_s = p.embedding.at(t * s.pool, t * s.pool * s.n);
      w.tile_bytes = t * s.n * kFloat;
      w.payload = double(s.m) * s.tables * s.n * kFloat;
      w.msgs_off = w.tiles * off;
      w.msgs_on = w.tiles * on;
      break;
    }
    case OpKind::GemmAllToAll:
    case OpKind::GemmReduceScatter: {
      const std::size_t cols = std::min<std::size_t>(s.n, 256);
      const std::size_t col_blocks = s.op == OpKind::GemmAllToAll ? ceil_div(s.n, cols) : 1;
      const std::size_t tile_cols = s.op == OpKind::GemmAllToAll ? cols : s.n;
      w.tiles = ceil_div(s.m, tile) * col_blocks;
      w.tile_s = p.gemm.at(double(tile), double(tile) * s.k * tile_cols);
      w.tile_bytes = double(tile) * tile_cols * kFloat;
      w.payload = double(s.m) * s.n * kFloat;
      w.kind = s.op == OpKind::GemmAllToAll ? CollKind::AllToAll : CollKind::ReduceScatter;
      w.msgs_off = w.tiles * off;
      w.msgs_on = w.tiles * on;
      if (s.op == OpKind::GemmReduceScatter) w.reduce_bytes = (ranks - 1) / ranks * w.payload;
      if (s.op == OpKind::GemmAllToAll && !o.tile) {  // the operator's own off-node rows
        const std::size_t off_rows = detail::gemm_alltoall_off_rows(s.n);
        w.msgs_off = double(ceil_div(s.m, off_rows) * col_blocks) * off;
        w.off_bytes = double(off_rows) * tile_cols * kFloat;
      }
      break;
    }
  }
  if (w.off_bytes == 0) w.off_bytes = w.tile_bytes;
  return w;
}

std::size_t parse_size(std::string_view key, std::string_view v) {
  std::size_t x = 0;
  const auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || ptr != v.data() + v.size())
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("shape: {}={} is not a non-negative integer", key, v));
  return x;
}

}  // namespace

std::string_view to_string(OpKind op) noexcept {
  switch (op) {
    case OpKind::GemvAllReduce:
      return "gemv_allreduce";
    case OpKind::EmbeddingAllToAll:
      return "embedding_alltoall";
    case OpKind::GemmAllToAll:
      return "gemm_alltoall";
    case OpKind::GemmReduceScatter:
      return "gemm_reduce_scatter";
  }
  return "?";
}

OpKind parse_op(std::string_view name) {
  for (OpKind op : {OpKind::GemvAllReduce, OpKind::EmbeddingAllToAll, OpKind::GemmAllToAll,
                    OpKind::GemmReduceScatter})
    if (to_string(op) == name) return op;
  throw Error(ErrorCode::InvalidArgument,
              fmt::format("op '{}' is not one of: gemv_allreduce, embedding_alltoall, "
                          "gemm_alltoall, gemm_reduce_scatter",
                          name));
}

OpShape parse_shape(OpKind op, std::string_view text) {
  OpShape s;
  s.op = op;
  while (!text.empty()) {
    const auto comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
    const auto eq = item.find('=');
    if (eq == std::string_view::npos)
      throw Error(ErrorCode::InvalidArgument, fmt::format("shape: '{}' is not KEY=VALUE", item));
    std::string key(item.substr(0, eq));
    for (char& ch : key)
      ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    const std::size_t v = parse_size(key, item.substr(eq + 1));
    if (key == "m" || key == "batch" || key == "tokens")
      s.m = v;
    else if (key == "k")
      s.k = v;
    else if (key == "n" || key == "dim")
      s.n = v;
    else if (key == "tables" || key == "experts")
      s.tables = v;
    else if (key == "pool")
      s.pool = v;
    else if (key == "tile")
      s.tile = v;
    else
      throw Error(ErrorCode::InvalidArgument,
                  fmt::format("shape: key '{}' is not one of m, k, n, dim, batch, tokens, tables, "
                              "experts, pool, tile",
                              key));
  }
  if (s.m == 0 || s.n == 0 || (s.op != OpKind::EmbeddingAllToAll && s.k == 0))
    throw Error(ErrorCode::InvalidArgument,
                fmt::format("shape: {} needs m{} and n > 0", to_string(op),
                            op == OpKind::EmbeddingAllToAll ? "" : ", k"));
  return s;
}

detail::OffNodePath off_node_path(const PathCost& mpi, double proxy_s, double link_bytes_per_s) {
  detail::OffNodePath path;
  const double link = link_bytes_per_s > 0 ? link_bytes_per_s
                      : mpi.beta() > 0     ? 1 / mpi.beta()
                                           : 0.0;
  const double message = std::max(0.0, mpi.cpu_send.at(0)) + std::max(0.0, mpi.cpu_recv.at(0)) +
                         std::max(0.0, proxy_s);
  if (link > 0) path.bytes_per_us = link * 1e-6;
  if (message > 0) path.message_us = message * 1e6;
  return path;
}

detail::OffNodePath off_node_path(const Profile& p) {
  return p.mpi.measured ? off_node_path(p.mpi, p.proxy_s, p.link_bytes_per_s)
                        : detail::OffNodePath{};
}

std::size_t default_tile(const OpShape& s, const Layout& l, const detail::OffNodePath& path) {
  // The operators' own rules (their _plan headers), so the model plans the tiles they cut.
  const std::size_t slots = static_cast<std::size_t>(std::max(1, l.cus * l.wg_slots));
  const int p = std::max(1, l.ranks);
  switch (s.op) {
    case OpKind::GemvAllReduce:
      return detail::gemv_default_tile(
          s.m, s.k, s.n, gemv_one_shot(s, l) ? FusedAlgorithm::OneShot : FusedAlgorithm::TwoShot,
          slots, p, l.nodes > 1, path);
    case OpKind::EmbeddingAllToAll:
      return detail::embedding_default_tile(s.m, p, s.tables * static_cast<std::size_t>(p), slots,
                                            s.n, l.nodes > 1);
    case OpKind::GemmAllToAll:
      return detail::gemm_alltoall_node_rows(s.k, s.n, detail::kGemmAllToAllTileRows);
    case OpKind::GemmReduceScatter:
      return detail::gemm_rs_default_tile(s.m, slots, s.n, l.nodes > 1);
  }
  return 1;
}

Prediction predict(const Profile& p, const OpShape& s, const Layout& l, const OpOptions& o) {
  const Work w = work_of(p, s, l, o);
  const double cus = std::max(1, l.cus);
  Prediction r;
  r.tiles = w.tiles;
  r.tile = w.tile_s;
  // Tiles spread over the CUs; never less than one tile's time.
  r.compute = w.tiles ? std::max(w.tiles * w.tile_s / cus, w.tile_s) : 0.0;
  const Coll coll = collective(p, l, w.kind, w.payload);
  r.collective = coll.time;
  r.sequential = p.launch_s + r.compute + coll.time;

  // Shaped: k chunks, each a compute kernel then its collective, pipelined; CuMask leaves
  // free_cus CUs to communication. Bounded below by the CPU all of it needs on the cores.
  {
    const double k = double(std::clamp<std::size_t>(std::size_t(std::max(1, o.shaped.chunks)), 1,
                                                    std::max<std::size_t>(w.tiles, 1)));
    double ceff = cus;
    if (o.shaped.policy == ShapedPolicy::CuMask)
      ceff = std::max(1.0, cus - std::max(0, o.shaped.free_cus));
    // A chunk's compute takes at least one tile's time.
    const double c = std::max(w.tiles * w.tile_s / (k * ceff), w.tile_s) + p.launch_s;
    const Coll part = collective(p, l, w.kind, w.payload / k);
    const double m = part.time + p.launch_s;
    const double pipeline = c + (k - 1) * std::max(c, m) + m;
    const double cpu = (w.tiles * w.tile_s + k * part.cpu) / cus + k * p.launch_s;
    r.shaped = std::max(pipeline, cpu);
  }

  // Fused: one persistent kernel; per tile compute, then a store + flag (on-node) or an MPI
  // message through the proxy (off-node). The cores do the compute, the on-node copies, the
  // reductions and every message's CPU; the link moves the off-node bytes meanwhile.
  {
    const PathCost& mpi = path(p, true);
    const PathCost& shm = path(p, false);
    const double tb = w.tile_bytes, ob = w.off_bytes;
    const double cpu =
        w.tiles * w.tile_s + w.msgs_off * (mpi.cpu_send.at(ob) + mpi.cpu_recv.at(ob)) +
        w.msgs_on * (shm.cpu_send.at(tb) + shm.cpu_recv.at(tb)) + w.reduce_bytes * p.reduce.c[1];
    const double link = w.msgs_off > 0 ? w.msgs_off * ob * mpi.beta() : 0.0;
    // One proxy receives every off-node message, one at a time (as the simulator replays it): as
    // many receives as sends on average, each its receive CPU, however many cores compute.
    const double proxy = w.msgs_off * mpi.cpu_recv.at(ob);
    const double tail = w.msgs_off > 0  ? mpi.alpha() + p.proxy_s + ob * mpi.beta()
                        : w.msgs_on > 0 ? p.flag_s + tb * shm.beta()
                                        : 0.0;
    // A pipeline: the link starts after the first tile (fill), the last tile's transfer drains.
    r.fused = p.launch_s + std::max({cpu / cus, (w.tiles ? w.tile_s : 0.0) + link, proxy}) + tail;
  }
  return r;
}

ModelChoice choose_from_model(const std::array<double, 3>& t, double margin) {
  std::size_t best = 0;
  for (std::size_t i = 1; i < 3; ++i)
    if (t[i] < t[best]) best = i;
  ModelChoice c;
  bool clear = true;
  for (std::size_t i = 0; i < 3; ++i)
    if (i != best && !(t[best] * (1 + margin) < t[i])) clear = false;
  if (clear) {
    c.settle = kModes[best];
    return c;
  }
  for (std::size_t i = 0; i < 3; ++i)
    if (t[i] <= t[best] * (1 + margin)) c.candidates.push_back(kModes[i]);
  return c;
}

}  // namespace tilecomm::model
