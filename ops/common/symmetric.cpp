#include "ops/common/symmetric.hpp"

#include <fmt/format.h>

#include <cstring>

#include "tilecomm/error.hpp"

namespace tilecomm::detail {

SymmetricBuffer::SymmetricBuffer(const CommImpl& comm, std::size_t bytes)
    : bytes_((bytes + 63) & ~std::size_t{63}) {
  MPI_Info info;
  MPI_Info_create(&info);
  MPI_Info_set(info, "alloc_shared_noncontig", "true");
  void* base = nullptr;
  int rc = MPI_Win_allocate_shared(static_cast<MPI_Aint>(bytes_ + 64), 1, info, comm.node_mpi,
                                   &base, &win_);
  MPI_Info_free(&info);
  mpi_check(rc, "MPI_Win_allocate_shared");
  bases_.resize(comm.topo.local_size);
  for (int l = 0; l < comm.topo.local_size; ++l) {
    MPI_Aint size = 0;
    int disp = 0;
    void* p = nullptr;
    mpi_check(MPI_Win_shared_query(win_, l, &size, &disp, &p), "MPI_Win_shared_query");
    auto addr = reinterpret_cast<std::uintptr_t>(p);
    bases_[l] = reinterpret_cast<std::byte*>((addr + 63) & ~std::uintptr_t{63});
  }
  std::memset(bases_[comm.topo.local_rank], 0, bytes_);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  mpi_check(MPI_Barrier(comm.node_mpi), "MPI_Barrier(node)");
}

SymmetricBuffer::~SymmetricBuffer() {
  if (win_ != MPI_WIN_NULL) MPI_Win_free(&win_);
}

void agree_across_ranks(const CommImpl& comm, const char* op,
                        std::initializer_list<const char*> names, std::vector<long long> values) {
  const int n = static_cast<int>(values.size());
  std::vector<long long> all(static_cast<std::size_t>(n) * comm.topo.size);
  mpi_check(MPI_Allgather(values.data(), n, MPI_LONG_LONG, all.data(), n, MPI_LONG_LONG, comm.mpi),
            "MPI_Allgather");
  auto name = names.begin();
  for (int i = 0; i < n; ++i, ++name) {
    for (int r = 1; r < comm.topo.size; ++r) {
      if (all[r * n + i] != all[i])
        throw Error(ErrorCode::Mismatch,
                    fmt::format("{}: {} differs across ranks: rank 0 has {}, rank {} has {}", op,
                                *name, all[i], r, all[r * n + i]));
    }
  }
}

std::size_t min_across_ranks(const CommImpl& comm, std::size_t value) {
  unsigned long long v = value;
  mpi_check(MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, comm.mpi),
            "MPI_Allreduce");
  return static_cast<std::size_t>(v);
}

}  // namespace tilecomm::detail
