#!/usr/bin/env bash
# Produces every fused-operator figure in the README: the three operators, each at a roughly
# balanced shape (compute ~ communication), on (a) one node over shared memory and (b) two emulated
# nodes (tools/cluster, network namespaces) joined by 1 Gbit/s and 5 Gbit/s links; plus a size sweep
# on the 1 Gbit/s link for the plot. Writes JSON to bench/results/ and prints the README table.
# Needs root (network namespaces) for (b) and python3-matplotlib for the plots.
# Usage: [TRACE=1] [ITERS=30] bench/fused/run_suite.sh [build dir]   (TRACE=1: also timelines)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${1:-$root/build}"
out="$root/bench/results"
/usr/bin/python3 -c "import matplotlib" 2>/dev/null ||
  { echo "run_suite.sh: needs Debian's python3-matplotlib (apt-get install python3-matplotlib)" >&2; exit 2; }
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
perf="$build/bench/fused/fused_perf"
local_mpirun=(mpirun -np 2 --bind-to none --mca mpi_yield_when_idle 1)
iters=(-n "${ITERS:-30}" -w 3)

# Shapes: the size and fixed knobs per op; the ratio knob (GEMV: K per rank, embedding: bag size,
# MoE: K) is searched by --balance in every setting so that compute ~ communication on the machine
# at hand (the balanced point of the papers' tables). The JSON records the ratio found.
# shellcheck source=suite_shapes.sh
source "$(dirname "$0")/suite_shapes.sh"
ops=(gemv_allreduce embedding_alltoall gemm_alltoall)

for op in "${ops[@]}"; do
  # One node: each rank gets the machine's cores as CUs (default).
  # shellcheck disable=SC2086
  "${local_mpirun[@]}" "$perf" --op "$op" ${shape[$op]} --balance "${iters[@]}" --json "$out/${op}_shm.json"
  for rate in 1gbit 5gbit; do
    # Two emulated nodes on 2 cores: one CU per rank (a node = one core's worth of compute).
    # shellcheck disable=SC2086
    "$root/tools/cluster/cluster.sh" --nodes 2 --rate "$rate" -- \
      "$perf" --op "$op" ${shape[$op]} --balance --cus 1 "${iters[@]}" --json "$out/${op}_${rate}.json" \
      ${TRACE:+--trace "$out/${op}_${rate}_trace.json"}
  done
done

# Sweep on the 1 Gbit/s link for the plot, at the balanced ratio, from a quarter of the size up.
for op in "${ops[@]}"; do
  read -r -a s <<<"${shape[$op]}"  # "-b SIZE" first, then the fixed knobs
  base=${s[1]}
  "$root/tools/cluster/cluster.sh" --nodes 2 --rate 1gbit -- \
    "$perf" --op "$op" "${s[@]:2}" --ratio "$(ratio_of "$out/${op}_1gbit.json")" \
    -b $((base / 4)) -e "$base" -f 2 --cus 1 -n 10 -w 2 --json "$out/${op}_1gbit_sweep.json"
done
/usr/bin/python3 "$root/tools/plot_fused.py" "$out/fused_1gbit.png" \
  "$out/gemv_allreduce_1gbit_sweep.json" "$out/embedding_alltoall_1gbit_sweep.json" \
  "$out/gemm_alltoall_1gbit_sweep.json"
/usr/bin/python3 "$root/tools/fused_table.py" "$out"/*_{shm,1gbit,5gbit}.json
# Timelines of one fused iteration per operator on the 1 Gbit/s link (TRACE=1 runs only).
if [ -n "${TRACE:-}" ]; then
  for op in "${ops[@]}"; do
    /usr/bin/python3 "$root/tools/plot_trace.py" "$out/${op}_1gbit_trace.json" "$out/${op}_1gbit_trace.png" \
      "$op, fused, one iteration, 2 emulated nodes at 1 Gbit/s"
  done
fi
