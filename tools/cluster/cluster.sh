#!/usr/bin/env bash
# tools/cluster/cluster.sh -- emulate N nodes on this machine with network namespaces and run an
# mpirun job across them. See tools/cluster/README.md for the picture, options and limitations.
#
#   cluster.sh [--nodes N] [--ranks-per-node R] [--rate RATE] [--subnet A.B.C.0/24] ... -- PROG [ARGS...]
#   cluster.sh --cleanup [--force]
#
# Exit codes: the command's exit code (as reported by mpirun); 2 usage error; 77 missing privileges
# or tools (ctest SKIP_RETURN_CODE); 130/143 interrupted by SIGINT/SIGTERM; 1 other setup failure.

# teardown/on_signal are only reached through traps:
# shellcheck disable=SC2317
set -euo pipefail

readonly PROG_NAME=cluster.sh
readonly NS_RE='^tcl([0-9]+)(sw|n[0-9]+)$'   # every namespace we ever create matches this
readonly TMP_GLOB_PREFIX=tilecomm-cluster.

usage_error() { echo "$PROG_NAME: $*" >&2; echo "Try '$PROG_NAME --help'." >&2; exit 2; }
skip() { echo "$PROG_NAME: SKIP: $*" >&2; exit 77; }
log() { if [[ $QUIET -eq 0 ]]; then echo "[cluster] $*" >&2; fi; }

usage() {
  cat <<'EOF'
Usage: cluster.sh [options] -- PROGRAM [ARGS...]
       cluster.sh --cleanup [--force]

Emulates N nodes on this machine (one network namespace each, wired to a Linux bridge in a private
"switch" namespace through tbf-shaped veth links) and runs PROGRAM under mpirun with N*R ranks.

Options:
  --nodes N              number of emulated nodes (default 2, max 250)
  --ranks-per-node R     MPI ranks per node (default 1)
  --rate RATE            tc rate of every link, each direction, e.g. 1gbit, 5gbit, 500mbit, 100mbps;
                         'none' leaves the links unshaped (default 1gbit)
  --burst BYTES          tbf burst in bytes (default: 2 ms worth of RATE, at least 64 KiB)
  --gso BYTES            largest packet the veths build (their gso_max_size; default: the
                         kernel's, 64 KiB). tbf needs a burst of at least one packet, so a small
                         --burst (a link without a bucket, as a NIC) needs a small --gso
  --subnet A.B.C.0/24    private /24 for the node addresses (default 10.213.<pid%250>.0/24);
                         node k gets A.B.C.(k+1)
  --stagger SECONDS      delay between remote daemon starts (default 0.4)
  --cpus split|shared    split: node k runs on its own share of this process's CPUs (the allowed
                         CPUs cut into N contiguous groups, as separate machines would have; with
                         more nodes than CPUs, node k gets CPU k mod CPUs: nodes take turns on a
                         CPU, each seeing one, so a rank sizes its device for one core); shared:
                         every node may run on every CPU (the emulation before this option; one
                         node's compute then slows the other's). Default: split
  --env NAME             also forward environment variable NAME to the ranks (repeatable)
  --mpirun-arg ARG       extra argument for mpirun, e.g. --mpirun-arg=--map-by --mpirun-arg=node
                         (repeatable)
  --timeout SECONDS      stop the job and tear everything down after SECONDS (exit 124); 0 = never
                         (default 0). Use it below a ctest TIMEOUT: ctest kills with SIGKILL,
                         which leaves the namespaces behind (the next run removes them)
  --dry-run              print the setup commands and the mpirun command line, change nothing
  --keep-going           on exit, wait for Enter before tearing down (to inspect with ip netns/tc)
  --quiet                no header or progress messages
  --cleanup              remove leftovers (namespaces tcl<PID>*, temp dirs) of runs whose PID is gone
  --force                with --cleanup: also remove leftovers of runs that still seem alive
  -h, --help             this text

The ranks see TILECOMM_CLUSTER_NODES, TILECOMM_CLUSTER_RANKS_PER_NODE, TILECOMM_CLUSTER_RATE,
TILECOMM_CLUSTER_RATE_BITS (0 = unshaped), TILECOMM_CLUSTER_SUBNET, TILECOMM_CLUSTER_CPUS (split or
shared) and TILECOMM_CLUSTER_NODE (index).
Exit status: PROGRAM's (via mpirun); 77 = no privileges / ip netns / tc not usable (skip).
EOF
}

# ---------------------------------------------------------------------------------------------
# Options
NODES=2
RPN=1
RATE=1gbit
BURST=
GSO=
SUBNET=
STAGGER=0.4
CPUS_MODE=
TIMEOUT=0
DRY_RUN=0
KEEP_GOING=0
QUIET=0
MODE=run
FORCE=0
EXTRA_ENV=()
MPIRUN_EXTRA=()

need_arg() { [[ $# -ge 2 ]] || usage_error "option $1 needs an argument"; }
while [[ $# -gt 0 ]]; do
  case $1 in
    --nodes) need_arg "$@"; NODES=$2; shift 2 ;;
    --nodes=*) NODES=${1#*=}; shift ;;
    --ranks-per-node) need_arg "$@"; RPN=$2; shift 2 ;;
    --ranks-per-node=*) RPN=${1#*=}; shift ;;
    --rate) need_arg "$@"; RATE=$2; shift 2 ;;
    --rate=*) RATE=${1#*=}; shift ;;
    --burst) need_arg "$@"; BURST=$2; shift 2 ;;
    --burst=*) BURST=${1#*=}; shift ;;
    --gso) need_arg "$@"; GSO=$2; shift 2 ;;
    --gso=*) GSO=${1#*=}; shift ;;
    --subnet) need_arg "$@"; SUBNET=$2; shift 2 ;;
    --subnet=*) SUBNET=${1#*=}; shift ;;
    --stagger) need_arg "$@"; STAGGER=$2; shift 2 ;;
    --stagger=*) STAGGER=${1#*=}; shift ;;
    --cpus) need_arg "$@"; CPUS_MODE=$2; shift 2 ;;
    --cpus=*) CPUS_MODE=${1#*=}; shift ;;
    --env) need_arg "$@"; EXTRA_ENV+=("$2"); shift 2 ;;
    --env=*) EXTRA_ENV+=("${1#*=}"); shift ;;
    --mpirun-arg) need_arg "$@"; MPIRUN_EXTRA+=("$2"); shift 2 ;;
    --mpirun-arg=*) MPIRUN_EXTRA+=("${1#*=}"); shift ;;
    --timeout) need_arg "$@"; TIMEOUT=$2; shift 2 ;;
    --timeout=*) TIMEOUT=${1#*=}; shift ;;
    --dry-run) DRY_RUN=1; shift ;;
    --keep-going) KEEP_GOING=1; shift ;;
    --quiet) QUIET=1; shift ;;
    --cleanup) MODE=cleanup; shift ;;
    --force) FORCE=1; shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; break ;;
    *) usage_error "unknown option '$1' (the command goes after --)" ;;
  esac
done
CMD=("$@")

# ---------------------------------------------------------------------------------------------
# Privilege / tool checks (exit 77 so that ctest reports SKIP)
check_tools() {
  local t
  for t in "$@"; do
    command -v "$t" >/dev/null 2>&1 || skip "'$t' not found in PATH"
  done
}
check_root() {
  [[ $EUID -eq 0 ]] || skip "needs root (CAP_NET_ADMIN + CAP_SYS_ADMIN) to create network namespaces"
}

# ---------------------------------------------------------------------------------------------
# --cleanup: remove namespaces/temp dirs of crashed runs. Our namespaces are tcl<PID>sw/tcl<PID>n<k>;
# nothing else is ever created (the veths and the bridge live inside them and go away with them).
ns_pids() { ip netns pids "$1" 2>/dev/null || true; }
kill_ns_pids() {  # kill every process still inside namespace(s) "$@"; wait until they are gone
  local sig pids ns i
  for sig in TERM KILL; do
    for i in 1 2 3 4 5 6 7 8 9 10; do
      pids=$(for ns in "$@"; do ns_pids "$ns"; done)
      [[ -n $pids ]] || return 0
      # shellcheck disable=SC2086 # word splitting of the pid list is intended
      [[ $i -gt 1 ]] || kill -s "$sig" $pids 2>/dev/null || true
      sleep 0.2
    done
  done
  pids=$(for ns in "$@"; do ns_pids "$ns"; done)
  [[ -z $pids ]] || echo "[cluster] warning: processes $pids survive in namespaces $*" >&2
}

REMOVED=0
remove_leftovers() {  # namespaces/temp dirs of runs whose PID is gone (all of them with --force)
  local ns pid d
  while read -r ns _; do
    [[ $ns =~ $NS_RE ]] || continue
    pid=${BASH_REMATCH[1]}
    if [[ $FORCE -eq 0 ]] && kill -0 "$pid" 2>/dev/null; then
      [[ $MODE != cleanup ]] || echo "[cluster] keeping $ns: its run (pid $pid) is still alive (use --force)"
      continue
    fi
    kill_ns_pids "$ns"
    ip netns del "$ns" && { echo "[cluster] removed leftover namespace $ns" >&2; REMOVED=$((REMOVED + 1)); }
  done < <(ip netns list 2>/dev/null)
  for d in "${TMPDIR:-/tmp}/$TMP_GLOB_PREFIX"*; do
    [[ -d $d ]] || continue
    pid=${d##*/"$TMP_GLOB_PREFIX"}; pid=${pid%%.*}
    if [[ $FORCE -eq 0 ]] && kill -0 "$pid" 2>/dev/null; then continue; fi
    rm -rf -- "$d" && { echo "[cluster] removed leftover $d" >&2; REMOVED=$((REMOVED + 1)); }
  done
}
cleanup_mode() {
  check_tools ip
  check_root
  remove_leftovers
  echo "[cluster] cleanup done: $REMOVED item(s) removed"
}

if [[ $MODE == cleanup ]]; then
  cleanup_mode
  exit 0
fi

# ---------------------------------------------------------------------------------------------
# Validate the run options
[[ ${#CMD[@]} -gt 0 ]] || usage_error "no command given (put it after --)"
[[ $NODES =~ ^[0-9]+$ && $NODES -ge 1 && $NODES -le 250 ]] || usage_error "--nodes must be 1..250"
[[ $RPN =~ ^[0-9]+$ && $RPN -ge 1 ]] || usage_error "--ranks-per-node must be >= 1"
[[ $STAGGER =~ ^[0-9]+(\.[0-9]+)?$ ]] || usage_error "--stagger must be a number of seconds"
[[ $TIMEOUT =~ ^[0-9]+$ ]] || usage_error "--timeout must be a whole number of seconds"
[[ -z $BURST || $BURST =~ ^[0-9]+$ ]] || usage_error "--burst must be a number of bytes"
[[ -z $GSO || ($GSO =~ ^[0-9]+$ && $GSO -ge 1500 && $GSO -le 65536) ]] \
  || usage_error "--gso must be a number of bytes from 1500 to 65536"
[[ -z $CPUS_MODE || $CPUS_MODE == split || $CPUS_MODE == shared ]] ||
  usage_error "--cpus must be 'split' or 'shared', not '$CPUS_MODE'"

# The CPUs this process may run on (e.g. "0-3,8"), expanded to a list.
allowed_cpus() {
  local list part a b c
  list=$(awk '/^Cpus_allowed_list:/ { print $2 }' /proc/self/status)
  for part in ${list//,/ }; do
    a=${part%-*}; b=${part#*-}
    for ((c = a; c <= b; c++)); do echo "$c"; done
  done
}
mapfile -t CPU_LIST < <(allowed_cpus)
# Split, also with more nodes than CPUs: 4 nodes sharing 2 CPUs each saw both CPUs, so every rank
# sized its device for 2 cores and the fused kernels ran 4 x 3 threads on 2 cores (a WG waited
# 10+ ms for a core; fused GEMV+AllReduce took 2.1-2.5x sequential's time, 0.74-0.81x with one
# CU per rank).
[[ -n $CPUS_MODE ]] || CPUS_MODE=split
# node_cpus K: node K's CPUs as a taskset list (split: the K-th of NODES contiguous groups, the
# first groups one CPU larger when they do not divide evenly, or CPU K mod CPUs when there are more
# nodes than CPUs; shared: all of them).
node_cpus() {
  local n=${#CPU_LIST[@]} k=$1 lo hi i out=
  if [[ $CPUS_MODE == split && $n -lt $NODES ]]; then echo "${CPU_LIST[k % n]}"; return; fi
  if [[ $CPUS_MODE == shared ]]; then lo=0; hi=$n; else
    lo=$((k * (n / NODES) + (k < n % NODES ? k : n % NODES)))
    hi=$((lo + n / NODES + (k < n % NODES ? 1 : 0)))
  fi
  for ((i = lo; i < hi; i++)); do out+=${out:+,}${CPU_LIST[i]}; done
  echo "$out"
}

# RATE -> bits per second (tc semantics: *bit = bits/s, *bps = bytes/s; k/m/g/t are powers of 1000).
rate_to_bits() {
  local r=${1,,} num unit mult
  [[ $r =~ ^([0-9]+(\.[0-9]+)?)([kmgt]?)(bit|bps)$ ]] || return 1
  num=${BASH_REMATCH[1]}
  case ${BASH_REMATCH[3]} in
    '') mult=1 ;; k) mult=1000 ;; m) mult=1000000 ;; g) mult=1000000000 ;; t) mult=1000000000000 ;;
  esac
  unit=${BASH_REMATCH[4]}
  [[ $unit == bps ]] && mult=$((mult * 8))
  awk -v n="$num" -v m="$mult" 'BEGIN { printf "%.0f\n", n * m }'
}
if [[ ${RATE,,} == none || $RATE == 0 ]]; then
  RATE=none
  RATE_BITS=0
else
  RATE_BITS=$(rate_to_bits "$RATE") || usage_error "bad --rate '$RATE' (e.g. 1gbit, 500mbit, 100mbps, none)"
  [[ $RATE_BITS -ge 8000 ]] || usage_error "--rate too small"
  if [[ -z $BURST ]]; then   # 2 ms worth of traffic: small enough to keep the rate honest for MiB
    BURST=$((RATE_BITS / 8 / 500))   # transfers, large enough for tbf with 64 KiB GSO packets
    [[ $BURST -ge 65536 ]] || BURST=65536
  fi
fi

if [[ -z $SUBNET ]]; then
  SUBNET="10.213.$(($$ % 250)).0/24"
fi
[[ $SUBNET =~ ^([0-9]+)\.([0-9]+)\.([0-9]+)(\.0)?(/24)?$ ]] || usage_error "--subnet must be A.B.C.0/24"
for o in "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}" "${BASH_REMATCH[3]}"; do
  [[ $o -le 255 ]] || usage_error "--subnet: bad octet $o"
done
NET3="${BASH_REMATCH[1]}.${BASH_REMATCH[2]}.${BASH_REMATCH[3]}"
SUBNET="$NET3.0/24"
node_ip() { echo "$NET3.$(($1 + 1))"; }

PREFIX="tcl$$"
SW_NS="${PREFIX}sw"
node_ns() { echo "${PREFIX}n$1"; }
NP=$((NODES * RPN))

if [[ $DRY_RUN -eq 0 ]]; then
  check_tools ip tc mpirun unshare hostname
  check_root
fi

# Leftovers of runs that were SIGKILLed (e.g. by a ctest timeout) would pile up: remove those of
# dead PIDs (never those of a live run).
[[ $DRY_RUN -eq 1 ]] || remove_leftovers

if [[ $QUIET -eq 0 ]]; then
  echo "[cluster] nodes=$NODES ranks-per-node=$RPN ranks=$NP rate=$RATE$([[ $RATE == none ]] || echo " (burst ${BURST}B)")$([[ -z $GSO ]] || echo " gso=${GSO}B") subnet=$SUBNET prefix=$PREFIX"
fi

# ---------------------------------------------------------------------------------------------
# Teardown: always runs (EXIT), also on INT/TERM. Kills whatever still lives in our namespaces,
# deletes them (which deletes the veths and the bridge inside them) and removes the temp dir.
CREATED_NS=()
TMP=
MPIRUN_PID=
TORN_DOWN=0
teardown() {
  [[ $TORN_DOWN -eq 0 ]] || return 0
  TORN_DOWN=1
  set +e
  if [[ $KEEP_GOING -eq 1 && ${#CREATED_NS[@]} -gt 0 && -t 0 ]]; then
    echo "[cluster] --keep-going: namespaces ${CREATED_NS[*]} are still up; press Enter to tear down" >&2
    read -r _ || true
  fi
  if [[ -n $MPIRUN_PID ]] && kill -0 "$MPIRUN_PID" 2>/dev/null; then
    # Interrupted: let mpirun stop its job for up to 2 s, then kill whatever is left below.
    kill -TERM "$MPIRUN_PID" 2>/dev/null
    for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$MPIRUN_PID" 2>/dev/null || break; sleep 0.2; done
  fi
  # Everything running inside our namespaces is ours (mpirun, orted, ranks): stop it all, and wait
  # for it, before the namespaces go (a process would otherwise keep its namespace alive, unnamed).
  [[ ${#CREATED_NS[@]} -eq 0 ]] || kill_ns_pids "${CREATED_NS[@]}"
  [[ -z $MPIRUN_PID ]] || wait "$MPIRUN_PID" 2>/dev/null
  local ns
  for ns in "${CREATED_NS[@]}"; do
    ip netns del "$ns" 2>/dev/null || echo "[cluster] warning: could not delete namespace $ns" >&2
  done
  [[ -z $TMP ]] || rm -rf -- "$TMP"
  [[ ${#CREATED_NS[@]} -eq 0 ]] || log "removed namespaces ${CREATED_NS[*]}"
}
on_signal() {
  local sig=$1 code=$2
  trap - INT TERM HUP
  echo "[cluster] caught SIG$sig, tearing down" >&2
  teardown
  exit "$code"
}
trap teardown EXIT
trap 'on_signal INT 130' INT
trap 'on_signal TERM 143' TERM
trap 'on_signal HUP 129' HUP

# ---------------------------------------------------------------------------------------------
# Setup
run() {  # run a setup command (or print it with --dry-run)
  if [[ $DRY_RUN -eq 1 ]]; then echo "+ $*"; else "$@"; fi
}
add_ns() {
  if [[ $DRY_RUN -eq 1 ]]; then echo "+ ip netns add $1"; return 0; fi
  ip netns add "$1" 2>"$TMP/err" || skip "'ip netns add' not permitted: $(head -n1 "$TMP/err")"
  CREATED_NS+=("$1")
}
shape() {  # shape egress of device $2 in namespace $1
  [[ $RATE != none ]] || return 0
  if [[ $DRY_RUN -eq 1 ]]; then
    echo "+ tc -n $1 qdisc add dev $2 root tbf rate $RATE burst $BURST latency 50ms"; return 0
  fi
  tc -n "$1" qdisc add dev "$2" root tbf rate "$RATE" burst "$BURST" latency 50ms 2>"$TMP/err" \
    || skip "'tc qdisc add ... tbf' not permitted/available: $(head -n1 "$TMP/err")"
}

TMP=$(mktemp -d "${TMPDIR:-/tmp}/$TMP_GLOB_PREFIX$$.XXXXXX")

# The switch: a namespace holding only the bridge, so nothing touches the host's interfaces.
add_ns "$SW_NS"
run ip -n "$SW_NS" link set lo up
run ip -n "$SW_NS" link add br0 type bridge
run ip -n "$SW_NS" link set br0 up
for ((k = 0; k < NODES; k++)); do
  ns=$(node_ns "$k")
  add_ns "$ns"
  run ip -n "$ns" link set lo up
  # The veth pair is created inside the switch namespace with its peer placed straight into the
  # node namespace: it never exists in the root namespace, so names cannot clash with the host's.
  run ip -n "$SW_NS" link add "v$k" type veth peer name eth0 netns "$ns"
  run ip -n "$SW_NS" link set "v$k" master br0
  run ip -n "$SW_NS" link set "v$k" up
  run ip -n "$ns" addr add "$(node_ip "$k")/24" dev eth0
  if [[ -n $GSO ]]; then
    run ip -n "$SW_NS" link set dev "v$k" gso_max_size "$GSO"
    run ip -n "$ns" link set dev eth0 gso_max_size "$GSO"
  fi
  run ip -n "$ns" link set eth0 up
  shape "$SW_NS" "v$k"   # switch -> node
  shape "$ns" eth0        # node -> switch
done

# Hostfile: IP addresses (all namespaces share one host name, so names cannot tell nodes apart).
HOSTFILE=$TMP/hostfile
AGENT=$TMP/rsh-agent.sh
: >"$HOSTFILE"
for ((k = 0; k < NODES; k++)); do echo "$(node_ip "$k") slots=$RPN" >>"$HOSTFILE"; done

# The rsh agent: mpirun calls "AGENT HOST ORTED-COMMAND..."; we map HOST to its namespace, wait a
# per-node stagger (simultaneous daemon starts have crashed in hwloc topology sharing), give each
# node its own TMPDIR (session directory) and start the daemon inside the namespace.
{
  # shellcheck disable=SC2016 # the agent's own variables, expanded when it runs
  printf '#!/bin/sh\n# generated by tools/cluster/cluster.sh\nhost=$1; shift\ncase $host in\n'
  for ((k = 0; k < NODES; k++)); do
    echo "  $(node_ip "$k")) ns=$(node_ns "$k"); idx=$k; cpus=$(node_cpus "$k") ;;"
  done
  cat <<EOF
  *) echo "rsh-agent: unknown host \$host" >&2; exit 255 ;;
esac
sleep \$(awk -v i="\$idx" 'BEGIN { print i * $STAGGER }')
TMPDIR=$TMP/node\$idx; export TMPDIR; mkdir -p "\$TMPDIR"
TILECOMM_CLUSTER_NODE=\$idx; export TILECOMM_CLUSTER_NODE
exec taskset -c "\$cpus" ip netns exec "\$ns" unshare --uts sh -c 'hostname "\$0" && exec sh -c "\$1"' "node\$idx" "\$*"
EOF
} >"$AGENT"
chmod 755 "$AGENT"
for ((k = 0; k < NODES; k++)); do mkdir -p "$TMP/node$k"; done

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export TILECOMM_CLUSTER_NODES=$NODES TILECOMM_CLUSTER_RANKS_PER_NODE=$RPN TILECOMM_CLUSTER_RATE=$RATE
export TILECOMM_CLUSTER_RATE_BITS=$RATE_BITS TILECOMM_CLUSTER_SUBNET=$SUBNET
export TILECOMM_CLUSTER_CPUS=$CPUS_MODE

# Forward the relevant environment (only variables that are set: -x of an unset one is an error).
XARGS=()
add_x() { if [[ -n ${!1+x} ]]; then XARGS+=(-x "$1"); fi; }
for v in OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM OPENBLAS_NUM_THREADS OMP_NUM_THREADS \
         PATH LD_LIBRARY_PATH "${EXTRA_ENV[@]}"; do
  add_x "$v"
done
while read -r v; do add_x "$v"; done < <(compgen -e | grep '^TILECOMM_' || true)

# shellcheck disable=SC2054 # "tcp,self" is one argument
MPIRUN=(mpirun -np "$NP" --hostfile "$HOSTFILE"
  --mca plm_rsh_agent "$AGENT" --mca plm_rsh_no_tree_spawn 1
  --mca btl tcp,self --mca btl_tcp_if_include "$SUBNET" --mca oob_tcp_if_include "$SUBNET"
  --bind-to none --oversubscribe --mca mpi_yield_when_idle 1
  "${XARGS[@]}" "${MPIRUN_EXTRA[@]}" "${CMD[@]}")

if [[ $DRY_RUN -eq 1 ]]; then
  echo "+ taskset -c $(node_cpus 0) ip netns exec $(node_ns 0) unshare --uts ... hostname node0 ... env TMPDIR=$TMP/node0 TILECOMM_CLUSTER_NODE=0 ${MPIRUN[*]}"
  echo "[cluster] agent script:"; sed 's/^/    /' "$AGENT"
  exit 0
fi

# mpirun runs in node 0's namespace (so it uses only the emulated network) in the background, so
# that our INT/TERM traps run at once instead of after mpirun returns. stdin is passed explicitly
# (background jobs of a non-interactive shell would get /dev/null).
log "launching: ${MPIRUN[*]}"
for ((k = 0; k < NODES; k++)); do log "node $k runs on CPUs $(node_cpus "$k") (--cpus $CPUS_MODE)"; done
LAUNCH=()
[[ $TIMEOUT -eq 0 ]] || LAUNCH=(timeout --kill-after=5 "$TIMEOUT")
# shellcheck disable=SC2016 # $0/$@ belong to the inner sh
"${LAUNCH[@]}" taskset -c "$(node_cpus 0)" ip netns exec "$(node_ns 0)" unshare --uts sh -c 'hostname "$0" && exec "$@"' node0 \
  env TMPDIR="$TMP/node0" TILECOMM_CLUSTER_NODE=0 "${MPIRUN[@]}" <&0 &
MPIRUN_PID=$!
rc=0
wait "$MPIRUN_PID" || rc=$?
MPIRUN_PID=
[[ $TIMEOUT -eq 0 || $rc -ne 124 ]] || echo "[cluster] timed out after ${TIMEOUT}s" >&2
log "command exited with status $rc"
exit "$rc"
