// mpi_best: the MPI baseline in its best configuration (issue 13 §2). The collectives' harness
// measures `mpi` inside a tilecomm process -- MPI_THREAD_MULTIPLE, launched with
// mpi_yield_when_idle so the device's threads can run -- and both slow Open MPI down. This program
// is plain MPI: MPI_Init (MPI_THREAD_SINGLE), no tilecomm, meant to be launched with ranks pinned
// to cores and without yield (bench/collectives/vs_best_mpi.py does both runs side by side).
//
//   mpirun -np 2 --bind-to core mpi_best [-b 8] [-e 16M] [-f 4] [-n 50] [-w 10]
//          [--coll allreduce|alltoall|reduce_scatter|allgather] [--json FILE]
//
// Same sizes and timing as the harness (harness.hpp): float32 (sum), every iteration between two
// barriers, the slowest rank's time per iteration, median [min, max]; `size` as nccl-tests'.
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace {

struct Row {
  std::uint64_t bytes;
  double median, min, max;
};

// Runs `call` iters times after warmup untimed ones; the slowest rank's time per iteration (us).
template <class Call>
Row time_size(std::uint64_t bytes, int iters, int warmup, Call&& call) {
  for (int i = 0; i < warmup; ++i)
    call();
  std::vector<double> t(static_cast<std::size_t>(iters));
  for (double& v : t) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    call();
    v = (MPI_Wtime() - t0) * 1e6;
  }
  MPI_Allreduce(MPI_IN_PLACE, t.data(), iters, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  std::sort(t.begin(), t.end());
  return {bytes, t[t.size() / 2], t.front(), t.back()};
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, p = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  std::uint64_t min_bytes = 8, max_bytes = 16 << 20;
  double factor = 4.0;
  int iters = 50, warmup = 10;
  std::string coll = "allreduce", json;
  CLI::App app{"plain MPI collectives (MPI_THREAD_SINGLE, no tilecomm): the best-case baseline"};
  app.add_option("-b,--minbytes", min_bytes, "minimum size in bytes")
      ->transform(CLI::AsSizeValue(false));
  app.add_option("-e,--maxbytes", max_bytes, "maximum size in bytes")
      ->transform(CLI::AsSizeValue(false));
  app.add_option("-f,--stepfactor", factor, "size factor per step")->check(CLI::Range(1.01, 1e6));
  app.add_option("-n,--iters", iters, "timed iterations per size")->check(CLI::Range(1, 1 << 20));
  app.add_option("-w,--warmup_iters", warmup, "untimed iterations")->check(CLI::Range(0, 1 << 20));
  app.add_option("--coll", coll, "allreduce, alltoall, reduce_scatter or allgather")
      ->check(CLI::IsMember({"allreduce", "alltoall", "reduce_scatter", "allgather"}));
  app.add_option("--json", json, "write the rows to this file");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = rank == 0 ? app.exit(e) : e.get_exit_code();
    MPI_Finalize();
    return rc;
  }
  const std::size_t max_elems = std::max<std::uint64_t>(max_bytes / 4, p) * 2;
  std::vector<float> send(max_elems * p, 1.0f), recv(max_elems * p);
  std::vector<int> counts(p);
  std::vector<Row> rows;
  for (double b = static_cast<double>(min_bytes); b <= static_cast<double>(max_bytes) * 1.0001;
       b *= factor) {
    const auto bytes = static_cast<std::uint64_t>(b);
    // Elements as the harness counts them: AllReduce and AllGather's `size` is one rank's
    // (AllGather: the receive buffer, p blocks), ReduceScatter and All-to-All's the send buffer.
    const int n = static_cast<int>(std::max<std::uint64_t>(bytes / 4, 1));
    const int block = std::max(1, n / p);
    if (coll == "allreduce")
      rows.push_back(time_size(bytes, iters, warmup, [&] {
        MPI_Allreduce(send.data(), recv.data(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      }));
    else if (coll == "alltoall")
      rows.push_back(time_size(bytes, iters, warmup, [&] {
        MPI_Alltoall(send.data(), block, MPI_FLOAT, recv.data(), block, MPI_FLOAT, MPI_COMM_WORLD);
      }));
    else if (coll == "reduce_scatter")
      rows.push_back(time_size(bytes, iters, warmup, [&] {
        MPI_Reduce_scatter_block(send.data(), recv.data(), block, MPI_FLOAT, MPI_SUM,
                                 MPI_COMM_WORLD);
      }));
    else
      rows.push_back(time_size(bytes, iters, warmup, [&] {
        MPI_Allgather(send.data(), block, MPI_FLOAT, recv.data(), block, MPI_FLOAT, MPI_COMM_WORLD);
      }));
  }
  if (rank == 0) {
    std::printf("# mpi_best %s: %d ranks, MPI_THREAD_SINGLE, float32%s\n", coll.c_str(), p,
                coll == "allreduce" || coll == "reduce_scatter" ? " sum" : "");
    std::printf("%12s %12s %12s %12s\n", "# size", "time(us)", "min(us)", "max(us)");
    nlohmann::json out = nlohmann::json::array();
    for (const Row& r : rows) {
      std::printf("%12llu %12.2f %12.2f %12.2f\n", static_cast<unsigned long long>(r.bytes),
                  r.median, r.min, r.max);
      out.push_back({{"coll", coll},
                     {"bytes", r.bytes},
                     {"time_us", r.median},
                     {"min_us", r.min},
                     {"max_us", r.max},
                     {"ranks", p}});
    }
    if (!json.empty()) std::ofstream(json) << out.dump(1) << "\n";
  }
  MPI_Finalize();
  return 0;
}
