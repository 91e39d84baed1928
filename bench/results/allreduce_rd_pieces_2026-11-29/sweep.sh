#!/bin/sh
# Recursive doubling in eager pieces against the ring between 2 emulated nodes x 1 rank: one
# allreduce_perf binary, both algorithms in each run (rounds of --algo recursive_doubling,ring and
# ring,recursive_doubling alternated), 32 KiB - 1 MiB, at each rate.
# Usage: [RATES="1 5 10"] [ROUNDS=2] [MIN=32K] [MAX=1M] sweep.sh ALLREDUCE_PERF > out.txt   (root: tools/cluster)
set -eu
bin=$1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for rate in ${RATES:-1 5 10}; do
  r=0
  while [ $r -lt "${ROUNDS:-2}" ]; do
    if [ $((r % 2)) -eq 0 ]; then algos=recursive_doubling,ring; else algos=ring,recursive_doubling; fi
    tools/cluster/cluster.sh --quiet --nodes 2 --rate "${rate}gbit" --timeout 280 -- \
      "$bin" -b "${MIN:-32K}" -e "${MAX:-1M}" -f 2 -n 100 -w 10 --algo "$algos" 2>/dev/null |
      grep -E " (ring|recursive_doubling) " | sed "s/^/${rate}gbit round=$r /"
    r=$((r + 1))
  done
done
