#!/usr/bin/env python3
"""The analyzers' layers as analyzers/CMakeLists.txt declares them, held against the #includes.

Every folder under analyzers/ shares one include root, so the compiler lets any file include any
header; the libraries' target_link_libraries are the declared layering. This reads them (the one
place they are written), and fails on an #include "F/..." where F is an analyzer folder that the
including folder's targets do not link, directly or through the libraries they link. It fails too
on a folder whose sources no target builds (it would escape the check) and on folders that link
each other round in a cycle (they would not be layers).

    scripts/check_layers.py [--root DIR] [--print]

--print lists each folder and the folders it may include from. Exit status 1 on a violation.
"""

import argparse
import re
import sys
from pathlib import Path

SOURCE_SUFFIXES = {".c", ".cc", ".cpp", ".h", ".hpp", ".inc"}
KEYWORDS = {"PUBLIC", "PRIVATE", "INTERFACE", "STATIC", "SHARED", "OBJECT", "MODULE",
            "EXCLUDE_FROM_ALL", "WIN32", "MACOSX_BUNDLE", "LINK_PUBLIC", "LINK_PRIVATE"}
COMMAND = re.compile(r"\b(add_library|add_executable|target_link_libraries)\s*\(([^)]*)\)",
                     re.IGNORECASE)
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.MULTILINE)


def strip_comments(text):
    return "\n".join(line.split("#", 1)[0] for line in text.splitlines())


def read_targets(cmake_file):
    """{target: (source folders, linked names)} from add_library, add_executable and
    target_link_libraries in `cmake_file`."""
    sources, links = {}, {}
    for command, args in COMMAND.findall(strip_comments(cmake_file.read_text())):
        words = args.split()
        if not words:
            continue
        name, rest = words[0], [w for w in words[1:] if w not in KEYWORDS]
        if command.lower() == "target_link_libraries":
            links.setdefault(name, set()).update(rest)
        else:
            folders = {Path(w).parts[0] for w in rest
                       if "/" in w and "$" not in w and Path(w).suffix in SOURCE_SUFFIXES}
            sources.setdefault(name, set()).update(folders)
    return {name: (sources[name], links.get(name, set()) & sources.keys()) for name in sources}


def reachable(targets, start):
    seen, todo = set(), list(start)
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(targets[name][1])
    return seen


def allowed_folders(targets, folders):
    """{folder: folders its files may include from}: the folders of every target that one of
    the folder's own targets links, transitively, and the folder itself."""
    allowed = {}
    for folder in folders:
        owners = [name for name, (srcs, _) in targets.items() if folder in srcs]
        if not owners:
            continue
        allowed[folder] = {folder}
        for name in reachable(targets, owners):
            allowed[folder] |= targets[name][0]
    return allowed


def linked_folders(targets, folder):
    """The folders `folder`'s own targets link directly (through any library of no sources, such
    as an INTERFACE one that gathers others)."""
    found, todo, seen = set(), [n for n, (srcs, _) in targets.items() if folder in srcs], set()
    while todo:
        for linked in targets[todo.pop()][1]:
            if linked in seen:
                continue
            seen.add(linked)
            if targets[linked][0]:
                found |= targets[linked][0]
            else:
                todo.append(linked)
    return found - {folder}


def find_cycle(targets, folders):
    """Folders that link each other round in a circle (a list, the first repeated last), or
    None."""
    edges = {f: sorted(linked_folders(targets, f)) for f in folders}
    state = {}

    def visit(path):
        state[path[-1]] = "open"
        for dep in edges[path[-1]]:
            if state.get(dep) == "open":
                return path[path.index(dep):] + [dep]
            if dep not in state:
                cycle = visit(path + [dep])
                if cycle:
                    return cycle
        state[path[-1]] = "done"
        return None

    for folder in folders:
        if folder not in state:
            cycle = visit([folder])
            if cycle:
                return cycle
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent,
                        help="the source tree (default: this script's)")
    parser.add_argument("--print", action="store_true", help="list what each folder may include")
    args = parser.parse_args()
    analyzers = args.root / "analyzers"
    folders = sorted(p.name for p in analyzers.iterdir()
                     if p.is_dir() and any(f.suffix in SOURCE_SUFFIXES for f in p.rglob("*")))
    targets = read_targets(analyzers / "CMakeLists.txt")
    allowed = allowed_folders(targets, folders)
    errors = [f"analyzers/{f}/: no target in analyzers/CMakeLists.txt builds its sources"
              for f in folders if f not in allowed]
    cycle = find_cycle(targets, sorted(allowed))
    if cycle:
        errors.append("folders link each other in a cycle: " + " -> ".join(cycle))
    if args.print:
        for folder in sorted(allowed, key=lambda f: (len(allowed[f]), f)):
            below = sorted(allowed[folder] - {folder})
            print(f"{folder}: {', '.join(below) if below else '(nothing)'}")
    checked = 0
    for folder in sorted(allowed):
        for path in sorted((analyzers / folder).rglob("*")):
            if path.suffix not in SOURCE_SUFFIXES:
                continue
            checked += 1
            text = path.read_text(errors="replace")
            for match in INCLUDE.finditer(text):
                top = Path(match.group(1)).parts[0]
                if top in folders and top not in allowed[folder]:
                    line = text.count("\n", 0, match.start()) + 1
                    errors.append(f"{path.relative_to(args.root)}:{line}: includes "
                                  f'"{match.group(1)}", but analyzers/{folder}/ does not link '
                                  f"analyzers/{top}/ (analyzers/CMakeLists.txt)")
    if errors:
        print("\n".join(f"check_layers: {e}" for e in errors), file=sys.stderr)
        return 1
    print(f"check_layers: {checked} files in {len(allowed)} folders include only the folders "
          "their libraries link")
    return 0


if __name__ == "__main__":
    sys.exit(main())
