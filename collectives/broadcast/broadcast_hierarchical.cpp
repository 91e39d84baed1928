// Broadcast across nodes: the root's node first gets the data through shared memory
// (shm_broadcast from the root), then the ranks of local index 0, one per node (comm.cross_mpi, in
// node order), run MPI_Ibcast from the root's node, then every other node copies it from its local
// rank 0 through shared memory. One MPI message per node pair instead of one per off-node rank.
#include "collectives/mpi_types.hpp"
#include "collectives/shm_phases.hpp"

namespace tilecomm::detail {
namespace {

std::string can_use(const CommImpl& comm, const CollArgs& a) {
  if (std::string why = mpi_int_counts(a, a.bytes()); !why.empty()) return why;
  return shm_fits(comm.segment);
}

void run(CommImpl& comm, const CollArgs& a) {
  if (a.count == 0) return;
  auto* buf = static_cast<std::byte*>(a.recv);
  const int root_node = comm.topo.node_of[a.root];
  if (comm.topo.node == root_node)
    shm_broadcast(comm, buf, a.bytes(), comm.topo.local_of[a.root],
                  "broadcast(hierarchical) on the root's node");
  if (comm.topo.num_nodes > 1 && comm.topo.local_rank == 0) {
    MPI_Request req;
    mpi_check(
        MPI_Ibcast(buf, static_cast<int>(a.bytes()), MPI_BYTE, root_node, comm.cross_mpi, &req),
        "MPI_Ibcast");
    comm.wait_all(&req, 1, "broadcast(hierarchical) between node leaders");
  }
  if (comm.topo.node != root_node)
    shm_broadcast(comm, buf, a.bytes(), 0, "broadcast(hierarchical) from the node leader");
}

}  // namespace

extern const Algorithm broadcast_hierarchical{"hierarchical", Collective::Broadcast, can_use, run};

}  // namespace tilecomm::detail
