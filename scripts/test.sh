#!/usr/bin/env bash
# Fresh machine to green suite: installs dependencies, builds, runs every test through ctest.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/install-deps.sh"
# Formatting is part of the suite: a file that differs from .clang-format fails the run, early.
"$root/scripts/format.sh" --check
"$root/scripts/build.sh" "$@"
build="${TILECOMM_BUILD_DIR:-$root/build}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cd "$build"
ctest --output-on-failure --timeout 600 -j "${TILECOMM_TEST_JOBS:-2}"
# The libFuzzer targets (clang, ASan+UBSan, own build tree): 10 s each from the seed corpus with a
# fixed seed, so a CI run is repeatable (~2.5 min). TILECOMM_TEST_FUZZ=0 skips them.
if [ "${TILECOMM_TEST_FUZZ:-1}" != 0 ]; then
  TILECOMM_FUZZ_SECONDS="${TILECOMM_FUZZ_SECONDS:-10}" TILECOMM_FUZZ_SEED="${TILECOMM_FUZZ_SEED:-1}" \
    "$root/scripts/fuzz.sh"
fi
