#!/usr/bin/env bash
# Issue 15's bar for Mode::Auto: within 5 % of the best fixed mode on every row of the README's
# balanced-shape table. Re-runs each row (the ratio run_suite.sh found, read from its JSON) with
# fused_perf --auto: Auto on a context of its own, called until it settles (its trial calls are
# counted, not timed), then timed interleaved with the fixed modes. Writes
# bench/results/auto/<op>_<setting>.json and prints the table (tools/auto_table.py).
# Needs root (tools/cluster) and run_suite.sh's JSON. Auto uses a cost profile if one is found
# (TILECOMM_PROFILE, or the default path; docs/model.md), else it measures.
# Usage: [ITERS=30] bench/fused/run_auto_check.sh [build dir]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${1:-$root/build}"
res="$root/bench/results"
out="$res/auto"
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
perf="$build/bench/fused/fused_perf"
iters=(-n "${ITERS:-30}" -w 3 --auto)
decode_iters=(-n "${DECODE_ITERS:-200}" -w 20 --auto)
# shellcheck source=suite_shapes.sh
source "$(dirname "$0")/suite_shapes.sh"
for op in gemv_allreduce embedding_alltoall gemm_alltoall; do
  # shellcheck disable=SC2086
  mpirun -np 2 --bind-to none --mca mpi_yield_when_idle 1 "$perf" --op "$op" ${shape[$op]} \
    --ratio "$(ratio_of "$res/${op}_shm.json")" "${iters[@]}" --json "$out/${op}_shm.json"
  for rate in 1gbit 5gbit; do
    # shellcheck disable=SC2086
    "$root/tools/cluster/cluster.sh" --quiet --nodes 2 --rate "$rate" -- "$perf" --op "$op" \
      ${shape[$op]} --ratio "$(ratio_of "$res/${op}_${rate}.json")" --cus 1 "${iters[@]}" \
      --json "$out/${op}_${rate}.json"
  done
done
# Decode's two GEMV+AllReduce shapes (examples/02 at 2 ranks: 1024 -> 4096 and 4096 -> 1024).
for s in "4096 512" "1024 2048"; do
  set -- $s
  "$root/tools/cluster/cluster.sh" --quiet --nodes 2 --rate 1gbit -- "$perf" --op gemv_allreduce \
    -b "$1" --ratio "$2" "${decode_iters[@]}" --json "$out/decode_${1}_1gbit.json"
done
/usr/bin/python3 "$root/tools/auto_table.py" "$out"/*.json
