// ReduceScatter by MPI_Ireduce_scatter_block: the baseline.
#include <cstring>
#include <vector>

#include "collectives/mpi_types.hpp"

namespace tilecomm::detail {
namespace {

void run(CommImpl& comm, const CollArgs& a) {
  // bfloat16 as float32. In place, MPI leaves the result at the front of the widened copy.
  if (a.dtype == DataType::BFloat16) {
    const std::size_t n = a.count * static_cast<std::size_t>(comm.topo.size);
    reduce_bf16_as_float(a.send, n, a.recv, 0, a.count, [&](float* f) {
      MPI_Request req;
      mpi_check(MPI_Ireduce_scatter_block(MPI_IN_PLACE, f, static_cast<int>(a.count), MPI_FLOAT,
                                          mpi_op(a.op), comm.mpi, &req),
                "MPI_Ireduce_scatter_block");
      comm.wait_all(&req, 1, "reduce_scatter(mpi)");
    });
    return;
  }
  // MPI's in-place form reads the input from recv; ours keeps the input in send, so go through a
  // temporary when in place.
  std::vector<std::byte> tmp(a.in_place ? a.bytes() : 0);
  void* out = a.in_place ? tmp.data() : a.recv;
  MPI_Request req;
  mpi_check(MPI_Ireduce_scatter_block(a.send, out, static_cast<int>(a.count), mpi_datatype(a.dtype),
                                      mpi_op(a.op), comm.mpi, &req),
            "MPI_Ireduce_scatter_block");
  comm.wait_all(&req, 1, "reduce_scatter(mpi)");
  if (a.in_place && a.bytes() > 0) std::memcpy(a.recv, tmp.data(), a.bytes());
}

}  // namespace

extern const Algorithm reduce_scatter_mpi{"mpi", Collective::ReduceScatter, mpi_can_reduce, run};

}  // namespace tilecomm::detail
