#!/usr/bin/env bash
# The C and C++ sources as the checked-in .clang-format lays them out (Debian's clang-format,
# which install-deps.sh installs): lists the files that differ and exits 1; the Python files
# through pyflakes. Fix the layout with
#   git ls-files '*.c' '*.cc' '*.cpp' '*.h' '*.hpp' | xargs clang-format -i
# Then the analyzers' layers (scripts/check_layers.py): each folder includes only the folders its
# library links in analyzers/CMakeLists.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v clang-format >/dev/null; then
  echo "lint: clang-format is not installed (scripts/install-deps.sh installs it)" >&2
  exit 1
fi
differ=()
while IFS= read -r -d '' file; do
  clang-format --dry-run --Werror "$file" >/dev/null 2>&1 || differ+=("$file")
done < <(git ls-files -z '*.c' '*.cc' '*.cpp' '*.h' '*.hpp')
if (( ${#differ[@]} > 0 )); then
  echo "lint: ${#differ[@]} file(s) differ from .clang-format's layout:" >&2
  printf '  %s\n' "${differ[@]}" >&2
  echo "lint: clang-format -i FILE... lays them out" >&2
  exit 1
fi
echo "lint: every C and C++ file as .clang-format lays it out"
# The Python files (tests, benchmarks, the hook's package): an unused import or variable, a name
# never defined. Debian's interpreter, which has the module (install-deps.sh).
if ! /usr/bin/python3 -m pyflakes --version >/dev/null 2>&1; then
  echo "lint: pyflakes is not installed (scripts/install-deps.sh installs python3-pyflakes)" >&2
  exit 1
fi
git ls-files -z '*.py' | xargs -0 /usr/bin/python3 -m pyflakes
echo "lint: every Python file passes pyflakes"
python3 scripts/check_layers.py
