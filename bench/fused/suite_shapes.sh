# Sourced by run_suite.sh, run_auto_check.sh and ab_compare.sh: the balanced-shape table's fixed
# knobs per operator (the size first, then the rest; the ratio knob is searched by --balance and
# read back from run_suite.sh's JSON with ratio_of).
# shellcheck shell=bash disable=SC2034  # `shape` is used by the scripts that source this file
declare -A shape=(
  [gemv_allreduce]="-b 262144"
  [embedding_alltoall]="-b 4096 --dim 64 --tables 4"
  [gemm_alltoall]="-b 2048 --dim 256 --tables 4"
)
# The ratio knob of the last row of a fused_perf --json file.
ratio_of() { /usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[-1]["ratio"])' "$1"; }
