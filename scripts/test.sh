#!/usr/bin/env bash
# Builds everything and runs every test: GoogleTest units, end-to-end tests under the preload,
# and the benchmarks in quick mode (they check that the benchmarks work, not timings); first the
# sources' layout (scripts/lint.sh: clang-format).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/lint.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j2
ctest --test-dir build --output-on-failure -j2
