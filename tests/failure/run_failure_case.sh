#!/usr/bin/env bash
# Runs one failure scenario (failure_case under mpiexec) and judges its output, so that neither a
# hang nor mpiexec's own exit handling decides the test.
#
#   run_failure_case.sh <never|dead> <survivors> <timeout_s> <pattern> -- <mpiexec ...>
#
# never: every surviving rank must print code=Timeout within timeout_s + 2 s, with a message
#        matching the extended regex <pattern> (it names the rank waited for).
# dead:  the absent rank died; mpiexec may kill the job first. Each RESULT line printed must be
#        code=Timeout within timeout_s + 2 s (never OK, never another error), and the whole run
#        must end within timeout_s + 20 s.
# In both cases the run is killed after timeout_s + 30 s and that counts as a failure (a hang).
set -uo pipefail
calc() { awk "BEGIN { print $* }"; }
le() { awk "BEGIN { exit !($1 <= $2) }"; }
kind=$1 survivors=$2 limit=$3 pattern=$4
shift 4
[ "$1" = "--" ] && shift
start=$(date +%s.%N)
out=$(timeout -k 5 $((${limit%.*} + 30)) "$@" 2>&1)
rc=$?
wall=$(calc "$(date +%s.%N) - $start")
echo "$out"
echo "run_failure_case: mpiexec exit code $rc, wall ${wall} s"
fail() { echo "run_failure_case: FAIL: $*"; exit 1; }
[ $rc -eq 124 ] || [ $rc -eq 137 ] && fail "the run hung and was killed by timeout"
results=$(echo "$out" | grep '^RESULT ' || true)
bound=$(calc "$limit + 2")
while read -r line; do
  [ -z "$line" ] && continue
  code=$(echo "$line" | sed -n 's/.* code=\([^ ]*\).*/\1/p')
  elapsed=$(echo "$line" | sed -n 's/.* elapsed=\([^ ]*\).*/\1/p')
  [ "$code" = "Timeout" ] || fail "expected code=Timeout: $line"
  le "$elapsed" "$bound" || fail "took ${elapsed} s > ${bound} s: $line"
  if [ "$kind" = never ]; then
    echo "$line" | grep -Eq -- "$pattern" || fail "message does not match /$pattern/: $line"
  fi
done <<< "$results"
# After the failed call, the same call, a new operator and a collective (AFTER lines) must each be
# refused at once, naming the failure.
while read -r line; do
  [ -z "$line" ] && continue
  echo "$line" | grep -q ' code=InvalidUsage ' || fail "a call after the failure was not refused: $line"
  echo "$line" | grep -Eq 'an earlier call failed|failed earlier' || fail "the refusal does not say why: $line"
  elapsed=$(echo "$line" | sed -n 's/.* elapsed=\([^ ]*\).*/\1/p')
  le "$elapsed" 1 || fail "the refusal took ${elapsed} s: $line"
done <<< "$(echo "$out" | grep '^AFTER ' || true)"
n=$(echo -n "$results" | grep -c '^RESULT ' || true)
if [ "$kind" = never ]; then
  [ "$n" -eq "$survivors" ] || fail "$n of $survivors surviving ranks reported"
else
  le "$wall" "$(calc "$limit + 20")" || fail "the job took ${wall} s to end"
fi
echo "run_failure_case: PASS ($n Timeout reports)"
