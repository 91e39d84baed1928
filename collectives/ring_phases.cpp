#include "collectives/ring_phases.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "collectives/default_thresholds.hpp"
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

// Rounds in flight per direction (kWindow pieces: 1 MiB). One round at a time waited for each
// message's rendezvous and left the link idle between rounds: over TCP a ring of 1 MiB rounds
// moved 8 MiB each way in 118 ms where the link allows 70 (docs/collectives.md, "The ring over
// TCP").
constexpr std::size_t kWindow = 16;
static_assert(p2p::kRingTags >= 2 * kWindow, "rounds in flight need distinct tags");

// Bytes of one piece (one message), within `slots` staging slots.
std::size_t piece_bytes(const CommImpl& comm, int slots) {
  return std::min(p2p::slot_bytes(comm, slots), DefaultThresholds::eager_message_bytes);
}

// The requests of a ring phase's rounds in flight. Receives are posted in round order up to
// kWindow rounds ahead of the one waited for; a send as soon as its data is ready and its round
// is less than kWindow rounds ahead, in any order (a later piece's first step need not wait for
// an earlier piece's last), so round t travels with tag base + t % kRingTags. Round t's requests
// sit in slot t % kWindow. Every wait tests all of them, so a send completes (and its slot is
// free) as soon as MPI finishes it, under the backoff of whatever wait is running.
class Window {
 public:
  Window(const CommImpl& comm, const char* what, int left, int right, std::size_t rounds)
      : comm_(comm), what_(what), left_(left), right_(right), rounds_(rounds), sent_(rounds) {
    reqs_.fill(MPI_REQUEST_NULL);
  }
  Window(const Window&) = delete;
  Window& operator=(const Window&) = delete;

  /// Posts the receives of rounds up to t + kWindow - 1 not yet posted: post(u, req) posts round
  /// u's receive into *req or leaves it null.
  template <class Post>
  void post_receives(std::size_t t, Post&& post) {
    for (; posted_ < std::min(rounds_, t + kWindow); ++posted_)
      post(posted_, &receive(posted_));
  }
  /// Posts the sends of rounds below `done` + kWindow not yet posted whose data is ready
  /// (ready(u)), in round order: post(u, req) posts round u's send into *req or leaves it null.
  /// Rounds below `done` must all be ready.
  template <class Ready, class Post>
  void post_sends(std::size_t done, Ready&& ready, Post&& post) {
    while (unsent_ < rounds_ && sent_[unsent_])
      ++unsent_;
    for (std::size_t u = unsent_; u < std::min(rounds_, done + kWindow); ++u) {
      if (sent_[u] || !ready(u)) continue;
      retire_send(u);  // the send of round u - kWindow (already posted: it was ready first)
      post(u, &send(u));
      sent_[u] = 1;
    }
  }
  /// Round t's tag.
  static int tag(int base, std::size_t t) { return base + static_cast<int>(t % p2p::kRingTags); }
  void wait_receive(std::size_t t) { wait(receive(t), "receive from", left_); }
  /// Waits for the send in round t's slot (of round t - kWindow, unless round t's is posted).
  void retire_send(std::size_t t) { wait(send(t), "send to", right_); }
  /// Waits for every send (each receive was waited for by its round).
  void finish() {
    for (std::size_t t = 0; t < kWindow; ++t)
      retire_send(t);
  }

 private:
  MPI_Request& receive(std::size_t t) { return reqs_[t % kWindow]; }
  MPI_Request& send(std::size_t t) { return reqs_[kWindow + t % kWindow]; }
  void wait(MPI_Request& r, const char* dir, int peer) {
    if (r == MPI_REQUEST_NULL) return;
    p2p::test_until(
        comm_, reqs_, what_, [&] { return r == MPI_REQUEST_NULL; },
        [&] {
          return fmt::format("{} {} rank {}: rank {}: the request did not complete", what_, dir,
                             peer, comm_.topo.rank);
        });
  }

  const CommImpl& comm_;
  const char* what_;
  int left_, right_;
  std::size_t rounds_;
  std::size_t posted_ = 0;  // receives of rounds below are posted
  std::size_t unsent_ = 0;  // sends of rounds below are posted
  std::vector<char> sent_;  // per round: its send is posted
  std::array<MPI_Request, 2 * kWindow> reqs_;
};

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
  // Staging: kWindow slots for partials received, kWindow for partials to send, one for bfloat16
  // inputs as float32 in a fold.
  constexpr int kSlots = 2 * kWindow + 1;
  const std::size_t slot = piece_bytes(comm, kSlots);
  const std::size_t chunk = slot / ws;  // elements per piece
  std::byte* stage = p2p::staging(comm, kSlots * slot);
  auto rbuf = [&](std::size_t t) { return stage + (t % kWindow) * slot; };
  auto acc = [&](std::size_t t) { return stage + (kWindow + t % kWindow) * slot; };
  auto* tmp = reinterpret_cast<float*>(stage + 2 * kWindow * slot);
  const int right = mod(r + 1, p), left = mod(r - 1, p);
  const int tag = p2p::kTagRingReduceScatter;

  // Round t is step s = t % (p-1) of piece c = t / (p-1): send the partial of block r-s-1 (own
  // data at s = 0), receive that of block r-s-2 and fold this rank's data into it. The partial
  // sent in round t > first step is the one folded in round t-1, in acc(t-1); a first step's
  // partial is the input (bfloat16: converted into acc(t-1), whose round t-1 wrote `out`).
  const std::size_t steps = static_cast<std::size_t>(p - 1);
  const std::size_t rounds = p2p::ceil_div(bl.length(0), chunk) * steps;
  auto step = [&](std::size_t t) { return static_cast<int>(t % steps); };
  auto sent = [&](std::size_t t) {
    return piece(bl, mod(r - step(t) - 1, p), t / steps * chunk, chunk);
  };
  auto received = [&](std::size_t t) {
    return piece(bl, mod(r - step(t) - 2, p), t / steps * chunk, chunk);
  };
  Window win(comm, "reduce_scatter(ring)", left, right, rounds);
  // Round u's send is ready at its first step, else once round u-1 is folded (in acc(u-1)).
  auto post_sends = [&](std::size_t folded) {
    win.post_sends(
        folded, [&](std::size_t u) { return step(u) == 0 || u <= folded; },
        [&](std::size_t u, MPI_Request* req) {
          const auto [off, n] = sent(u);
          if (n == 0) return;
          const void* data = in + off * es;
          if (step(u) != 0) {
            data = acc(u - 1);
          } else if (bf16) {  // acc(u-1): round u-1 (a last step) wrote `out`, not acc
            p2p::bf16_to_float(reinterpret_cast<float*>(acc(u + kWindow - 1)), data, n);
            data = acc(u + kWindow - 1);
          }
          p2p::isend(comm, data, n * ws, right, Window::tag(tag, u), req);
        });
  };
  for (std::size_t t = 0; t < rounds; ++t) {
    win.post_receives(t, [&](std::size_t u, MPI_Request* req) {
      const auto [off, n] = received(u);
      if (n > 0) p2p::irecv(comm, rbuf(u), n * ws, left, Window::tag(tag, u), req);
    });
    post_sends(t);
    win.wait_receive(t);
    const auto [roff, rn] = received(t);
    if (rn == 0) continue;
    const bool last = step(t) == p - 2;
    // acc(t) was read by the send of round t+1-kWindow: done before the fold writes it.
    if (!last) win.retire_send(t + 1);

    // partial(block) = own data op partial received; at the last step it is the result.
    const std::byte* mine = in + roff * es;
    std::byte* result = out + t / steps * chunk * es;
    if (!bf16) {
      const void* srcs[2] = {mine, rbuf(t)};  // the result may alias `mine` (in place): srcs[0]
      reduce_n(last ? result : acc(t), srcs, 2, rn, dtype, op);
    } else {
      p2p::bf16_to_float(tmp, mine, rn);
      const void* srcs[2] = {tmp, rbuf(t)};
      reduce_n(last ? tmp : reinterpret_cast<float*>(acc(t)), srcs, 2, rn, wire, op);
      if (last) p2p::float_to_bf16(result, tmp, rn);
    }
  }
  post_sends(rounds);
  win.finish();
}

void ring_allgather(CommImpl& comm, void* buf, const Blocks& bl, DataType dtype) {
  const int p = comm.topo.size, r = comm.topo.rank;
  if (p == 1) return;
  const std::size_t es = size_of(dtype);
  auto* data = static_cast<std::byte*>(buf);
  // No staging: blocks move between user buffers, in pieces of the pipelined message size.
  const std::size_t chunk = piece_bytes(comm, 1) / es;
  const int right = mod(r + 1, p), left = mod(r - 1, p);
  const int tag = p2p::kTagRingAllGather;

  // Round t is step s = t % (p-1) of piece c = t / (p-1): forward block r-s (own block at
  // s = 0, else the one received in round t-1) and receive block r-s-1.
  const std::size_t steps = static_cast<std::size_t>(p - 1);
  const std::size_t rounds = p2p::ceil_div(bl.length(0), chunk) * steps;
  auto step = [&](std::size_t t) { return static_cast<int>(t % steps); };
  Window win(comm, "allgather(ring)", left, right, rounds);
  // Round u's send is ready at its first step, else once round u-1's receive is done.
  auto post_sends = [&](std::size_t received) {
    win.post_sends(
        received, [&](std::size_t u) { return step(u) == 0 || u <= received; },
        [&](std::size_t u, MPI_Request* req) {
          const auto [off, n] = piece(bl, mod(r - step(u), p), u / steps * chunk, chunk);
          if (n > 0) p2p::isend(comm, data + off * es, n * es, right, Window::tag(tag, u), req);
        });
  };
  for (std::size_t t = 0; t < rounds; ++t) {
    win.post_receives(t, [&](std::size_t u, MPI_Request* req) {
      const auto [off, n] = piece(bl, mod(r - step(u) - 1, p), u / steps * chunk, chunk);
      if (n > 0) p2p::irecv(comm, data + off * es, n * es, left, Window::tag(tag, u), req);
    });
    post_sends(t);
    win.wait_receive(t);
  }
  post_sends(rounds);
  win.finish();
}

}  // namespace tilecomm::detail
