// The symmetric shared window of a communicator, its flags and the node barrier.
#include "collectives/shared_segment.hpp"

#include <fmt/format.h>

#include <cstring>

#include "collectives/mpi_check.hpp"
#include "runtime/wait.hpp"

namespace tilecomm::detail {

SharedSegment::SharedSegment(MPI_Comm node_comm, const Topology& topology, std::size_t data_bytes,
                             double timeout_s)
    : topo_(topology), timeout_s_(timeout_s), data_bytes_((data_bytes + 63) & ~std::size_t{63}) {
  MPI_Info info;
  MPI_Info_create(&info);
  MPI_Info_set(info, "alloc_shared_noncontig", "true");
  void* base = nullptr;
  const std::size_t bytes = kControlBytes + data_bytes_;
  int rc = MPI_Win_allocate_shared(static_cast<MPI_Aint>(bytes), 1, info, node_comm, &base, &win_);
  MPI_Info_free(&info);
  mpi_check(rc, "MPI_Win_allocate_shared");
  bases_.resize(topo_.local_size);
  for (int l = 0; l < topo_.local_size; ++l) {
    MPI_Aint size = 0;
    int disp = 0;
    void* p = nullptr;
    mpi_check(MPI_Win_shared_query(win_, l, &size, &disp, &p), "MPI_Win_shared_query");
    bases_[l] = static_cast<std::byte*>(p);
  }
  std::memset(bases_[topo_.local_rank], 0, kControlBytes);
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

SharedSegment::~SharedSegment() {
  if (win_ != MPI_WIN_NULL) MPI_Win_free(&win_);
}

void SharedSegment::wait_flag(int local, int index, std::uint64_t value, const char* what) const {
  auto f = flag(local, index);
  wait_until([&] { return f.load(std::memory_order_acquire) >= value; }, timeout_s_,
             [&] {
               return fmt::format("{}: rank {} waited for rank {} (flag {} = {}, expected >= {})",
                                  what, topo_.rank, topo_.local_to_world[local], index, f.load(),
                                  value);
             });
}

void SharedSegment::node_barrier() {
  if (topo_.local_size == 1) return;
  const std::uint64_t epoch = ++barrier_epoch_;
  post(topo_.local_rank, kBarrierFlag, epoch);
  for (int l = 0; l < topo_.local_size; ++l)
    if (l != topo_.local_rank) wait_flag(l, kBarrierFlag, epoch, "node barrier");
}

}  // namespace tilecomm::detail
