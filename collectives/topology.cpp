// Node layout discovery: one MPI_Allreduce on the node and two MPI_Allgathers over the world.
#include "collectives/topology.hpp"

#include <algorithm>

#include "collectives/mpi_check.hpp"

namespace tilecomm::detail {

Topology::Topology(MPI_Comm world, MPI_Comm node_comm) {
  MPI_Comm_rank(world, &rank);
  MPI_Comm_size(world, &size);
  MPI_Comm_rank(node_comm, &local_rank);
  MPI_Comm_size(node_comm, &local_size);

  // Node ids: nodes numbered by their lowest world rank.
  int leader = rank;
  mpi_check(MPI_Allreduce(MPI_IN_PLACE, &leader, 1, MPI_INT, MPI_MIN, node_comm), "MPI_Allreduce");
  std::vector<int> leaders(size), locals(size);
  mpi_check(MPI_Allgather(&leader, 1, MPI_INT, leaders.data(), 1, MPI_INT, world), "MPI_Allgather");
  mpi_check(MPI_Allgather(&local_rank, 1, MPI_INT, locals.data(), 1, MPI_INT, world),
            "MPI_Allgather");
  std::vector<int> sorted = leaders;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  num_nodes = static_cast<int>(sorted.size());
  node_of.resize(size);
  node_ranks.assign(num_nodes, {});
  for (int r = 0; r < size; ++r) {
    node_of[r] = static_cast<int>(std::lower_bound(sorted.begin(), sorted.end(), leaders[r]) -
                                  sorted.begin());
    node_ranks[node_of[r]].push_back(r);
  }
  local_of = locals;
  node = node_of[rank];
  local_to_world = node_ranks[node];
}

int Topology::smallest_node_size() const {
  std::size_t fewest = node_ranks[0].size();
  for (const auto& ranks : node_ranks)
    fewest = std::min(fewest, ranks.size());
  return static_cast<int>(fewest);
}

int Topology::largest_node_size() const {
  std::size_t most = 1;
  for (const auto& ranks : node_ranks)
    most = std::max(most, ranks.size());
  return static_cast<int>(most);
}

}  // namespace tilecomm::detail
