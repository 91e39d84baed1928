#!/bin/sh
# Measures what tools/sim_compare.py compares tilecomm_sim with (docs/model.md, "Simulator"):
# for each setting, a profile from tilecomm_calibrate made in that setting, then fused_perf with
# that profile (TILECOMM_PROFILE: the tiles it implies, as a calibrated user's ops cut them)
# (every mode, -n ITERS timed iterations, median of the slowest rank) for GEMV+AllReduce
# (M=262144: two-shot on one node and beyond two nodes, one-shot on two; M=16384: one-shot),
# EmbeddingAllToAll (batch 4096 and 1024), GemmReduceScatter (M=2048 and 512, K=256, N=1024) and
# GemmAllToAll (2048 and 512 rows per rank over 4 experts per rank, K=128, N=256, fused_perf's
# synthetic routing; since the twenty-second session).
# Settings: SETTINGS="shm 2n1g 2n5g 2n2g 3n1g 4n1g" (shm: one node, np 2; XnYg: X emulated
# nodes of one rank at Y Gbit/s, tools/cluster/cluster.sh, needs root; XnYgxR: of R ranks each).
# LINK=tbf (default) keeps cluster.sh's default bucket, 2 ms of the rate, which an idle link
# saves up and a transfer then spends at once. LINK=nic (tried in the twenty-first session,
# 2026-11-29) emulates links up to 1 Gbit/s without a bucket to speak of, as a NIC has: tbf bursts
# of 64 KiB with the veths' packets cut to 32 KiB (cluster.sh --burst 65536 --gso 32768); faster
# links keep the default bucket (bench/results/nic_link_2026-11-29). BURST=BYTES and GSO=BYTES set
# every link directly. link_<s>.json records each setting's, and sim_compare.py's simulated links'
# token buckets hold that burst. SHM_BIND=core binds the
# one-node ranks to a core each (Open MPI's own default at np 2; default: none, as the README's
# benchmarks run). MIN_TIMED_MS (default 10) takes timed rounds beyond ITERS until the compute-only
# calls add up to that many ms (fused_perf --min-timed-ms): the 35-100 us calls of GEMV M=16384
# get about 300 rounds, not 10; rows of 1 ms and more keep ITERS. (That fixes the median within a
# run; on one node the row still moves between runs, 47-87 us sequential on 2026-11-28.)
# CALIBRATE=each (default) calibrates right before every op's run, not once per setting
# (profile_<op>_<size>_<s>.json, which sim_compare.py then predicts that row from), so that both
# see the VM in one state: this VM flips between two states that last tens of seconds, in which
# the memory-bound kernels run 10-40 % apart (docs/model.md, "Twentieth session"). The twentieth
# session's grids also made the setting's profile first, unused. CALIBRATE=setting: one profile
# per setting (profile_<s>.json), as every grid until 2026-11-29's twentieth session.
# OPS="gemm_alltoall ..." runs those ops' rows only (default: every op).
# Usage: tools/sim_validate.sh BUILD_DIR OUT_DIR
set -eu
build=${1:-build}
out=${2:-bench/results/sim}
iters=${ITERS:-10}
lead_in_ms=${LEAD_IN_MS:-10}
min_timed_ms=${MIN_TIMED_MS:-10}
settings=${SETTINGS:-"shm 2n1g 2n5g 3n1g 4n1g 2n2g"}
calibrate=${CALIBRATE:-each}
link=${LINK:-tbf}
case $link in nic | tbf) ;; *) echo "LINK=$link: want nic or tbf" >&2; exit 2 ;; esac
case $calibrate in each | setting) ;; *) echo "CALIBRATE=$calibrate: want each or setting" >&2; exit 2 ;; esac
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)

run() {  # setting, program and arguments (TILECOMM_PROFILE, when set, forwarded to the ranks)
  s=$1
  shift
  case $s in
    shm)
      mpirun -np 2 --oversubscribe --bind-to "${SHM_BIND:-none}" --mca mpi_yield_when_idle 1 \
        ${TILECOMM_PROFILE:+-x TILECOMM_PROFILE} "$@"
      ;;
    *)
      nodes=${s%%n*}
      rest=${s#*n}
      rate=${rest%%g*}gbit
      rpn=1
      case $rest in *x*) rpn=${rest#*x} ;; esac
      "$here/cluster/cluster.sh" --quiet --nodes "$nodes" --ranks-per-node "$rpn" --rate "$rate" \
        ${burst:+--burst "$burst"} ${gso:+--gso "$gso"} \
        ${TILECOMM_PROFILE:+--env TILECOMM_PROFILE} --timeout 900 -- "$@"
      ;;
  esac
}

for s in $settings; do
  echo "== $s  $(uptime)"
  unset TILECOMM_PROFILE
  # The setting's links (run() passes them to cluster.sh), recorded once for sim_compare.py
  # (empty: cluster.sh's default).
  burst=${BURST:-} gso=${GSO:-}
  if [ "$s" != shm ]; then
    rest=${s#*n}
    if [ "$link" = nic ] && [ "${rest%%g*}" -le 1 ]; then
      burst=${burst:-65536} gso=${gso:-32768}
    fi
    printf '{"burst": "%s", "gso": "%s"}\n' "$burst" "$gso" >"$out/link_$s.json"
  fi
  # op, size and the shape's other arguments (GemmAllToAll: K, N, experts per rank; the rest
  # fused_perf's defaults)
  for spec in "gemv_allreduce 262144" "gemv_allreduce 16384" "embedding_alltoall 4096" \
    "embedding_alltoall 1024" "gemm_reduce_scatter 2048" "gemm_reduce_scatter 512" \
    "gemm_alltoall 2048 --ratio 128 --dim 256 --tables 4" \
    "gemm_alltoall 512 --ratio 128 --dim 256 --tables 4"; do
    set -- $spec
    op=$1 size=$2
    shift 2
    case " ${OPS:-$op} " in *" $op "*) ;; *) continue ;; esac
    # The row's profile (each), or the setting's, made before the setting's first row. The ops cut
    # their tiles for it (GemvAllReduce's one-shot blocks across nodes), as the simulator plans
    # them from it.
    if [ "$calibrate" = each ] || [ -z "${TILECOMM_PROFILE:-}" ]; then
      profile="$out/profile_$s.json"
      if [ "$calibrate" = each ]; then profile="$out/profile_${op}_${size}_$s.json"; fi
      unset TILECOMM_PROFILE
      run "$s" "$build/tools/tilecomm_calibrate" -q -o "$profile"
      export TILECOMM_PROFILE="$profile"
    fi
    run "$s" "$build/bench/fused/fused_perf" --op "$op" -b "$size" "$@" -n "$iters" -w 3 -c 0 \
      --lead-in-ms "$lead_in_ms" --min-timed-ms "$min_timed_ms" --json "$out/${op}_${size}_$s.json"
  done
done
