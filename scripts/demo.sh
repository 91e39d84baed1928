#!/usr/bin/env bash
# Installs, builds, and runs tilecomm's main demonstration: the three fused operators compared in
# their three modes (sequential, shaped, fused) on 2 local ranks, each at the shape where its
# compute and its communication take about the same time (fused_perf --balance).
# Extra arguments go to every fused_perf run (e.g. -n 20).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"
build="${TILECOMM_BUILD_DIR:-$root/build}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
mpirun=(mpirun -np 2 --oversubscribe --bind-to none --mca mpi_yield_when_idle 1)

echo "== the device model: occupancy shaping in one process"
"$build/examples/00_device_model"

for op in gemv_allreduce embedding_alltoall gemm_alltoall; do
  case "$op" in
    gemv_allreduce) size=(-b 131072) ;;
    embedding_alltoall) size=(-b 2048 --dim 64 --tables 4) ;;
    gemm_alltoall) size=(-b 1024 --dim 256 --tables 4) ;;
  esac
  echo
  echo "== $op: sequential vs shaped vs fused on 2 ranks (one node, shared memory)"
  "${mpirun[@]}" "$build/bench/fused/fused_perf" --op "$op" "${size[@]}" --balance -n 10 -w 2 "$@"
done
echo
echo "For the same comparison across 2 emulated nodes on a 1 Gbit/s link (as root):"
echo "  tools/cluster/cluster.sh --nodes 2 --rate 1gbit -- $build/bench/fused/fused_perf --op gemv_allreduce --balance --cus 1"
echo "  (every README figure: TRACE=1 bench/fused/run_suite.sh)"
