#!/usr/bin/env bash
# A/B check of a change that must not move performance: two builds of fused_perf, interleaved run by
# run (old, new, old, new, ...) so both see the same machine, on the README's settings and shapes:
# one node (2 ranks, shared memory) and 2 emulated nodes at 1 Gbit/s (tools/cluster, root), each
# operator at the ratio recorded in bench/results/<op>_<setting>.json. Prints per operator and
# setting the median over rounds of each build's sequential and fused medians, and fused/sequential.
# Usage: bench/fused/ab_compare.sh OLD_BUILD NEW_BUILD [ROUNDS=3]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
old="$1" new="$2" rounds="${3:-3}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
# shellcheck source=suite_shapes.sh
source "$(dirname "$0")/suite_shapes.sh"
for op in gemv_allreduce embedding_alltoall gemm_alltoall; do
  for setting in shm 1gbit; do
    args=(--op "$op" ${shape[$op]} --ratio "$(ratio_of "$root/bench/results/${op}_${setting}.json")" -n 20 -w 3)
    for r in $(seq "$rounds"); do
      for build in old new; do
        dir=$old; [ "$build" = new ] && dir=$new
        json="$out/${op}_${setting}_${build}_$r.json"
        if [ "$setting" = shm ]; then
          mpirun -np 2 --bind-to none --mca mpi_yield_when_idle 1 "$dir/bench/fused/fused_perf" \
            "${args[@]}" --json "$json" >/dev/null
        else
          "$root/tools/cluster/cluster.sh" --nodes 2 --rate 1gbit -- \
            "$dir/bench/fused/fused_perf" "${args[@]}" --cus 1 --json "$json" >/dev/null
        fi
      done
    done
  done
done
/usr/bin/python3 - "$out" <<'PY'
import glob, json, os, statistics, sys
out = sys.argv[1]
print("| operator | setting | sequential old → new (ms) | fused old → new (ms) | fused/seq old → new | wrong |")
print("|---|---|---|---|---|---|")
for op in ("gemv_allreduce", "embedding_alltoall", "gemm_alltoall"):
    for setting in ("shm", "1gbit"):
        row = {}
        for build in ("old", "new"):
            rows = [json.load(open(f))[-1] for f in sorted(glob.glob(f"{out}/{op}_{setting}_{build}_*.json"))]
            seq = [r["sequential_us"] / 1e3 for r in rows]
            fus = [r["fused_us"] / 1e3 for r in rows]
            row[build] = (statistics.median(seq), statistics.median(fus),
                          statistics.median(f / s for f, s in zip(fus, seq)), sum(r["wrong"] for r in rows))
        o, n = row["old"], row["new"]
        print(f"| {op} | {setting} | {o[0]:.2f} → {n[0]:.2f} | {o[1]:.2f} → {n[1]:.2f} | "
              f"{o[2]:.2f} → {n[2]:.2f} | {o[3] + n[3]} |")
PY
