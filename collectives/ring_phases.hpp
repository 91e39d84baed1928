#pragma once
// The two phases of a ring over MPI point-to-point, shared by the ring ReduceScatter, AllGather
// and AllReduce (AllReduce = ring ReduceScatter followed by ring AllGather, as in UCC).
//
// A vector of `count` elements is cut into p blocks (Blocks); rank r owns block r. Each phase
// takes p-1 steps; in step s rank r sends to r+1 and receives from r-1. Blocks go in pieces of
// 63 KiB (DefaultThresholds::eager_message_bytes, under Open MPI's TCP eager limit): round t is
// step t % (p-1) of piece t / (p-1), and up to 16 rounds are in flight, so each rank needs only a
// few piece-sized staging buffers whatever the message size, and the link is not left idle
// between rounds (docs/collectives.md, "The ring over TCP").

#include <algorithm>
#include <cstddef>

#include "collectives/comm_impl.hpp"
#include "tilecomm/types.hpp"

namespace tilecomm::detail {

/// `count` elements cut into p blocks as evenly as possible: the first count % p blocks hold one
/// element more. Blocks may be empty (count < p).
struct Blocks {
  std::size_t count = 0;
  int p = 1;
  std::size_t length(int b) const {
    const std::size_t rem = count % p;
    return count / p + (static_cast<std::size_t>(b) < rem ? 1 : 0);
  }
  std::size_t offset(int b) const {
    return static_cast<std::size_t>(b) * (count / p) + std::min<std::size_t>(b, count % p);
  }
};

/// Ring ReduceScatter: `src` holds the whole vector (all p blocks); `dst` receives the reduction
/// over ranks of block comm.topo.rank. `dst` may be exactly src + offset(rank) (in place).
///
/// Order of the reduction: block b is reduced along the ring starting at rank b+1, i.e. in the
/// fixed rank order b+1, b+2, ..., p-1, 0, ..., b (each hop combines its own data first, then the
/// partial received). Only rank b computes block b, so all ranks see the same bits after an
/// AllGather, and every run computes the same expression. bfloat16 partials travel and accumulate
/// as float32 (the staging buffers hold float32), and round to bfloat16 once, at rank b.
void ring_reduce_scatter(CommImpl& comm, const void* src, void* dst, const Blocks& blocks,
                         DataType dtype, ReduceOp op);

/// Ring AllGather in place: `buf` holds the whole vector and already contains block
/// comm.topo.rank; afterwards it contains every rank's block. Blocks travel straight between
/// user buffers.
void ring_allgather(CommImpl& comm, void* buf, const Blocks& blocks, DataType dtype);

}  // namespace tilecomm::detail
