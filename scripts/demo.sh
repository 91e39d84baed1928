#!/usr/bin/env bash
# Installs, builds, and runs tilecomm's main demonstration.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"
build="${TILECOMM_BUILD_DIR:-$root/build}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
"$build/examples/00_device_model" "$@"
