#pragma once
// Where the ranks of a communicator are: their nodes (real, or pretend nodes of consecutive ranks)
// and their places on them. Plain data, the same on every rank, fixed once the communicator is
// built.

#include <mpi.h>

#include <vector>

namespace tilecomm::detail {

struct Topology {
  Topology() = default;
  /// Collective over `world`: numbers the nodes by their lowest world rank and records every
  /// rank's node and local rank. `node_comm` holds the ranks of this rank's node, ranked as in
  /// `world`.
  Topology(MPI_Comm world, MPI_Comm node_comm);

  int rank = 0, size = 1;              ///< this rank in the communicator, and its size
  int node = 0, num_nodes = 1;         ///< this rank's node, and the number of nodes
  int local_rank = 0, local_size = 1;  ///< this rank's index on its node, and the node's ranks
  std::vector<int> node_of;            ///< world rank -> its node
  std::vector<int> local_of;           ///< world rank -> its local rank on its node
  std::vector<int> local_to_world;     ///< local rank on this node -> world rank
  std::vector<std::vector<int>> node_ranks;  ///< node -> its world ranks, ascending

  /// True when `world_rank` is on this rank's node.
  bool on_node(int world_rank) const { return node_of[world_rank] == node; }
  /// Ranks on the node with the fewest / the most ranks (uneven nodes decide some choices).
  int smallest_node_size() const;
  int largest_node_size() const;
};

}  // namespace tilecomm::detail
