#!/usr/bin/env bash
# Regenerates docs/CONFIG.md from the config schema in lib/core/config/ (the test in tests/core checks it).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
cmake --build "$BUILD_DIR" --target parla_tests_core >/dev/null
PARLA_UPDATE_DOCS=1 "$BUILD_DIR/tests/parla_tests_core" "config: docs/CONFIG.md is the reference generated from the schema" >/dev/null
echo "wrote docs/CONFIG.md" >&2
