// tilecomm_calibrate: measures this machine's costs for the performance model behind Mode::Auto
// and writes the profile (docs/model.md). Run under mpirun with the layout to calibrate for, e.g.
//   mpirun -np 2 tilecomm_calibrate                      # on-node paths (and MPI on one node)
//   mpirun -np 2 -x TILECOMM_NODE_SIZE=1 tilecomm_calibrate -o off_node.json
#include <fmt/format.h>
#include <mpi.h>

#include <CLI/CLI.hpp>

#include "tilecomm/tilecomm.hpp"

int main(int argc, char** argv) {
  CLI::App app{"Measure tilecomm's cost profile for Mode::Auto's model"};
  tilecomm::CalibrateOptions options;
  app.add_option("-o,--output", options.path,
                 "profile file (default: TILECOMM_PROFILE, else "
                 "$XDG_CACHE_HOME/tilecomm/profile-<host>-<version>.json)");
  bool quiet = false;
  app.add_flag("-q,--quiet", quiet, "no summary table");
  CLI11_PARSE(app, argc, argv);
  options.print = !quiet;
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rc = 0;
  try {
    tilecomm::Communicator comm(MPI_COMM_WORLD);
    tilecomm::Device device;
    tilecomm::calibrate(comm, device, options);
  } catch (const tilecomm::Error& e) {
    fmt::print(stderr, "tilecomm_calibrate: {}\n", e.what());
    rc = 2;
  }
  MPI_Finalize();
  return rc;
}
