#!/usr/bin/env bash
# apt-get on a private state: Debian's archive as STATE/sources.list names it, without touching
# the machine's own apt configuration or package database (so no root is needed for `update`,
# `download` and `source --download-only`). Files land in the current folder, as apt-get's do.
#   scripts/private-apt.sh STATE update
#   scripts/private-apt.sh STATE download libc6
#   scripts/private-apt.sh STATE source --download-only python3.13
# STATE/sources.list is the caller's; the rest of STATE is made here. Used by portable-kit.sh and
# the old-glibc CPython test (tests/e2e/test_old_glibc_python.py).
set -euo pipefail
state=${1:?usage: private-apt.sh STATE APT-GET-ARGS...}
shift
state=$(cd "$state" && pwd)
[[ -f "$state/sources.list" ]] || { echo "private-apt: $state/sources.list is missing" >&2; exit 2; }
mkdir -p "$state/lists/partial" "$state/cache/archives/partial"
touch "$state/status"
exec apt-get -q -o "Dir::Etc::SourceList=$state/sources.list" -o Dir::Etc::SourceParts=/dev/null \
  -o "Dir::State=$state" -o "Dir::State::Lists=$state/lists" \
  -o "Dir::State::status=$state/status" -o "Dir::Cache=$state/cache" \
  -o "APT::Sandbox::User=$(id -un)" -o Debug::NoLocking=1 "$@"
