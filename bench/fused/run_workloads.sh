#!/usr/bin/env bash
# Produces the README's workload figures (docs/workloads.md): fused_perf --workload on 2 ranks on
# (a) one node over shared memory and (b) 2 emulated nodes x 1 rank (tools/cluster) at 1 Gbit/s and
# 10 Gbit/s; every variant, tuned, side by side. Writes OUT/{shm,1gbit,10gbit}.json, one fused trace
# per workload and setting (the 1 Gbit/s ones drawn), the plots OUT/plot_<workload>.png, and prints
# the README's compact table. Needs root (network namespaces) for (b) and python3-matplotlib.
# PROFILES=1: first calibrate each setting (tilecomm_calibrate -> OUT/profile_<setting>.json) and
# run it with that profile (TILECOMM_PROFILE), as a user who ran tilecomm_calibrate does: Auto
# predicts from it, and GemvAllReduce cuts its one-shot blocks across nodes for its link.
# Usage: [WORKLOAD=all] [OUT=bench/results/workloads] [PROFILES=1] bench/fused/run_workloads.sh
#        [build dir] [fused_perf arguments, e.g. -n 20]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="$(cd "${1:-$root/build}" && pwd)"
shift || true
out="${OUT:-$root/bench/results/workloads}"
/usr/bin/python3 -c "import matplotlib" 2>/dev/null ||
  { echo "run_workloads.sh: needs Debian's python3-matplotlib (apt-get install python3-matplotlib)" >&2; exit 2; }
mkdir -p "$out"
out="$(cd "$out" && pwd)"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
perf=("$build/bench/fused/fused_perf" --workload "${WORKLOAD:-all}" "$@")
unset TILECOMM_PROFILE
profile() {  # setting, then the launcher's words up to "--": TILECOMM_PROFILE for the setting
  local setting=$1
  shift
  [[ ${PROFILES:-0} == 1 ]] || return 0
  unset TILECOMM_PROFILE
  "$@" "$build/tools/tilecomm_calibrate" -q -o "$out/profile_$setting.json"
  export TILECOMM_PROFILE="$out/profile_$setting.json"
}

shm=(mpirun -np 2 --oversubscribe --bind-to none --mca mpi_yield_when_idle 1)
echo "== one node, np 2 (load: $(cut -d' ' -f1-3 /proc/loadavg))"
profile shm "${shm[@]}"
"${shm[@]}" ${TILECOMM_PROFILE:+-x TILECOMM_PROFILE} \
  "${perf[@]}" --json "$out/shm.json" --trace "$out/shm_trace"
for rate in 1gbit 10gbit; do
  echo "== 2 emulated nodes x 1 rank, $rate (load: $(cut -d' ' -f1-3 /proc/loadavg))"
  cluster=("$root/tools/cluster/cluster.sh" --nodes 2 --rate "$rate" --quiet)
  profile "$rate" "${cluster[@]}" --
  "${cluster[@]}" ${TILECOMM_PROFILE:+--env TILECOMM_PROFILE} -- \
    "${perf[@]}" --json "$out/$rate.json" --trace "$out/${rate}_trace"
done
echo "== done (load: $(cut -d' ' -f1-3 /proc/loadavg))"

for trace in "$out"/1gbit_trace_*.json; do
  w="$(basename "$trace" .json)"
  /usr/bin/python3 "$root/tools/plot_trace.py" "$trace" "$out/$w.png" \
    "${w#1gbit_trace_}: one fused iteration, 2 emulated nodes at 1 Gbit/s"
done
/usr/bin/python3 "$root/tools/plot_workloads.py" "$out/plot" \
  "1 node (shared memory)=$out/shm.json" "2 emulated nodes, 1 Gbit/s=$out/1gbit.json" \
  "2 emulated nodes, 10 Gbit/s=$out/10gbit.json"
/usr/bin/python3 "$root/tools/workloads_table.py" --compact \
  --match "dlrm|mixtral|K=2048 bf16$|K=14336 bf16$|K=14336 n=8 bf16$" \
  "1 node=$out/shm.json" "1 Gbit/s=$out/1gbit.json" "10 Gbit/s=$out/10gbit.json"
