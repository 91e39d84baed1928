#!/usr/bin/env bash
# Builds the libFuzzer targets with clang into ${TILECOMM_FUZZ_BUILD_DIR:-build-fuzz} and runs each
# for TILECOMM_FUZZ_SECONDS (default 20; libFuzzer seed TILECOMM_FUZZ_SEED, default 0 = random)
# through ctest -L fuzz. Needs clang and libclang-rt-14-dev (scripts/install-deps.sh installs them).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${TILECOMM_FUZZ_BUILD_DIR:-$root/build-fuzz}"
CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTILECOMM_FUZZ=ON \
  -DTILECOMM_BUILD_BENCH=OFF -DTILECOMM_BUILD_EXAMPLES=OFF -DTILECOMM_BUILD_PYTHON=OFF \
  -DTILECOMM_FUZZ_SECONDS="${TILECOMM_FUZZ_SECONDS:-20}" -DTILECOMM_FUZZ_SEED="${TILECOMM_FUZZ_SEED:-0}" >/dev/null
cmake --build "$build" -j "${TILECOMM_BUILD_JOBS:-2}" --target fuzz_env fuzz_collective_args fuzz_embedding_bags fuzz_gemm_routing fuzz_gemv_args
cd "$build"
ctest -L fuzz --output-on-failure -j 1
