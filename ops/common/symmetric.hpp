#pragma once
// Node-local symmetric memory for an operator context: one MPI shared window over the node, the
// same layout in every rank's segment, so an offset means the same thing in each.

#include <mpi.h>

#include <cstddef>
#include <vector>

#include "collectives/comm_impl.hpp"

namespace tilecomm::detail {

class SymmetricBuffer {
 public:
  SymmetricBuffer() = default;
  /// Collective over the node: allocates `bytes` per rank (64-byte aligned, zeroed) and maps every
  /// on-node peer's segment.
  SymmetricBuffer(const CommImpl& comm, std::size_t bytes);
  ~SymmetricBuffer();
  SymmetricBuffer(const SymmetricBuffer&) = delete;
  SymmetricBuffer& operator=(const SymmetricBuffer&) = delete;

  /// Base of the segment of on-node rank `local`.
  std::byte* segment(int local) const { return bases_[local]; }
  std::size_t bytes() const { return bytes_; }

 private:
  MPI_Win win_ = MPI_WIN_NULL;
  std::vector<std::byte*> bases_;
  std::size_t bytes_ = 0;
};

/// Lays out regions in a segment: each add() returns the offset of a 64-byte aligned region.
class SegmentLayout {
 public:
  std::size_t add(std::size_t bytes) {
    std::size_t at = size_;
    size_ += (bytes + 63) & ~std::size_t{63};
    return at;
  }
  std::size_t size() const { return size_; }

 private:
  std::size_t size_ = 0;
};

/// Collective over comm.mpi: raises Error(Mismatch) on every rank unless every rank passed the
/// same `values`. The message names `op`, the field, and the first disagreeing rank's value next to
/// rank 0's.
void agree_across_ranks(const CommImpl& comm, const char* op,
                        std::initializer_list<const char*> names, std::vector<long long> values);

/// Collective over comm.mpi: the smallest `value` of all ranks.
std::size_t min_across_ranks(const CommImpl& comm, std::size_t value);

}  // namespace tilecomm::detail
