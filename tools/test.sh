#!/usr/bin/env bash
# The README's test command: install dependencies, configure, build and run every test.
#   bash tools/test.sh                Debian's LibTorch 1.13 (CPU), in build/
#   bash tools/test.sh --libtorch2    LibTorch 2.x from the PyTorch wheel (tools/setup-libtorch2.sh), in build-torch2/
# BUILD_DIR overrides the build folder, JOBS the parallel jobs ($(nproc) by default), PARLA_UNITY=OFF turns the
# unity build off (for incremental work on a few files; it is on here because it halves a fresh build: every
# translation unit that includes LibTorch spends ~5 s loading its 570 MB precompiled header, and unity batches of
# 8 files load it once per batch).
set -euo pipefail
cd "$(dirname "$0")/.."
torch2=0
for arg in "$@"; do
  case "$arg" in
    --libtorch2) torch2=1 ;;
    *) echo "usage: bash tools/test.sh [--libtorch2]" >&2; exit 2 ;;
  esac
done
bash tools/setup.sh
cmake_args=()
if [ "$torch2" = 1 ]; then
  prefix=$(bash tools/setup-libtorch2.sh)
  cmake_args+=("-DCMAKE_PREFIX_PATH=$prefix")
  BUILD_DIR=${BUILD_DIR:-build-torch2}
fi
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_UNITY_BUILD="${PARLA_UNITY:-ON}" \
  "${cmake_args[@]}"
# Only what the tests need (the apps, the test binaries, the fuzz target): the benchmarks are built by
# `cmake --build "$BUILD_DIR"` (docs/BENCHMARKS.md) and by .ci/run after the tests.
cmake --build "$BUILD_DIR" -j "$JOBS" --target parla_test_targets
cd "$BUILD_DIR"
# Tests that start parla executables get one thread each and run two at a time (2-core machines).
ctest --output-on-failure -j "$JOBS" --timeout 900
