#include "ops/model/calibrate_link.hpp"

#include <mpi.h>

#include <algorithm>
#include <cstddef>
#include <vector>

#include "collectives/comm_impl.hpp"

namespace tilecomm::model {

double calibrate_link_rate(Communicator& comm, double min_seconds) {
  const detail::CommImpl& c = detail::impl_of(comm);
  const detail::Topology& topo = c.topo;
  if (topo.num_nodes < 2) return 0;
  constexpr std::size_t kBytes = std::size_t{256} << 10;  // per pair and round: past MPI's eager
  std::vector<int> peers;
  for (int q = 0; q < topo.size; ++q)
    if (!topo.on_node(q)) peers.push_back(q);
  std::vector<char> out(kBytes * peers.size(), 1), in(kBytes * peers.size());
  std::vector<MPI_Request> reqs(2 * peers.size());
  auto round = [&] {
    for (std::size_t i = 0; i < peers.size(); ++i) {
      MPI_Irecv(in.data() + i * kBytes, static_cast<int>(kBytes), MPI_BYTE, peers[i], 0, c.mpi,
                &reqs[2 * i]);
      MPI_Isend(out.data() + i * kBytes, static_cast<int>(kBytes), MPI_BYTE, peers[i], 0, c.mpi,
                &reqs[2 * i + 1]);
    }
    MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE);
  };
  round();  // connections up
  MPI_Barrier(c.mpi);
  const double t0 = MPI_Wtime();
  int rounds = 0, more = 1;
  while (more) {  // rank 0 decides, so every rank runs the same rounds
    round();
    ++rounds;
    more = MPI_Wtime() - t0 < min_seconds;
    MPI_Bcast(&more, 1, MPI_INT, 0, c.mpi);
  }
  double seconds = MPI_Wtime() - t0;
  MPI_Allreduce(MPI_IN_PLACE, &seconds, 1, MPI_DOUBLE, MPI_MAX, c.mpi);
  // The busiest node sends most: its ranks, each to every rank off the node.
  double busiest = 0;
  for (const std::vector<int>& ranks : topo.node_ranks)
    busiest = std::max(busiest, double(ranks.size()) * double(topo.size - int(ranks.size())));
  return busiest * double(kBytes) * rounds / seconds;
}

}  // namespace tilecomm::model
