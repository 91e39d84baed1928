#include "collectives/ring_phases.hpp"

#include <cstring>
#include <utility>

#include "collectives/p2p_common.hpp"
#include "collectives/reduce.hpp"

namespace tilecomm::detail {
namespace {

// Chunk `c0` (element offset within the block) of block b: {element offset in the vector, length}.
std::pair<std::size_t, std::size_t> piece(const Blocks& bl, int b, std::size_t c0,
                                          std::size_t chunk) {
  const std::size_t len = bl.length(b);
  if (c0 >= len) return {0, 0};
  return {bl.offset(b) + c0, std::min(chunk, len - c0)};
}

int mod(int a, int p) {
  return ((a % p) + p) % p;
}

}  // namespace

void ring_reduce_scatter(CommImpl& comm, const void* src, void* dst, const Blocks& bl,
                         DataType dtype, ReduceOp op) {
  const int p = comm.topo.size, r = comm.topo.rank;
  const std::size_t es = size_of(dtype);
  const auto* in = static_cast<const std::byte*>(src);
  auto* out = static_cast<std::byte*>(dst);
  if (p == 1) {
    if (bl.count > 0 && out != in) std::memmove(out, in, bl.count * es);
    return;
  }
  const bool bf16 = dtype == DataType::BFloat16;
  const DataType wire = p2p::partial_type(dtype);
  const std::size_t ws = size_of(wire);
  // Three staging slots: the partial received, the partial to send, bfloat16 inputs as float32.
  const std::size_t slot = p2p::slot_bytes(comm, 3);
  const std::size_t chunk = slot / ws;  // elements per chunk
  std::byte* stage = p2p::staging(comm, 3 * slot);
  std::byte* rbuf = stage;
  std::byte* acc = stage + slot;
  auto* tmp = reinterpret_cast<float*>(stage + 2 * slot);
  const int right = mod(r + 1, p), left = mod(r - 1, p);
  const int tag = p2p::kTagRingReduceScatter;

  for (std::size_t c0 = 0; c0 < bl.length(0); c0 += chunk) {
    for (int s = 0; s < p - 1; ++s) {
      // Send the partial of block r-s-1 (own data at s = 0); receive that of block r-s-2.
      const auto [soff, sn] = piece(bl, mod(r - s - 1, p), c0, chunk);
      const auto [roff, rn] = piece(bl, mod(r - s - 2, p), c0, chunk);
      const void* sendp = acc;
      if (s == 0 && !bf16) sendp = in + soff * es;
      if (s == 0 && bf16) p2p::bf16_to_float(reinterpret_cast<float*>(acc), in + soff * es, sn);
      MPI_Request req[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
      if (rn > 0) p2p::irecv(comm, rbuf, rn * ws, left, tag, &req[0]);
      if (sn > 0) p2p::isend(comm, sendp, sn * ws, right, tag, &req[1]);
      comm.wait_all(req, 2, "reduce_scatter(ring)");
      if (rn == 0) continue;

      // partial(block) = own data op partial received; at the last step it is the result.
      const std::byte* mine = in + roff * es;
      const bool last = s == p - 2;
      if (!bf16) {
        const void* srcs[2] = {mine, rbuf};  // the result may alias `mine` (in place): srcs[0]
        reduce_n(last ? out + c0 * es : acc, srcs, 2, rn, dtype, op);
      } else {
        p2p::bf16_to_float(tmp, mine, rn);
        const void* srcs[2] = {tmp, rbuf};
        reduce_n(last ? tmp : reinterpret_cast<float*>(acc), srcs, 2, rn, wire, op);
        if (last) p2p::float_to_bf16(out + c0 * es, tmp, rn);
      }
    }
  }
}

void ring_allgather(CommImpl& comm, void* buf, const Blocks& bl, DataType dtype) {
  const int p = comm.topo.size, r = comm.topo.rank;
  if (p == 1) return;
  const std::size_t es = size_of(dtype);
  auto* data = static_cast<std::byte*>(buf);
  // No staging: blocks move between user buffers. Chunks bound the message size and keep the
  // chunk rounds aligned with those of the ReduceScatter.
  const std::size_t chunk = p2p::slot_bytes(comm, 1) / es;
  const int right = mod(r + 1, p), left = mod(r - 1, p);
  const int tag = p2p::kTagRingAllGather;

  for (std::size_t c0 = 0; c0 < bl.length(0); c0 += chunk) {
    for (int s = 0; s < p - 1; ++s) {
      // Forward block r-s (own block at s = 0); receive block r-s-1.
      const auto [soff, sn] = piece(bl, mod(r - s, p), c0, chunk);
      const auto [roff, rn] = piece(bl, mod(r - s - 1, p), c0, chunk);
      MPI_Request req[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
      if (rn > 0) p2p::irecv(comm, data + roff * es, rn * es, left, tag, &req[0]);
      if (sn > 0) p2p::isend(comm, data + soff * es, sn * es, right, tag, &req[1]);
      comm.wait_all(req, 2, "allgather(ring)");
    }
  }
}

}  // namespace tilecomm::detail
