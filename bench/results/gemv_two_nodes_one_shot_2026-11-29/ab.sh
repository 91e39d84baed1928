#!/bin/sh
# A/B of GEMV+AllReduce's fused protocols between 2 emulated nodes x 1 rank: one-shot against
# two-shot (the default above 256 KiB until 2026-11-29), forced with --fused-algorithm on one
# binary, alternated run by run (ROUNDS rounds, the order flipped each round), each setting with
# its own calibrated profile (the ops cut their one-shot blocks for it).
# Usage: [RATES="1 5 10"] [SIZES=...] [RATIO=K] [ROUNDS=2] ab.sh BUILD OUT_DIR (root: tools/cluster)
set -eu
build=${1:-build}
out=${2:-.}
rounds=${ROUNDS:-2}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
cluster=tools/cluster/cluster.sh
for rate in ${RATES:-1 5 10}; do
  prof=$out/profile_${rate}g.json
  $cluster --quiet --nodes 2 --rate ${rate}gbit --timeout 280 -- "$build/tools/tilecomm_calibrate" -q -o "$prof"
  export TILECOMM_PROFILE=$prof
  for m in ${SIZES:-131072 262144 1048576}; do
    r=0
    while [ $r -lt "$rounds" ]; do
      if [ $((r % 2)) -eq 0 ]; then order="one_shot two_shot"; else order="two_shot one_shot"; fi
      for a in $order; do
        line=$($cluster --quiet --nodes 2 --rate ${rate}gbit --env TILECOMM_PROFILE --timeout 280 -- \
          "$build/bench/fused/fused_perf" --op gemv_allreduce -b "$m" --ratio "${RATIO:-16}" --fused-algorithm "$a" \
          --lead-in-ms 10 -n 60 --modes sequential,fused 2>/dev/null | tail -1)
        echo "${rate}gbit M=$m K=${RATIO:-16} round=$r $a | $line"
      done
      r=$((r + 1))
    done
  done
done
