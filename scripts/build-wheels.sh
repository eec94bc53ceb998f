#!/usr/bin/env bash
# Builds a sonde wheel for every CPython 3.10-3.13 on this machine into dist/:
#   scripts/build-wheels.sh                 # Debian's python3, then pyenv's 3.10-3.13
#   scripts/build-wheels.sh PYTHON...       # those interpreters only
# One portable CMake build (build-wheel/, SONDE_PORTABLE: SQLite and fmt built in) serves them
# all; each wheel holds its interpreter's extension, libsonde.so, the sonde tool, the viewer and
# the man page, with every other library bundled (packaging/wheel). Install one with
#   pip install dist/sonde-*-cp312-*.whl
set -euo pipefail
cd "$(dirname "$0")/.."
SONDE_DEPS_MINIMAL=1 ./scripts/install-deps.sh

# One interpreter per minor version, with its headers: Debian's first, then pyenv's.
pythons=()
declare -A minors=()
add_python() {
  local py=$1 minor
  minor=$("$py" -c 'import os, sys, sysconfig
ok = sys.implementation.name == "cpython" and (3, 10) <= sys.version_info[:2] <= (3, 13)
ok = ok and os.path.exists(os.path.join(sysconfig.get_path("include"), "Python.h"))
print("%d.%d" % sys.version_info[:2] if ok else "")' 2>/dev/null) || return 0
  if [[ -z "$minor" ]]; then
    echo "build-wheels: skipping $py (not CPython 3.10-3.13 with its headers)" >&2
    return 0
  fi
  [[ -n "${minors[$minor]:-}" ]] && return 0
  minors[$minor]=$py
  pythons+=("$py")
}
if (( $# > 0 )); then
  for py in "$@"; do add_python "$py"; done
else
  [[ -x /usr/bin/python3 ]] && add_python /usr/bin/python3
  for py in "$HOME"/.pyenv/versions/3.1[0-3].*/bin/python3.1[0-3]; do
    [[ -x "$py" ]] && add_python "$py"
  done
fi
if (( ${#pythons[@]} == 0 )); then
  echo "build-wheels: no CPython 3.10-3.13 with its headers found" >&2
  exit 1
fi
echo "build-wheels: building for ${pythons[*]}"

build=${SONDE_WHEEL_BUILD_DIR:-$PWD/build-wheel}
list=$(IFS=';'; echo "${pythons[*]}")
# glibc 2.31's libraries to link against and cpp-httplib's header: the wheels run on glibc 2.28
# and later, with no libstdc++ of the machine's (docs/install.md).
kit=$(./scripts/portable-kit.sh)
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSONDE_PORTABLE=ON \
      "-DSONDE_PORTABLE_KIT=$kit" -DSONDE_BUILD_TESTS=OFF "-DSONDE_EXTRA_PYTHONS=$list" >/dev/null
cmake --build "$build" -j"$(nproc)" --target sonde_preload sonde_cli sonde_view_server_cli

mkdir -p dist
failed=()
for py in "${pythons[@]}"; do
  SONDE_WHEEL_BUILD_DIR=$build "$py" -c '
import sys
sys.path.insert(0, "packaging/wheel")
import sonde_wheel
print("dist/" + sonde_wheel.build_wheel("dist"))' || failed+=("$py")
done
if (( ${#failed[@]} > 0 )); then
  echo "build-wheels: no wheel for ${failed[*]} (see above)" >&2
  exit 1
fi
