#pragma once
// What a BlockExchange (block_exchange.hpp) moves: blocks of a rank's output and their routes.
// Plain data, no MPI: the operators' planners build them for the real call and the simulator.
#include <cstddef>
#include <vector>

namespace tilecomm::detail {

/// rows x cols floats at `offset` in a rank's output (row stride: the exchange's ld).
struct Block {
  std::size_t offset = 0, rows = 0, cols = 0;
  std::size_t floats() const { return rows * cols; }
};

/// A block produced here for rank `peer`, or arriving here from rank `peer`. `flag` is its index
/// in the destination's flags and its MPI tag. `block.offset` is where it lands in the
/// destination's output (for a produced block only read when the destination is this rank);
/// `inbox` is where it lands in the destination's inbox half when it crosses between two on-node
/// ranks (row stride ld as well).
struct BlockRoute {
  int peer;
  Block block;
  std::size_t flag;
  std::size_t inbox = 0;
  /// Produced blocks for an on-node rank, in an exchange with per-call headers: where the block
  /// lands in the destination's output counted from the output row that destination's header
  /// names, used instead of `inbox` when that header says its call is zero-copy (the destination
  /// passed its inbox half as the output, so the producer stores straight into place).
  std::size_t placed = 0;
  /// Produced blocks only: the input flag (InputRoute::flag) whose rows, from `peer`, this block's
  /// compute reads; kNoInput when it reads nothing moved by the call.
  std::size_t input = kNoInput;
  static constexpr std::size_t kNoInput = static_cast<std::size_t>(-1);
};

/// BlockExchange::run()'s task ids and order, for `produced` and `arrivals` blocks among `ranks`
/// ranks (this one: `rank`), with per-call headers or not, and `inputs` input sends. Ids: [0, np)
/// produced, [np, np + na) arrivals, then per peer a header send and a header check, then the
/// input sends; the order: input sends, header sends, produced, arrivals, header checks.
struct ExchangeTasks {
  std::size_t produced = 0, arrivals = 0;
  int ranks = 1, rank = 0;
  bool headers = false;
  std::size_t inputs = 0;
  std::size_t send_headers() const { return produced + arrivals; }
  std::size_t check_headers() const { return send_headers() + ranks; }
  std::size_t send_inputs() const { return check_headers() + ranks; }
  std::vector<std::size_t> order() const;
};

}  // namespace tilecomm::detail
