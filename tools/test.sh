#!/usr/bin/env bash
# The README's test command: install dependencies, configure, build and run every test.
#   bash tools/test.sh            (BUILD_DIR=build by default; JOBS=$(nproc))
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build "$BUILD_DIR" -j "$JOBS"
cd "$BUILD_DIR"
# Tests that start parla executables get one thread each and run two at a time (2-core machines).
ctest --output-on-failure -j "$JOBS" --timeout 900
