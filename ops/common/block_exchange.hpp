#pragma once
// The fused form of an All-to-All(v) of result blocks, for operators whose every tile ends up in
// one rank's output (EmbeddingAllToAll, GemmAllToAll). A produced block is computed straight into
// where it is going: this rank's output; an on-node rank's inbox (a region of its symmetric segment
// laid out like its output), then a release flag; or, for an off-node rank, staging the proxy
// sends, which that rank's proxy receives straight into its output (a strided MPI datatype). An
// arriving block is waited for by its flag and, from an on-node rank, copied from the inbox into
// the output.
//
// One inbox per rank suffices only when no rank can start call i+1's stores while a peer still
// reads call i's inbox: the operators using this begin each call with a collective (their argument
// or routing agreement), which orders calls.

#include <cstddef>
#include <functional>
#include <span>
#include <vector>

#include "ops/common/fused_plan.hpp"

namespace tilecomm::detail {

/// rows x cols floats at `offset` in a rank's output (row stride: the exchange's ld).
struct Block {
  std::size_t offset = 0, rows = 0, cols = 0;
  std::size_t floats() const { return rows * cols; }
};

/// A block produced here for rank `peer`, or arriving here from rank `peer`. `flag` is its index
/// in the destination's flags and its MPI tag.
struct BlockRoute {
  int peer;
  Block block;
  std::size_t flag;
};

class BlockExchange {
 public:
  /// Adds the exchange's regions to the operator's segment layout: `flags` flags and an inbox of
  /// `inbox_floats`.
  void reserve(SegmentLayout& layout, std::size_t flags, std::size_t inbox_floats);
  /// After ctx.map_segment(): binds the regions; `ld` is the row stride of every rank's output;
  /// `what` names an arriving block in timeout errors.
  void bind(OpContext& ctx, std::size_t ld, const char* what);

  /// Writes block `i` of `produced` to `dst` with row stride `ld`.
  using Compute = std::function<void(std::size_t i, float* dst, std::size_t ld)>;
  /// One fused call. Tasks start in order: `produced` as given (an operator puts remote-bound
  /// blocks first), then `arrivals`. Returns when every block has left and arrived.
  void run(std::span<const BlockRoute> produced, std::span<const BlockRoute> arrivals, float* out,
           const Compute& compute);

 private:
  void produce(const WorkgroupContext& wg, const FusedPlan& plan, std::size_t i,
               const BlockRoute& route, std::size_t staged, float* out, const Compute& compute);
  void arrive(const WorkgroupContext& wg, const FusedPlan& plan, const BlockRoute& route,
              float* out);
  float* inbox(int local) const { return ctx_->region(local, inbox_offset_); }

  OpContext* ctx_ = nullptr;
  std::size_t flags_offset_ = 0, flag_count_ = 0, inbox_offset_ = 0, ld_ = 0;
  const char* what_ = "block";
  std::vector<TileFlags> flags_;  // per on-node rank
  std::vector<std::size_t> staged_;
};

}  // namespace tilecomm::detail
