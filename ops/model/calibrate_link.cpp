#include "ops/model/calibrate_link.hpp"

#include <mpi.h>

#include <algorithm>
#include <cstddef>
#include <vector>

#include "collectives/comm_impl.hpp"
#include "collectives/default_thresholds.hpp"
#include "collectives/p2p_common.hpp"

namespace tilecomm::model {

double calibrate_link_rate(Communicator& comm, double min_seconds) {
  const detail::CommImpl& c = detail::impl_of(comm);
  const detail::Topology& topo = c.topo;
  if (topo.num_nodes < 2) return 0;
  // Per pair and round: four of the pieces the library's collectives and proxy send off the node
  // (eager_message_bytes, under Open MPI's TCP eager limit). Whole 256 KiB messages go as
  // rendezvous, whose clear-to-send waits behind the queued bulk: 0.82 Gbit/s of 1 on 4 emulated
  // nodes, against 0.93-0.95 for the same bytes in pieces (docs/model.md, "Thirteenth session").
  constexpr std::size_t kBytes = 4 * detail::DefaultThresholds::eager_message_bytes;
  std::vector<int> peers;
  for (int q = 0; q < topo.size; ++q)
    if (!topo.on_node(q)) peers.push_back(q);
  std::vector<char> out(kBytes * peers.size(), 1), in(kBytes * peers.size());
  std::vector<MPI_Request> reqs;
  auto round = [&] {
    reqs.clear();
    for (std::size_t i = 0; i < peers.size(); ++i) {
      detail::p2p::irecv_pieces(in.data() + i * kBytes, kBytes, peers[i], 0, c.mpi, reqs);
      detail::p2p::isend_pieces(out.data() + i * kBytes, kBytes, peers[i], 0, c.mpi, reqs);
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
