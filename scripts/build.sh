#!/usr/bin/env bash
# Configures and builds tilecomm into ${TILECOMM_BUILD_DIR:-build} (RelWithDebInfo: -O3 -g, see
# TILECOMM_O3 in CMakeLists.txt).
# Extra arguments go to the CMake configure step.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${TILECOMM_BUILD_DIR:-$root/build}"
generator=()
command -v ninja >/dev/null && [ ! -f "$build/CMakeCache.txt" ] && generator=(-G Ninja)
cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
cmake --build "$build" -j "$(nproc)"
