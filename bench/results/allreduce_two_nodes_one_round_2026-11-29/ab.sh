#!/bin/sh
# A/B of allreduce(hierarchical) between 2 emulated nodes: OLD and NEW allreduce_perf binaries
# (statically linked), alternated run by run, ROUNDS rounds (order flipped each round), every
# size from 32 KiB to 4 MiB, on RPN ranks per node at each rate.
# Usage: [RATES="1 5 10"] [RPNS="1 2"] [ROUNDS=2] [MIN=32K] [MAX=4M] ab.sh OLD NEW > out.txt   (root: tools/cluster)
set -eu
old=$1
new=$2
rounds=${ROUNDS:-2}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for rpn in ${RPNS:-1 2}; do
  for rate in ${RATES:-1 5 10}; do
    r=0
    while [ $r -lt "$rounds" ]; do
      if [ $((r % 2)) -eq 0 ]; then order="old new"; else order="new old"; fi
      for b in $order; do
        if [ "$b" = old ]; then bin=$old; else bin=$new; fi
        tools/cluster/cluster.sh --quiet --nodes 2 --ranks-per-node "$rpn" --rate "${rate}gbit" \
          --timeout 280 -- "$bin" -b "${MIN:-32K}" -e "${MAX:-4M}" -f 2 -n 100 -w 10 --algo hierarchical 2>/dev/null |
          grep hierarchical | sed "s/^/2x$rpn ${rate}gbit round=$r $b /"
      done
      r=$((r + 1))
    done
  done
done
