#!/usr/bin/env bash
# Fresh machine to green suite: installs dependencies, builds, runs every test through ctest.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh" "$@"
build="${TILECOMM_BUILD_DIR:-$root/build}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cd "$build"
ctest --output-on-failure --timeout 600 -j "${TILECOMM_TEST_JOBS:-2}"
