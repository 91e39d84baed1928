#!/usr/bin/env bash
# Installs, builds, and runs tilecomm's main demonstration: the fused operators on the shapes of
# real models (fused_perf --workload all: MLPerf DLRM-v2's embeddings, Llama 2's row-parallel
# decode projections, Mixtral's experts; docs/workloads.md) on 2 local ranks, every variant side by
# side: sequential, sequential with the best collective, shaped (LDS, non-blocking, CU mask), each
# baseline's knobs tuned by the benchmark, and fused; every result checked against sequential.
# The run takes 72 s on this 2-core VM once built (load average 6-8; DEMO_SKIP_BUILD=1 skips the
# install and build steps). DLRM fills 6.3 GiB of tables: it needs ~8 GiB of free memory;
# DEMO_WORKLOAD=llama-decode or mixtral-moe runs one workload only.
# Extra arguments go to fused_perf (e.g. -n 10 --json out.json).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
if [ "${DEMO_SKIP_BUILD:-0}" != 1 ]; then
  "$root/scripts/install-deps.sh"
  "$root/scripts/build.sh"
fi
build="${TILECOMM_BUILD_DIR:-$root/build}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
mpirun=(mpirun -np 2 --oversubscribe --bind-to none --mca mpi_yield_when_idle 1)

echo "== the device model: occupancy shaping in one process"
"$build/examples/00_device_model"

echo
echo "== real-model workloads on 2 ranks (one node, shared memory): every variant, tuned"
# Few rounds so the demo stays short; docs/workloads.md's tables use the defaults (-n 10 -w 3
# --tune-iters 3).
"${mpirun[@]}" "$build/bench/fused/fused_perf" --workload "${DEMO_WORKLOAD:-all}" -n 5 -w 1 \
  --tune-iters 2 "$@"
echo
echo "The same across 2 emulated nodes on a 1 Gbit/s link (as root; docs/workloads.md):"
echo "  tools/cluster/cluster.sh --nodes 2 --rate 1gbit -- $build/bench/fused/fused_perf --workload all"
echo "Operators at balanced shapes (a stress test): TRACE=1 bench/fused/run_suite.sh"
