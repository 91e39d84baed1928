// GemmAllToAll: the per-call routing. Without verify mode a call communicates nothing before its
// tiles move: each rank checks its own arguments and what it can see alone (its own experts' rows
// from itself, a peer's max_rows_out), derives its routing from its own counts, and the fused
// kernel's per-call headers (gemm_alltoall_fused.cpp) compare the rest pair by pair. In verify mode
// every call first exchanges every rank's counts (one allgather), so every rank raises the same
// error.
#include <fmt/format.h>

#include <algorithm>

#include "ops/gemm_alltoall/gemm_alltoall_impl.hpp"

namespace tilecomm::detail {

Error routing_mismatch(int source, std::size_t sent, std::size_t g, int owner,
                       std::size_t expected) {
  return Error(ErrorCode::Mismatch,
               fmt::format("GemmAllToAll: rank {} routes {} rows to expert {} (on rank {}), which "
                           "expects {} rows from it",
                           source, sent, g, owner, expected));
}

std::string GemmAllToAllImpl::local_error(std::span<const float* const> weights, const float* x,
                                          std::span<const std::size_t> recv_counts,
                                          std::span<const std::size_t> send_counts, const float* y,
                                          Mode mode, bool check_y, bool layer) const {
  const int p = topo.size;
  const bool packed_already = weights.empty() && local_experts > 0;  // a call without weights
  if (packed_already && !weights_set)
    return "no weights: pass them, or call set_weights() before a call without them (a call "
           "with weights ends set_weights()' packing)";
  if (weights.size() != local_experts && !packed_already)
    return fmt::format("weights has {} entries; this rank owns {} experts", weights.size(),
                       local_experts);
  if (recv_counts.size() != local_experts * p)
    return fmt::format("recv_counts has {} entries; expected local experts x ranks = {}",
                       recv_counts.size(), local_experts * p);
  if (send_counts.size() != experts())
    return fmt::format("send_counts has {} entries; the job has {} experts", send_counts.size(),
                       experts());
  std::size_t in = 0, out = 0;
  for (std::size_t c : recv_counts)
    in += std::min<std::size_t>(c, max_in + 1);
  for (std::size_t c : send_counts)
    out += std::min<std::size_t>(c, max_out + 1);
  if (in > max_in)
    return fmt::format("recv_counts add up to {} rows, above max_rows_in = {}", in, max_in);
  if (out > max_out)
    return fmt::format("send_counts add up to {} rows, above max_rows_out = {}", out, max_out);
  for (std::size_t e = 0; e < weights.size(); ++e)
    if (weights[e] == nullptr) return fmt::format("weights[{}] is null", e);
  // run_layer: x is the caller's tokens, one row per result row.
  const std::size_t x_rows = layer ? out : in;
  const char* x_name = layer ? "tokens" : "x";
  if (x == nullptr && x_rows > 0) return fmt::format("{} is null with {} rows", x_name, x_rows);
  if (check_y && y == nullptr && out > 0) return fmt::format("y is null with {} rows", out);
  if (x != nullptr && y != nullptr && x_rows > 0 && out > 0 && x < y + out * n &&
      y < x + x_rows * k)
    return fmt::format("y overlaps {}", x_name);
  if (check_y) return fused_exchange.output_error(y, out * n, mode);
  return {};
}

void GemmAllToAllImpl::prepare(std::span<const float* const> weights, const float* x,
                               std::span<const std::size_t> recv_counts,
                               std::span<const std::size_t> send_counts, const float* y, Mode mode,
                               bool check_y, bool layer) {
  const std::string error =
      local_error(weights, x, recv_counts, send_counts, y, mode, check_y, layer);
  if (ctx.comm.verifier.enabled()) agree_routing(error, recv_counts, send_counts);
  if (!error.empty()) ctx.invalid(error);
  check_local_routing(recv_counts, send_counts, layer);
  derive_routing(recv_counts, send_counts, layer);
}

void GemmAllToAllImpl::prepare_call(std::span<const float* const> weights, const float* x,
                                    std::span<const std::size_t> recv_counts,
                                    std::span<const std::size_t> send_counts, const float* y,
                                    Mode mode, bool layer) {
  prepare(weights, x, recv_counts, send_counts, y, mode, true, layer);
  if (!weights.empty() || local_experts == 0) pack_weights(weights);
}

void GemmAllToAllImpl::agree_routing(const std::string& error,
                                     std::span<const std::size_t> recv_counts,
                                     std::span<const std::size_t> send_counts) const {
  const int p = topo.size;
  const std::size_t ng = experts();
  std::size_t emax = 0;
  for (int q = 0; q < p; ++q)
    emax = std::max(emax, experts_of(q));
  // Every rank contributes [local error?, send_counts (G), recv_counts (emax * p, padded)], so
  // every rank can check every count and all raise the same error.
  const std::size_t stride = 1 + ng + emax * p;
  std::vector<unsigned long long> mine(stride, 0), all(stride * p);
  if (error.empty()) {
    std::copy(send_counts.begin(), send_counts.end(), mine.begin() + 1);
    std::copy(recv_counts.begin(), recv_counts.end(), mine.begin() + 1 + ng);
  } else {
    mine[0] = 1;
  }
  // Non-blocking with the communicator's deadline: a rank that never makes this call is a Timeout
  // here, not a hang in a blocking MPI_Allgather.
  MPI_Request req = MPI_REQUEST_NULL;
  mpi_check(
      MPI_Iallgather(mine.data(), static_cast<int>(stride), MPI_UNSIGNED_LONG_LONG, all.data(),
                     static_cast<int>(stride), MPI_UNSIGNED_LONG_LONG, ctx.mpi, &req),
      "MPI_Iallgather");
  ctx.comm.wait_all(&req, 1, "GemmAllToAll: routing agreement (MPI_Iallgather over all ranks)");
  if (!error.empty()) ctx.invalid(error);
  for (int q = 0; q < p; ++q)
    if (all[q * stride] != 0)
      ctx.invalid(fmt::format("rank {} rejected its arguments (see its error)", q));
  check_routing(all, stride);
}

void GemmAllToAllImpl::check_routing(const std::vector<unsigned long long>& all,
                                     std::size_t stride) const {
  const int p = topo.size;
  const std::size_t ng = experts();
  for (int o = 0; o < p; ++o)  // owner o's expert e expects recv[e][s] rows from s
    for (std::size_t e = 0; e < experts_of(o); ++e)
      for (int s = 0; s < p; ++s) {
        const auto expected = all[o * stride + 1 + ng + e * p + s];
        const auto sent = all[s * stride + 1 + first_expert[o] + e];
        if (sent != expected) throw routing_mismatch(s, sent, first_expert[o] + e, o, expected);
      }
}

void GemmAllToAllImpl::check_local_routing(std::span<const std::size_t> recv_counts,
                                           std::span<const std::size_t> send_counts,
                                           bool layer) const {
  const int p = topo.size, me = topo.rank;
  for (std::size_t e = 0; e < local_experts; ++e) {
    const std::size_t g = first_expert[me] + e;
    if (send_counts[g] != recv_counts[e * p + me])
      throw routing_mismatch(me, send_counts[g], g, me, recv_counts[e * p + me]);
  }
  // What this rank's experts return to s must fit what s may route out in a call: it is stored
  // into s's inbox slot before any header says what s routed.
  for (int s = 0; s < p; ++s) {
    std::size_t rows = 0;
    for (std::size_t e = 0; e < local_experts; ++e)
      rows += recv_counts[e * p + s];
    if (rows > max_out_of[s])
      throw Error(ErrorCode::Mismatch,
                  fmt::format("GemmAllToAll: this rank's experts expect {} rows from rank {}, "
                              "above its max_rows_out = {}",
                              rows, s, max_out_of[s]));
  }
  // run_layer: the rows this rank dispatches to owner o must fit o's max_rows_in (its input slot
  // for this rank) before any header says what o expects.
  if (layer)
    for (int o = 0; o < p; ++o) {
      std::size_t rows = 0;
      for (std::size_t g = first_expert[o]; g < first_expert[o + 1]; ++g)
        rows += send_counts[g];
      if (rows > max_in_of[o])
        throw Error(ErrorCode::Mismatch,
                    fmt::format("GemmAllToAll: this rank routes {} rows to rank {}'s experts, "
                                "above its max_rows_in = {}",
                                rows, o, max_in_of[o]));
    }
}

// The header of a pair (me, peer), one count per expert either of them owns: first, for each of
// the sender's experts, the rows it receives from the receiver; then, for each of the receiver's
// experts, the rows the sender routes to it. The receiver expects exactly its own view of the same
// counts, so one comparison each way checks every count the pair shares.
void GemmAllToAllImpl::fill_header(int peer, std::uint64_t* words) const {
  const int p = topo.size;
  std::size_t i = 0;
  for (std::size_t e = 0; e < local_experts; ++e)
    words[i++] = route.recv_counts[e * p + peer];
  for (std::size_t g = first_expert[peer]; g < first_expert[peer + 1]; ++g)
    words[i++] = route.send_counts[g];
}

void GemmAllToAllImpl::check_header(int peer, const std::uint64_t* words) const {
  const int p = topo.size, me = topo.rank;
  const std::size_t peer_experts = experts_of(peer);
  for (std::size_t j = 0; j < peer_experts; ++j) {  // the peer's expert: what it expects from me
    const std::size_t g = first_expert[peer] + j;
    if (words[j] != route.send_counts[g])
      throw routing_mismatch(me, route.send_counts[g], g, peer, words[j]);
  }
  for (std::size_t e = 0; e < local_experts; ++e) {  // my expert: what the peer routes to it
    const std::uint64_t sent = words[peer_experts + e];
    if (sent != route.recv_counts[e * p + peer])
      throw routing_mismatch(peer, sent, first_expert[me] + e, me, route.recv_counts[e * p + peer]);
  }
}

}  // namespace tilecomm::detail
