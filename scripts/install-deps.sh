#!/usr/bin/env bash
# Installs what sonde needs from Debian's packages. Skips apt-get when everything is present, so
# it costs nothing on a prepared machine. Needs root (or sudo) when something is missing.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config clang-format
  # scripts/lint.sh: the Python files checked for unused names and other slips.
  python3-pyflakes
  libsqlite3-dev sqlite3 libfmt-dev libcli11-dev nlohmann-json3-dev libcpp-httplib-dev
  # zlib: `export --format pprof` writes gzip (built in with SONDE_PORTABLE, from libz.a).
  zlib1g-dev
  libunwind-dev libpapi-dev libgtest-dev libopenblas-dev libdnnl-dev
  python3-dev python3-numpy python3-pytest libpython3.11-testsuite
  help2man
  # Wheels (scripts/build-wheels.sh, tests/e2e/test_wheels.py): RUNPATHs of bundled libraries.
  patchelf
  # MPI: the wrappers' headers, mpirun for the rank tests, mpi4py for the numpy example.
  libopenmpi-dev openmpi-bin python3-mpi4py
)
# The Python issue's tests need these; they are big, so callers may skip them.
if [[ "${SONDE_DEPS_MINIMAL:-0}" != 1 ]]; then
  packages+=(python3-torch python3-yappi)
  # `--lines` hits held against line_profiler's (tests/e2e/test_lines_vs_line_profiler.py).
  packages+=(python3-line-profiler)
  # `export --format callgrind` read by valgrind's callgrind_annotate (test_export_formats.py).
  packages+=(valgrind)
  # `export --format svg` read by libxml2's xmllint, whose depth limit a nested layout broke.
  packages+=(libxml2-utils)
  # `export --format pprof` decoded against profile.proto by protobuf's own Python parser.
  packages+=(python3-protobuf)
  # The .deb from `cpack -G DEB` checked against Debian's policy (tests/e2e/test_deb.py).
  packages+=(lintian)
  # Greenlets: the e2e tests' gevent jobs, and greenlet's own tests as peers (objgraph for
  # their leak checks).
  packages+=(python3-greenlet python3-gevent python3-objgraph)
  # An older Debian (glibc 2.31) made in a folder, where tests/e2e/test_old_glibc.py runs the
  # shipped binaries.
  packages+=(debootstrap)
  # CPython's own signal tests, run under sonde by tests/faults/test_signals.py.
  packages+=(libpython3.11-testsuite)
  # An ILP64 OpenBLAS (blasint int64_t): the real library behind the names of pip's numpy and
  # scipy wheels in tests/e2e/test_wheel_blas.py.
  packages+=(libopenblas64-0-pthread)
fi

# The viewer: Node/npm build its pages (esbuild, from viewer/package-lock.json), chromium runs its
# browser tests. A Node that is already installed (with its own npm) is kept.
packages+=(chromium)
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then packages+=(nodejs npm); fi

# The viewer's npm packages, pinned by its lock file; once installed, builds work offline (the
# build runs `npm ci` itself when they are missing).
# The npm packages of the viewer and of the speedscope check, each pinned by its lock file;
# installed once, after which builds and tests work offline.
npm_deps() {
  local root dir
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  command -v npm >/dev/null || return 0
  for dir in "$root/viewer" "$root/tests/e2e/speedscope"; do
    if [[ -f "$dir/package-lock.json" && ! -d "$dir/node_modules" ]]; then
      npm ci --prefix "$dir" --no-audit --no-fund --loglevel=error
    fi
  done
}

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# speedscope's built app, which the export tests open in headless Chromium; pinned by
# tests/e2e/speedscope/package-lock.json, installed once (npm from the registry), skipped without npm.
if (( ${#missing[@]} == 0 )); then
  echo "install-deps: all ${#packages[@]} packages present"
  npm_deps
  exit 0
fi

sudo=""
if [[ $(id -u) != 0 ]]; then sudo="sudo"; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
$sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
npm_deps
