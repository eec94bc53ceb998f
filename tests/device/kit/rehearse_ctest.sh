#!/usr/bin/env bash
# ctest's rehearsal of the device kit, as it runs on a GPU machine: a wheel made from this
# (portable) build for Debian's python3, installed by check.sh into a folder of its own and run
# from a fresh venv, against the stub libraries.
#   rehearse_ctest.sh BUILD_DIR OUT_DIR
set -euo pipefail
repo=$(cd "$(dirname "$0")/../../.." && pwd)
build=$1 out=$2
rm -rf "$out" && mkdir -p "$out/dist"
/usr/bin/python3 -c '
import sys
sys.path.insert(0, sys.argv[1] + "/packaging/wheel")
import sonde_wheel
sonde_wheel.build_wheel(sys.argv[2], {"build-dir": sys.argv[3], "skip-build": "1"})' \
  "$repo" "$out/dist" "$build"
exec "$repo/tests/device/check.sh" --rehearse --python /usr/bin/python3 --dist "$out/dist" --out "$out"
