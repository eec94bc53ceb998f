"""The figures docs/performance.md records, in its one machine-readable table, and how a run's
figures are held against them (run_benchmarks.py --compare) or written into it (--record).

The table follows the marker line MARKER and has these columns, one row a figure:

  | figure | recorded | unit | target | spread | date | commit | machine |

`recorded` is the median of the recorded run's rounds, `spread` half the range of its rounds.
Every figure is a ratio or a difference against a baseline measured in the same rounds, and
lower is better for all of them. `target` is `<= X`, `< X` or `-` (none); only people edit it:
--record rewrites the other columns.
"""
import re

MARKER = "<!-- recorded figures: run_benchmarks.py --compare reads this table, --record " \
         "rewrites its rows -->"
COLUMNS = ("figure", "recorded", "unit", "target", "spread", "date", "commit", "machine")
# A change within this share of the recorded value is never flagged, whatever the spreads:
# a figure whose rounds all agree (memory) would otherwise be flagged for its last digit.
MIN_TOLERANCE = 0.02


class TableError(Exception):
    """The recorded table is missing or malformed."""


class Row:
    def __init__(self, cells):
        self.cells = dict(zip(COLUMNS, cells))
        self.id = self.cells["figure"]
        try:
            self.value = float(self.cells["recorded"])
            self.spread = float(self.cells["spread"])
        except ValueError:
            raise TableError(f"row '{self.id}': recorded and spread must be numbers") from None
        self.unit = self.cells["unit"]
        self.target = parse_target(self.cells["target"], self.id)


def parse_target(text, figure):
    """(operator, bound) of a target cell, or None for '-'."""
    text = text.strip()
    if text in ("-", ""):
        return None
    m = re.fullmatch(r"(<=|<)\s*([-+0-9.eE]+)", text)
    if not m:
        raise TableError(f"row '{figure}': target '{text}' is not '<= X', '< X' or '-'")
    return m.group(1), float(m.group(2))


def meets(target, value):
    if target is None:
        return None
    op, bound = target
    return value <= bound if op == "<=" else value < bound


def _split(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _table_lines(lines):
    """(first, end) line indices of the table after the marker: header at first, rows to end."""
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == MARKER) + 1
    except StopIteration:
        raise TableError(f"no line '{MARKER}' in the document") from None
    while start < len(lines) and not lines[start].strip():
        start += 1
    end = start
    while end < len(lines) and lines[end].lstrip().startswith("|"):
        end += 1
    if end - start < 2 or tuple(_split(lines[start])) != COLUMNS:
        raise TableError(f"the table after the marker must have the columns {' | '.join(COLUMNS)}")
    return start, end


def read(text):
    """{figure id: Row} of the document's table, in its order."""
    lines = text.splitlines()
    start, end = _table_lines(lines)
    rows = {}
    for line in lines[start + 2:end]:
        cells = _split(line)
        if len(cells) != len(COLUMNS):
            raise TableError(f"a row has {len(cells)} cells, not {len(COLUMNS)}: {line}")
        row = Row(cells)
        if row.id in rows:
            raise TableError(f"figure '{row.id}' is recorded twice")
        rows[row.id] = row
    return rows


class Measured:
    """A figure of this run: its per-round values (each a ratio or difference in its round)."""

    def __init__(self, values, unit):
        self.values = list(values)
        self.unit = unit
        s = sorted(self.values)
        n = len(s)
        self.value = s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2
        self.spread = (s[-1] - s[0]) / 2


def verdict(row, m):
    """'WORSE', 'better' or 'same' of a measured figure against its recorded row: worse or
    better by more than the larger of the two spreads (and MIN_TOLERANCE of the value)."""
    tol = max(row.spread, m.spread, MIN_TOLERANCE * abs(row.value))
    delta = m.value - row.value
    return "WORSE" if delta > tol else "better" if delta < -tol else "same"


def _fmt(x):
    return f"{x:.4g}"


def record(text, measured, date, commit, machine):
    """The document with the rows of `measured` ({id: Measured}) rewritten (a figure the table
    lacks is appended, with no target); targets and every other row are kept as they are."""
    lines = text.splitlines()
    start, end = _table_lines(lines)
    read(text)  # refuses a malformed table rather than rewriting it
    done = set()
    for i in range(start + 2, end):
        cells = _split(lines[i])
        fid = cells[0]
        if fid in measured:
            lines[i] = _row_line(fid, measured[fid], cells[COLUMNS.index("target")], date,
                                 commit, machine)
            done.add(fid)
    new = [_row_line(fid, m, "-", date, commit, machine) for fid, m in measured.items()
           if fid not in done]
    lines[end:end] = new
    return "\n".join(lines) + ("\n" if text.endswith("\n") else "")


def _row_line(fid, m, target, date, commit, machine):
    cells = (fid, _fmt(m.value), m.unit, target, _fmt(m.spread), date, commit, machine)
    return "| " + " | ".join(cells) + " |"
