#pragma once
// The fused form of an All-to-All(v) of result blocks, for operators whose every tile ends up in
// one rank's output (EmbeddingAllToAll, GemmAllToAll). A produced block is computed straight into
// where it is going: this rank's output; an on-node rank's inbox (a region of its symmetric
// segment), then a release flag; or, for an off-node rank, staging the proxy sends, which that
// rank's proxy receives straight into its output (a strided MPI datatype). An arriving block is
// waited for by its flag and, from an on-node rank, copied from the inbox into the output.
//
// Zero-copy outputs (run(..., zero_copy = true)): the caller's output is this rank's inbox half of
// the call (own_inbox()), and on-node producers store straight into place, so the arrival has
// nothing to copy. Where a block goes in that output: route.inbox when the inbox is laid out like
// the output (EmbeddingAllToAll: inbox offset == output offset for every block); with per-call
// headers, the output row the destination's header names plus route.placed (GemmAllToAll, whose
// owners cannot know a source's layout without that source's counts: each call a source says in
// its headers whether it is zero-copy and where each owner's rows start, and an owner reads the
// header before it stores a block for that source). The half must then stay untouched until
// the caller is done with the results, which this rank only knows when its next call begins: the
// done flag of a zero-copy call is raised by release_outputs() at the start of the next call
// (whatever its mode) instead of at the end of the call, so a producer's call e + 2 (the next one
// to store into that half) waits until this rank has begun call e + 1.
//
// Calls do not begin with a collective, so a rank may run ahead of a peer. What keeps that safe:
//  - Inboxes and headers are double-buffered by epoch parity (FusedPlan::parity()). Each segment
//    holds a done flag: the epoch of the last call whose inbox and headers that rank has finished
//    reading. A producer about to store into on-node rank L's half for epoch e first waits until
//    done(L) >= e - 2 (normally already true: one load). Having received all its own blocks of
//    call e - 1 would not prove it: with All-to-Allv some pairs exchange nothing in a call.
//  - Flags hold epochs and a wait is for >= the call's epoch: a flag already raised by the
//    producer's next call satisfies it too, and that call's block is in the other half.
//  - Off-node blocks are MPI messages on the context's private communicator with tag = the block's
//    flag index (headers: header_tag()). In a call a rank sends at most one message per
//    (destination, tag) and posts at most one receive per (source, tag), and it posts a call's
//    receives only after the previous call's have completed; by MPI's non-overtaking rule the i-th
//    message of a (source, tag) then meets the i-th receive, so consecutive calls cannot collide
//    while both sides agree on which blocks move. Where that can differ per call (GemmAllToAll's
//    routing counts) the operator passes PeerHeaders: every pair exchanges one header per call in
//    each direction and each side checks it before it trusts a block of that peer, so a
//    disagreement fails the call, and the context (OpContext::tiles_moving), on both ranks of the
//    pair; a message left unmatched is never met by a later call.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ops/common/block_route.hpp"
#include "ops/common/fused_plan.hpp"

namespace tilecomm::detail {

/// Input rows moved by the call itself before they are computed on (the dispatch of an
/// All-to-All + GEMM): `floats` contiguous floats that land at `offset` in the destination's input
/// half (a region of its segment, double-buffered by epoch parity like the inbox), announced by
/// the destination's input flag `flag`. Sent: `peer` is the destination and `src` the rows;
/// expected: `peer` is the source (`src` unused). Off-node inputs are one MPI message each (tag:
/// input_tag(flag)), received by the proxy straight into the input half.
struct InputRoute {
  int peer;
  const float* src;
  std::size_t floats;
  std::size_t offset;
  std::size_t flag;
};

/// Per-call headers between every pair of ranks, the functions called in WGs: `fill` writes the
/// header_words words this rank sends `peer`; `check` reads the words `peer` sent and throws
/// (Error(Mismatch)) when they disagree with this rank's own view of the call. The exchange
/// appends a word of its own to every header: in a zero-copy call, 1 + `output_row(peer)`, the row
/// of this rank's output where the blocks `peer` produces for it begin (BlockRoute::placed counts
/// from there); otherwise 0. An on-node producer reads it before it stores a block for this rank.
struct PeerHeaders {
  std::function<void(int peer, std::uint64_t* words)> fill;
  std::function<void(int peer, const std::uint64_t* words)> check;
  std::function<std::size_t(int peer)> output_row;
};

class BlockExchange {
 public:
  /// Adds the exchange's regions to the operator's segment layout: `flags` block flags (plus one
  /// header flag per rank and the done flag), two inbox halves of `inbox_floats` each, and two
  /// halves of `header_words` (+ 1: the zero-copy word) words per rank (0: the operator passes no
  /// PeerHeaders).
  void reserve(SegmentLayout& layout, int ranks, std::size_t flags, std::size_t inbox_floats,
               std::size_t header_words = 0);
  /// For calls with inputs (run()'s `input_sends`): two input halves of `input_floats` each and
  /// `input_flags` flags, in a segment of their own that map_inputs() allocates.
  void reserve_inputs(std::size_t input_floats, std::size_t input_flags);
  /// Collective over the node, once (later calls return at once): allocates the inputs' segment.
  /// An operator calls it at the start of its first fused call with inputs, on every rank whether
  /// or not this rank's call moves any input, so contexts that never make such a call never hold
  /// that memory (it can be far larger than the rest: every peer's rows).
  void map_inputs();
  /// Bytes of this rank's share of the inputs' segment: 0 until map_inputs().
  std::size_t input_bytes() const { return inputs_ ? inputs_->bytes() : 0; }
  /// After ctx.map_segment(): binds the regions; `ld` is the row stride of every rank's output
  /// and inbox; `what` names an arriving block in timeout errors.
  void bind(OpContext& ctx, std::size_t ld, const char* what);

  /// Writes block `i` of `produced` to `dst` with row stride `ld`.
  using Compute = std::function<void(std::size_t i, float* dst, std::size_t ld)>;
  /// One fused call. Tasks start in order: header sends, `produced` as given (an operator puts
  /// remote-bound blocks first), `arrivals`, then header checks. With `headers`, an arrival
  /// checks its source's header before it waits for the block. Returns when every block has left
  /// and arrived.
  /// With `zero_copy`, `out` is own_inbox() of this call (the operator checked it): arrivals
  /// from on-node ranks are already in place, and the done flag waits for release_outputs().
  /// With inputs: `input_sends` are tasks ahead of everything else (an on-node one copies its
  /// rows into the destination's input half, waiting as a produced block does for that half to be
  /// released, and raises the flag; an off-node one is an MPI send); `input_arrivals` are what
  /// this rank expects (off-node: a receive posted before the kernel starts). A produced block
  /// with an `input` first checks its source's header (with `headers`: routing that disagrees is
  /// then a Mismatch, not a wait for rows that never come), then awaits the input's flag (the
  /// header alone does not say the rows are there: the source may send it while a copy of its
  /// inputs is still under way) before its compute.
  void run(std::span<const BlockRoute> produced, std::span<const BlockRoute> arrivals, float* out,
           const Compute& compute, const PeerHeaders* headers = nullptr, bool zero_copy = false,
           std::span<const InputRoute> input_sends = {},
           std::span<const InputRoute> input_arrivals = {});
  /// At the start of every call of the operator (any mode): raises the done flag a zero-copy call
  /// left down, so producers may store the call after next into its half. No-op otherwise.
  void release_outputs();

  /// This rank's inbox half of the fused call with epoch `epoch` (the zero-copy output view).
  float* own_inbox(std::uint32_t epoch) const {
    return inbox(ctx_->topo.local_rank, static_cast<int>(epoch & 1u));
  }
  /// Floats in each inbox half.
  std::size_t inbox_floats() const { return inbox_floats_; }
  /// The zero-copy output view of this rank's next fused call (the operator's output()).
  float* next_output() const { return own_inbox(ctx_->epoch() + 1); }
  /// Whether a fused call into `out` (an output of `floats` floats) is zero-copy: `out` is
  /// next_output() (output_error() allowed no other overlap with the views).
  bool zero_copy(const float* out, std::size_t floats) const {
    return floats > 0 && out == next_output();
  }
  /// Why `out` (`floats` floats) cannot be the output of this rank's next call in `mode`: it
  /// overlaps an output view (an inbox half) without being the next call's own_inbox(), or it is
  /// that view and `mode` is not Mode::Fused (no other mode keeps the next fused call's producers
  /// out of it). Empty when it can.
  std::string output_error(const float* out, std::size_t floats, Mode mode) const;

  /// MPI tag of the headers: one past the last block flag (the operator checks it fits MPI_TAG_UB).
  std::size_t header_tag() const { return flag_count_; }
  /// MPI tag of input `flag`: after the header's (the operator checks the last fits MPI_TAG_UB).
  std::size_t input_tag(std::size_t flag) const { return flag_count_ + 1 + flag; }
  /// On-node rank `local`'s input half of the call with epoch `epoch` (after map_inputs()).
  float* input_half(int local, std::uint32_t epoch) const {
    return reinterpret_cast<float*>(inputs_->segment(local) + input_offset_) +
           (epoch & 1u) * input_floats_;
  }

 private:
  void produce(const WorkgroupContext& wg, const FusedPlan& plan, std::size_t i,
               const BlockRoute& route, std::size_t staged, float* out, const Compute& compute,
               const PeerHeaders* headers);
  void arrive(const WorkgroupContext& wg, const FusedPlan& plan, const BlockRoute& route,
              float* out, const PeerHeaders* headers, bool zero_copy);
  void send_header(const WorkgroupContext& wg, const FusedPlan& plan, int peer,
                   const PeerHeaders& headers, bool zero_copy);
  // Where a block for on-node rank `peer` goes in its inbox half: route.inbox, or, when the peer's
  // header of this call says it is zero-copy, its output row plus route.placed.
  std::size_t place(const WorkgroupContext& wg, const FusedPlan& plan, const BlockRoute& route,
                    const PeerHeaders* headers);
  void send_input(const WorkgroupContext& wg, const FusedPlan& plan, std::size_t i,
                  const InputRoute& route);
  void check_header(const WorkgroupContext& wg, const FusedPlan& plan, int peer,
                    const PeerHeaders& headers);
  // Waits until on-node rank `peer` (local `local`) has finished reading the half call `epoch`
  // stores into: its done flag >= epoch - 2.
  void await_released(int local, int peer, std::uint32_t epoch) const;
  float* inbox(int local, int half) const {
    return ctx_->region(local, inbox_offset_) + half * inbox_floats_;
  }
  // The header `src` sent to on-node rank `local` for calls of parity `half`.
  std::uint64_t* header_slot(int local, int half, int src) const {
    return ctx_->region<std::uint64_t>(local, header_offset_) +
           (static_cast<std::size_t>(half) * ranks_ + src) * header_words_;
  }
  std::size_t header_flag(int src) const { return flag_count_ + src; }
  std::size_t done_flag() const { return flag_count_ + ranks_; }

  OpContext* ctx_ = nullptr;
  std::size_t ranks_ = 0, flags_offset_ = 0, flag_count_ = 0, inbox_offset_ = 0, inbox_floats_ = 0;
  std::size_t header_offset_ = 0, header_words_ = 0, ld_ = 0;
  std::size_t input_offset_ = 0, input_floats_ = 0, input_flag_count_ = 0;
  std::unique_ptr<SymmetricBuffer> inputs_;  // map_inputs(): [input flags][2 input halves]
  std::vector<TileFlags> input_flags_;       // per on-node rank, in inputs_
  const char* what_ = "block";
  std::string header_what_, input_what_;
  std::vector<TileFlags> flags_;  // per on-node rank: blocks, headers by source rank, done
  std::vector<std::size_t> staged_;
  std::vector<std::uint64_t> header_out_;                  // [peer][word]: off-node headers sent
  std::unique_ptr<std::atomic<std::uint32_t>[]> checked_;  // [peer]: epoch whose header matched
  bool unreleased_ = false;  // the last call was zero-copy and its done flag is still down
  std::uint32_t unreleased_epoch_ = 0;  // that call's epoch
};

}  // namespace tilecomm::detail
