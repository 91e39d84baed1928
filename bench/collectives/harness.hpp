#pragma once
/// \file harness.hpp
/// The nccl-tests-style driver behind allreduce_perf, reduce_scatter_perf, allgather_perf and
/// alltoall_perf.
///
/// Flags (as nccl-tests): -b/-e min/max bytes (K/M/G suffixes), -f step factor, -n iterations,
/// -w warm-up iterations, -c 0/1 check every element, -d dtype, -o op; plus --algo NAME|all and
/// --json FILE. `size` is nccl-tests' size: AllReduce the bytes of each rank's buffer,
/// ReduceScatter the send buffer (all blocks), AllGather the receive buffer, All-to-All the send
/// buffer (per-peer block = size / ranks). busbw = algbw x 2(p-1)/p for AllReduce and x (p-1)/p
/// for the others.
///
/// Timing: every iteration is timed on each rank between two barriers (the barrier itself is not
/// timed); the per-iteration maximum over ranks is taken afterwards with MPI_Allreduce; `time` is
/// the median of those maxima, with min and max beside it. All algorithms run interleaved, one
/// iteration each in turn, so noise hits all alike; `mpi` is always measured as the baseline and
/// speedup_vs_mpi = time(mpi) / time(algo).

#include "tilecomm/collectives.hpp"

namespace tilecomm::bench {

/// Initialises MPI, parses the command line, runs the sweep for `coll` and prints the table on
/// rank 0 (and writes the JSON file). Finalises MPI. Returns the exit code: 0 on success, 1 when
/// any element was wrong, 2 on a usage error or a failed call.
int run_perf(int argc, char** argv, Collective coll);

}  // namespace tilecomm::bench
