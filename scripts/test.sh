#!/usr/bin/env bash
# Builds everything and runs every test: GoogleTest units, end-to-end tests under the preload,
# and the benchmarks in quick mode (they check that the benchmarks work, not timings); first the
# sources' layout (scripts/lint.sh: clang-format).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/lint.sh
# The shipped binaries link against glibc 2.31 with libstdc++ built in, so that what the tests
# run is what a wheel carries (scripts/portable-kit.sh: fetched once from Debian's archive).
kit=$(./scripts/portable-kit.sh)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DSONDE_PORTABLE_KIT=$kit" >/dev/null
cmake --build build -j2
ctest --test-dir build --output-on-failure -j2
