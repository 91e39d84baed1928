#!/usr/bin/env bash
# Issue 15's bar for Mode::Auto: within 5 % of the best fixed mode on every row of the README's
# balanced-shape table. Re-runs each row (the ratio run_suite.sh found, read from its JSON) with
# fused_perf --auto: Auto on the fixed modes' context (fused_perf.cpp says why), called until it
# settles (its trial calls are counted, not timed), then timed interleaved with the fixed modes,
# then in an A/B against the fastest of them (the bar's figure: harness.hpp, auto_ab). Writes
# bench/results/auto/<op>_<setting>.json and prints the table (tools/auto_table.py).
# Needs root (tools/cluster) and run_suite.sh's JSON. Auto uses a cost profile if one is found
# (TILECOMM_PROFILE, or the default path; docs/model.md), else it measures. With PROFILES=1 each
# setting first makes its own profile with tilecomm_calibrate, in that setting (shared memory,
# 2 emulated nodes at 1 or 5 Gbit/s), and every run of the setting uses it; results then go to
# bench/results/auto_profile/ (profiles beside them).
# Usage: [ITERS=30] [MIN_TIMED_MS=150] [LEAD_IN_MS=10] [PROFILES=1] bench/fused/run_auto_check.sh
#        [build dir]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${1:-$root/build}"
res="$root/bench/results"
profiles="${PROFILES:-0}"
out="$res/auto"
[ "$profiles" = 1 ] && out="$res/auto_profile"
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
perf="$build/bench/fused/fused_perf"
# shm RUN... / cluster RATE RUN...: one setting's launcher (with PROFILES=1, its profile: made on
# first use, then passed to every rank in TILECOMM_PROFILE).
shm() {
  local launch=(mpirun -np 2 --bind-to none --mca mpi_yield_when_idle 1)
  if [ "$profiles" = 1 ]; then
    use_profile shm "${launch[@]}"
    launch+=(-x TILECOMM_PROFILE)
  fi
  "${launch[@]}" "$@"
}
cluster() {
  local rate=$1
  shift
  local launch=("$root/tools/cluster/cluster.sh" --quiet --nodes 2 --rate "$rate")
  if [ "$profiles" = 1 ]; then
    use_profile "$rate" "${launch[@]}" --
    launch+=(--env TILECOMM_PROFILE)
  fi
  "${launch[@]}" -- "$@"
}
use_profile() {
  local setting=$1
  shift
  export TILECOMM_PROFILE="$out/profile_$setting.json"
  [ -f "$TILECOMM_PROFILE" ] || "$@" "$build/tools/tilecomm_calibrate" -q -o "$TILECOMM_PROFILE"
}
# Short rows (one node, 5 Gbit/s) take more rounds, until their compute-only calls add up to
# MIN_TIMED_MS: with 30 rounds their medians moved 5-8 % between runs of the same code
# (2026-11-27: Auto on the best fixed mode timed 1.06-1.08x its column), as much as the bar.
# LEAD_IN_MS=T: every timed call of the rounds after T ms of calls of its own kind (fused_perf
# --lead-in-ms), as the A/B after them always does, so the best fixed mode is picked as a loop of
# it runs too (default: none, as the README's tables are measured).
lead_in=(${LEAD_IN_MS:+--lead-in-ms "$LEAD_IN_MS"})
iters=(-n "${ITERS:-30}" -w 3 --min-timed-ms "${MIN_TIMED_MS:-150}" --auto "${lead_in[@]}")
decode_iters=(-n "${DECODE_ITERS:-200}" -w 20 --auto "${lead_in[@]}")
# shellcheck source=suite_shapes.sh
source "$(dirname "$0")/suite_shapes.sh"
for op in gemv_allreduce embedding_alltoall gemm_alltoall; do
  # shellcheck disable=SC2086
  shm "$perf" --op "$op" ${shape[$op]} \
    --ratio "$(ratio_of "$res/${op}_shm.json")" "${iters[@]}" --json "$out/${op}_shm.json"
  for rate in 1gbit 5gbit; do
    # shellcheck disable=SC2086
    cluster "$rate" "$perf" --op "$op" ${shape[$op]} \
      --ratio "$(ratio_of "$res/${op}_${rate}.json")" --cus 1 "${iters[@]}" \
      --json "$out/${op}_${rate}.json"
  done
done
# Decode's two GEMV+AllReduce shapes (examples/02 at 2 ranks: 1024 -> 4096 and 4096 -> 1024).
for s in "4096 512" "1024 2048"; do
  set -- $s
  cluster 1gbit "$perf" --op gemv_allreduce -b "$1" --ratio "$2" "${decode_iters[@]}" \
    --json "$out/decode_${1}_1gbit.json"
done
/usr/bin/python3 "$root/tools/auto_table.py" "$out"/{gemv_allreduce,embedding_alltoall,gemm_alltoall}_*.json \
  "$out"/decode_*.json
