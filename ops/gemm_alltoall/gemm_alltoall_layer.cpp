// GemmAllToAll::run_layer: the whole expert layer — dispatch of the routed tokens, the expert
// GEMMs, the return of the results — in one call.
//
// Unfused modes dispatch with tilecomm::alltoallv into x_in (source by source), then run run()'s
// sequential or shaped path on it. The fused mode is one BlockExchange call with inputs: every
// rank's first tasks send each owner the rows it routed to each of the owner's experts (one block
// per (owner, expert, GEMM row tile): an on-node copy into the owner's input half plus a flag, or
// one MPI message the owner's proxy receives into that half); a GEMM tile of (expert e, source s)
// awaits s's block of its rows, then computes straight into its destination as run()'s fused mode
// does. Tiles are ordered by when their rows can be there: this rank's own rows first (no wait),
// then other on-node sources, then off-node ones, each class in the rotated source order (rank - 1
// first).
#include <fmt/format.h>

#include <algorithm>

#include "ops/common/op_util.hpp"
#include "ops/gemm_alltoall/gemm_alltoall_impl.hpp"
#include "tilecomm/collectives.hpp"

namespace tilecomm {
namespace detail {

std::size_t GemmAllToAllImpl::input_slot(int owner, int src) const {
  std::size_t rows = 0;
  for (int q = 0; q < src; ++q)
    if (q != owner) rows += std::min(max_out_of[q], max_in_of[owner]);
  return rows * k;
}

void GemmAllToAllImpl::dispatch_tokens(const float* tokens) {
  const int p = topo.size;
  const std::size_t ne = local_experts;
  if (x_in.size() < max_in * k) x_in.resize(max_in * k);
  VarLayout send_layout, recv_layout;
  send_layout.capacity = route.rows_out * k;
  recv_layout.capacity = route.rows_in * k;
  for (int q = 0; q < p; ++q) {
    const std::size_t r0 = y_row(first_expert[q]), r1 = y_row(first_expert[q + 1]);
    send_layout.displs.push_back(r0 * k);
    send_layout.counts.push_back((r1 - r0) * k);
    std::size_t rows = 0;  // from q, for all my experts (contiguous in x_in: source-major)
    for (std::size_t e = 0; e < ne; ++e)
      rows += route.recv_counts[e * p + q];
    recv_layout.displs.push_back((ne > 0 ? route.x_row[q] : 0) * k);
    recv_layout.counts.push_back(rows * k);
  }
  alltoallv(ctx.communicator, tokens, send_layout, x_in.data(), recv_layout, DataType::Float32,
            {ctx.options.algorithm});
}

void GemmAllToAllImpl::run_fused_layer(const float* tokens, float* y) {
  const bool into_view = zero_copy(y);
  fused_exchange.map_inputs();  // the first fused run_layer call: collective over the node, once
  const int me = topo.rank, p = topo.size, my_local = topo.local_rank;
  const std::size_t ne = local_experts;
  // Inputs sent: to each owner o, the rows routed to each of its experts, one block per GEMM row
  // tile (the owner's tile awaits exactly its rows; small blocks also stay below MPI's eager
  // limit, so they flow without the owner's progress), owners rotated by rank.
  std::vector<InputRoute> sends;
  for (int o : ctx.destination_order(true)) {
    if (o == me) continue;
    std::size_t offset = input_slot(o, me);
    for (std::size_t g = first_expert[o]; g < first_expert[o + 1]; ++g) {
      const std::size_t rows = route.send_counts[g];
      for_row_tiles(o, rows, [&](std::size_t r, std::size_t h) {
        sends.push_back({o, tokens + (y_row(g) + r) * k, h * k, offset + r * k,
                         input_flag(me, g - first_expert[o], r / flag_rows)});
      });
      offset += rows * k;
    }
  }
  // Inputs expected, and where each source's block for expert e starts in this rank's half.
  std::vector<InputRoute> expected;
  std::vector<std::size_t> input_at(ne * p, 0);
  for (int s = 0; s < p; ++s) {
    if (s == me) continue;
    std::size_t offset = input_slot(me, s);
    for (std::size_t e = 0; e < ne; ++e) {
      const std::size_t rows = route.recv_counts[e * p + s];
      input_at[e * p + s] = offset;
      for_row_tiles(s, rows, [&](std::size_t r, std::size_t h) {
        expected.push_back({s, nullptr, h * k, offset + r * k, input_flag(s, e, r / flag_rows)});
      });
      offset += rows * k;
    }
  }
  // Tiles in the order their rows can be there: own, on-node sources, off-node sources.
  std::vector<int> sources{me};
  for (int s : ctx.source_order())
    if (topo.on_node(s)) sources.push_back(s);
  for (int s : ctx.source_order())
    if (!topo.on_node(s)) sources.push_back(s);
  const std::vector<GemmTile> tiles = make_tiles(0, ne, sources);
  std::vector<BlockRoute> produced;
  produced.reserve(tiles.size());
  for (const GemmTile& t : tiles) {
    BlockRoute r = result_route(t);
    if (t.src != me)  // its rows arrive in this call
      r.input = input_flag(t.src, t.expert, t.row0 / flag_rows);
    produced.push_back(r);
  }
  // The results coming back: as run()'s fused mode.
  const std::vector<BlockRoute> arrivals = result_arrivals();
  fused_exchange.run(
      produced, arrivals, y,
      [&](std::size_t i, float* dst, std::size_t ld) {
        const GemmTile& t = tiles[i];
        const float* rows = t.src == me ? tokens + y_row(first_expert[me] + t.expert) * k
                                        : fused_exchange.input_half(my_local, ctx.epoch()) +
                                              input_at[t.expert * p + t.src];
        kernels::gemm_tile(rows + t.row0 * k, k, t.row1 - t.row0, packed, t.expert, t.col0,
                           t.col1 - t.col0, dst, ld);
      },
      &headers, into_view, sends, expected);
}

}  // namespace detail

void GemmAllToAll::run_layer(std::span<const float* const> weights, const float* tokens,
                             std::span<const std::size_t> recv_counts,
                             std::span<const std::size_t> send_counts, float* y, Mode mode) {
  detail::GemmAllToAllImpl& op = *impl_;
  op.fused_exchange.release_outputs();  // the previous call's output() view (if any) is released
  op.ctx.dispatch(
      mode, {op.k, op.n, op.experts()},
      [&] { op.prepare_call(weights, tokens, recv_counts, send_counts, y, mode, true); },
      [&] {
        op.dispatch_tokens(tokens);
        op.run_sequential(op.x_in.data(), y);
      },
      [&] {
        op.dispatch_tokens(tokens);
        op.run_shaped(op.x_in.data(), y);
      },
      [&] { op.run_fused_layer(tokens, y); }, 1);
}

void GemmAllToAll::run_layer(const float* tokens, std::span<const std::size_t> recv_counts,
                             std::span<const std::size_t> send_counts, float* y, Mode mode) {
  run_layer({}, tokens, recv_counts, send_counts, y, mode);
}

}  // namespace tilecomm
