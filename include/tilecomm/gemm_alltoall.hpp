#pragma once
/// \file gemm_alltoall.hpp
/// GEMM + All-to-All(v): a mixture-of-experts layer's expert GEMMs and the return of every result
/// row to the rank and position its token came from.

#include <cstddef>
#include <memory>
#include <optional>
#include <span>

#include "tilecomm/communicator.hpp"
#include "tilecomm/device.hpp"
#include "tilecomm/ops.hpp"

namespace tilecomm {

namespace detail {
struct GemmAllToAllImpl;
}

/// A context for one expert placement and GEMM shape. Experts are numbered globally in rank order
/// (rank 0's experts first). Rank r holds E_r experts, each W_e [K x N] row-major.
///
/// Each call starts from dispatched tokens (as an All-to-Allv dispatch leaves them): this rank's
/// experts received `recv_counts[e * ranks + s]` rows from rank s for local expert e, stored in `x`
/// grouped by local expert, then by source rank. This rank routed `send_counts[g]` of its own token
/// rows to global expert g, and gets their results back in `y`, grouped by global expert in order
/// (the order of its dispatch buffer). Counts may be uneven and zero.
///
/// Created collectively; K, N and the tiling must agree on every rank, else every rank raises
/// Error(Mismatch). Calls to run() are collective and ordered like collectives, but outside verify
/// mode they do not synchronise the ranks. `comm` and `device` must outlive the context.
///
/// Routing counts that disagree (a source's send_counts[g] != the owner's recv_counts for it):
///  - Verify mode (CommConfig::check, TILECOMM_CHECK=1): every call first exchanges every rank's
///    counts (one small allgather); every rank raises the same Error(Mismatch) naming both ranks,
///    the expert and both counts, in every mode; bad arguments are named on every rank too.
///  - Otherwise, on this rank alone before anything moves (no communication): its count to its own
///    expert against that expert's count from itself, and the rows its experts expect from each
///    rank against that rank's max_rows_out (Error(Mismatch); the context stays usable, the peers
///    end in Error(Timeout)); a bad argument raises Error(InvalidArgument) here only, likewise.
///  - Otherwise, fused mode: per call each pair of ranks exchanges a header with the counts it
///    shares (2 x the most experts of a rank words; on a node a store and a flag, across nodes one
///    MPI message per pair and direction, both sent first in the call), and a rank checks a peer's
///    header before it trusts any of its tiles. A disagreement raises Error(Mismatch), worded as
///    above, on both ranks of the pair and fails the context; other ranks may finish or end in
///    Error(Timeout). Exception: across nodes, when a receiver expects fewer rows for an expert
///    than the owner sends and both fall in one partial tile, that longer MPI message may land
///    before the header is checked and the receiver raises Error(MpiError) (truncation) instead.
///    Since every pair exchanges a header, a rank's call ends only once every peer has begun it.
///  - Otherwise, sequential and shaped modes: their alltoallv does not check counts (a Timeout,
///    an MPI error or wrong rows).
///
/// Fused mode keeps, per rank in the node's shared segment, two inbox halves of max((ranks on the
/// node - 1) x min(largest max_rows_in, largest max_rows_out), largest max_rows_out) x N floats:
/// an owner does not know where its rows go in a source's caller-owned y without the call's counts
/// of every rank, so each on-node owner has its own slot there, and the source copies the rows into
/// place; a half is also the zero-copy output() of its calls, where owners store into place.
/// All modes compute the same tiles with the same kernel (only the destination differs), and the
/// kernel's result does not depend on the tiling or the ISA path (every element is one chain of
/// fused multiply-adds in increasing k; docs/kernels.md, "GEMM kernel"), so they agree bitwise.
///
/// Weights are packed per call: each run() first copies the weights of the local experts that
/// receive rows into the context's panel buffer (local_experts x K x N rounded up to 16 floats,
/// as much memory as the weights, allocated at construction), spread over the device's CUs, then
/// computes every tile from it. So the caller may change the weights (pointers or contents) freely
/// between calls, and must not change them during a call; nothing is cached across calls.
class GemmAllToAll {
 public:
  /// `max_rows_in`/`max_rows_out`: the most rows this rank's experts receive / this rank routes out
  /// in one call (sizes the shared buffers; a call above them raises Error(InvalidArgument)).
  GemmAllToAll(Communicator& comm, Device& device, std::size_t local_experts, std::size_t k,
               std::size_t n, std::size_t max_rows_in, std::size_t max_rows_out,
               OpOptions options = {});
  ~GemmAllToAll();

  /// y = expert results, see the class comment. weights[e] is local expert e, read (packed) at the
  /// start of every call. x: [sum(recv_counts) x K]; y: [sum(send_counts) x N]. y must not overlap
  /// x or the weights. y is caller-owned memory (on-node owners' rows are copied into it from this
  /// rank's inbox) or, in Mode::Fused only, output() (no copy; see there).
  void run(std::span<const float* const> weights, const float* x,
           std::span<const std::size_t> recv_counts, std::span<const std::size_t> send_counts,
           float* y, Mode mode);

  /// The whole expert layer in one call: the dispatch of this rank's routed tokens to the experts'
  /// ranks, the expert GEMMs, and the return of the results. `tokens`: [sum(send_counts) x K], the
  /// rows this rank routed to global expert g in rows y_row(g).. (grouped by global expert in
  /// order: the dispatch buffer of examples/03); `y`: [sum(send_counts) x N], row i = row i of
  /// `tokens` times its expert's weights. recv_counts/send_counts/weights as for run(). y must not
  /// overlap tokens or the weights (not in place: K and N differ in general).
  ///  - sequential: tilecomm::alltoallv of the tokens, then run()'s sequential path;
  ///  - shaped: the same dispatch, then run()'s shaped path (shaping overlaps the return only);
  ///  - fused: one persistent kernel. Each rank first sends every owner its rows, one block per
  ///    owner's expert and GEMM row tile (on-node: a copy into the owner's input half of the shared
  ///    segment and a flag; off-node: one MPI message each, received straight into that half);
  ///    each GEMM tile starts as soon as its rows have arrived (this rank's own rows at once), and
  ///    its result leaves at once as in run()'s fused mode.
  /// Results equal run()'s bitwise in every mode (same tiles, same kernel). Also checked here:
  /// the rows routed to each rank's experts must fit its max_rows_in (else Error(Mismatch)).
  /// Mode::Auto tries and settles separately from run()'s (layer_auto_choice()). The fused path
  /// keeps two input halves per rank in shared memory, as large as the rows every other rank may
  /// send it: about 2 x ranks x max_rows_out x K floats. They are allocated by the context's first
  /// fused run_layer call (collective over the node, once, after every rank has reached that call:
  /// a peer that did not raises Error(Timeout) or Error(Mismatch) there), so contexts that only
  /// call run(), or run_layer in other modes, never hold them.
  void run_layer(std::span<const float* const> weights, const float* tokens,
                 std::span<const std::size_t> recv_counts, std::span<const std::size_t> send_counts,
                 float* y, Mode mode);

  /// Packs this rank's expert weights once (weights[e]: local expert e, [K x N] row-major), for
  /// the calls that pass no weights: run(x, ...) and run_layer(tokens, ...) then skip the
  /// per-call packing — a full read and write of the weights, which with few rows per expert (MoE
  /// decode, small batches) costs as much as the GEMMs themselves. For weights that stay the same
  /// between calls: the weights are read now, not kept; call set_weights() again after changing
  /// them. Local (no communication). A call that passes weights packs them itself and ends this
  /// packing (a later call without weights raises Error(InvalidArgument) until set_weights()).
  void set_weights(std::span<const float* const> weights);
  /// run() and run_layer() on the weights packed by set_weights() (see there).
  void run(const float* x, std::span<const std::size_t> recv_counts,
           std::span<const std::size_t> send_counts, float* y, Mode mode);
  void run_layer(const float* tokens, std::span<const std::size_t> recv_counts,
                 std::span<const std::size_t> send_counts, float* y, Mode mode);

  /// Zero-copy output: max_rows_out x N floats in this rank's part of the node's shared segment.
  /// Passing output().data() as `y` to the next run() or run_layer() in Mode::Fused makes on-node
  /// owners store their result tiles straight into place: this rank's per-call header to each
  /// owner says that its call is zero-copy and where that owner's experts' rows start in y, and an
  /// owner reads it before it stores a tile for this rank (a wait for this rank to have begun the
  /// call, which it has normally: headers are a call's first tasks). Off-node results are received
  /// into it by MPI and this rank's own computed into it, as into any `y`. Ranks choose per call
  /// and independently. Lifetime and misuse as EmbeddingAllToAll::output(): the view alternates
  /// between two buffers, so call output() before every run(); its contents are defined from the
  /// return of the fused call that filled it until this rank's next call on this context begins
  /// (any mode, run() or run_layer()); any other use of the views (another mode, an earlier
  /// call's view, an overlapping `y`) raises Error(InvalidArgument) before any communication.
  /// Valid until the context is destroyed.
  std::span<float> output();

  std::size_t num_experts() const;   ///< experts in the job
  std::size_t first_expert() const;  ///< global id of this rank's first expert
  std::size_t local_experts() const;
  /// Rows per tile (OpOptions::tile, default 32). Without an explicit tile, the tiles of rows
  /// that come from (and results that go back to) another node take as many rows, in steps of 16,
  /// as fit in 48 KiB of results (48 rows at N >= 256), in every mode (the same tiles everywhere:
  /// fused mode sends fewer, larger MPI messages, each under Open MPI's TCP eager limit); tiles
  /// of on-node rows are a whole number of these, more for thin GEMMs (K small).
  std::size_t tile_rows() const;
  /// Mode::Auto's settled mode; empty while it is still trying modes (ops.hpp, Mode::Auto).
  std::optional<Mode> auto_choice() const;
  /// Mode::Auto's settled mode for run_layer() calls; empty while it is still trying.
  std::optional<Mode> layer_auto_choice() const;
  std::size_t tile_cols() const;

 private:
  friend struct detail::BenchAccess;
  std::unique_ptr<detail::GemmAllToAllImpl> impl_;
};

}  // namespace tilecomm
