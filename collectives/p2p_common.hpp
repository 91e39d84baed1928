#pragma once
// Shared pieces of the MPI point-to-point algorithms (ring, recursive doubling, pairwise): their
// tags, their bounded staging memory, byte-counted Isend/Irecv, and bfloat16 <-> float32 copies.
//
// Tags. Every point-to-point algorithm uses one fixed tag (or two) on comm.mpi, the duplicated
// communicator. That is enough: calls on a communicator run one after the other in issue order
// and each call completes all of its requests before returning, and MPI matches messages with the
// same (source, tag, communicator) in the order they were sent and the receives were posted. A
// distinct tag per algorithm keeps traffic of different algorithms apart even if a peer is one
// call ahead. The 0x7C00 range is reserved for these algorithms.

#include <mpi.h>

#include <array>
#include <cstddef>
#include <vector>

#include "collectives/comm_impl.hpp"
#include "collectives/mpi_check.hpp"
#include "runtime/wait.hpp"
#include "tilecomm/types.hpp"

namespace tilecomm::detail::p2p {

/// The ring's phases use kRingTags tags each from these (collectives/ring_phases.cpp: round t of
/// a phase travels with tag base + t % kRingTags, so a round's send may leave before an earlier
/// round's without being matched to that round's receive).
inline constexpr int kRingTags = 32;
inline constexpr int kTagRingReduceScatter = 0x7C40;
inline constexpr int kTagRingAllGather = 0x7C80;
inline constexpr int kTagRecursiveDoubling = 0x7C03;
inline constexpr int kTagPairwise = 0x7C04;
inline constexpr int kTagPairwiseCounts = 0x7C05;

/// Bytes of one staging slot when the staging memory is cut into `slots` slots:
/// comm.segment.data_bytes() / slots, rounded down to 64 bytes, at least 64 and at most 1 GiB (so
/// byte counts fit MPI's int).
std::size_t slot_bytes(const CommImpl& comm, int slots);

/// The communicator's staging memory, grown to at least `bytes` (callers keep it within
/// comm.segment.data_bytes() by sizing through slot_bytes). Aligned for every DataType.
std::byte* staging(CommImpl& comm, std::size_t bytes);

/// MPI_Isend / MPI_Irecv of `bytes` bytes (<= 1 GiB) on comm.mpi.
void isend(CommImpl& comm, const void* buf, std::size_t bytes, int dst, int tag, MPI_Request* req);
void irecv(CommImpl& comm, void* buf, std::size_t bytes, int src, int tag, MPI_Request* req);

/// MPI_Isend / MPI_Irecv of `bytes` bytes at `buf` on `mpi` in consecutive pieces of at most
/// DefaultThresholds::eager_message_bytes (under Open MPI's TCP eager limit, so no piece waits for
/// a clear-to-send queued behind bulk data: docs/collectives.md, "The ring over TCP"), all posted
/// at once; one request per piece is appended to `reqs`. Both ends cut a message the same way,
/// and MPI's non-overtaking order matches piece k to piece k.
void isend_pieces(const void* buf, std::size_t bytes, int dst, int tag, MPI_Comm mpi,
                  std::vector<MPI_Request>& reqs);
void irecv_pieces(void* buf, std::size_t bytes, int src, int tag, MPI_Comm mpi,
                  std::vector<MPI_Request>& reqs);

/// The type partial results travel and accumulate in: float32 for bfloat16 (so a reduction over
/// several hops rounds to bfloat16 only once, at the end), the element type otherwise.
constexpr DataType partial_type(DataType t) {
  return t == DataType::BFloat16 ? DataType::Float32 : t;
}

/// dst[i] = float(src[i]) for n bfloat16 values.
void bf16_to_float(float* dst, const void* src, std::size_t n);
/// dst[i] = bfloat16(src[i]) (round to nearest even) for n values.
void float_to_bf16(void* dst, const float* src, std::size_t n);

/// Waits (wait_until, the communicator's timeout) until done() holds, testing every request of
/// `reqs` on each poll (MPI_Testsome: completed ones become MPI_REQUEST_NULL), so that all the
/// requests in flight complete under one backoff, not only the one waited for. The windows of
/// the ring and of the pairwise All-to-All wait this way, under WaitPolicy::progress (short sleeps:
/// the requests move only while this thread calls MPI). describe() names the wait on a timeout.
template <std::size_t N, class Done, class Describe>
void test_until(const CommImpl& comm, std::array<MPI_Request, N>& reqs, const char* what,
                Done&& done, Describe&& describe) {
  std::array<int, N> completed{};
  wait_until(
      [&] {
        int n = 0;
        mpi_check(MPI_Testsome(static_cast<int>(N), reqs.data(), &n, completed.data(),
                               MPI_STATUSES_IGNORE),
                  what);
        return done();
      },
      comm.timeout_s, describe, WaitPolicy::progress());
}

/// Ceiling division.
constexpr std::size_t ceil_div(std::size_t a, std::size_t b) {
  return (a + b - 1) / b;
}

}  // namespace tilecomm::detail::p2p
