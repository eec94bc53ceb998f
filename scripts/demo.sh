#!/usr/bin/env bash
# The main job: build everything, profile the reference workload, print what sonde found.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
# The same build as scripts/test.sh's (the shipped binaries linked against glibc 2.31).
kit=$(./scripts/portable-kit.sh)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DSONDE_PORTABLE_KIT=$kit" >/dev/null
cmake --build build -j2
# % of peak needs this machine's peaks: measured once (about 30 s), then found by every run. On a
# busy machine calibrate refuses figures it cannot believe (it says why); the job goes on
# without % of peak rather than stop.
build/bin/sonde calibrate --show >/dev/null 2>&1 || build/bin/sonde calibrate --quick ||
  echo "(no peaks: % of peak left out; run build/bin/sonde calibrate on a quiet machine)"
build/bin/sonde run --force -o build/mlp_train.db -- build/examples/mlp_train --steps 300
echo
build/bin/sonde report build/mlp_train.db --top 15
echo
build/bin/sonde tree build/mlp_train.db
echo
build/bin/sonde shapes build/mlp_train.db
echo
build/bin/sonde metrics build/mlp_train.db --section breakdown
echo
build/bin/sonde candidates build/mlp_train.db
