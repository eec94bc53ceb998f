"""README.md's environment table is what `sonde env-table` prints from options.hpp."""
import os
import re
import subprocess
from pathlib import Path

SOURCE = Path(os.environ.get("SONDE_SOURCE", Path(__file__).parents[2]))
CLI = os.environ["SONDE_CLI"]


def test_readme_env_table_is_generated():
    readme = (SOURCE / "README.md").read_text()
    m = re.search(r"<!-- env-table:[^\n]*-->\n(.*?)<!-- /env-table -->", readme, re.S)
    assert m, "README.md has no <!-- env-table --> block"
    table = subprocess.run([CLI, "env-table"], capture_output=True, text=True, check=True).stdout
    assert m.group(1) == table, "README.md's environment table differs from `sonde env-table`"


def test_every_variable_read_is_declared():
    """No SONDE_* variable is named anywhere in sonde's code that options.hpp does not declare."""
    declared = set(re.findall(r'OptionSpec\{\s*"(SONDE_[A-Z_]+)"',
                              (SOURCE / "libprof/include/sonde/options.hpp").read_text()))
    read = set()
    for folder in ("libprof", "wrappers", "analyzers", "python_hook"):
        for path in (SOURCE / folder).rglob("*"):
            if path.suffix not in (".cpp", ".hpp", ".c", ".h", ".py"):
                continue
            text = path.read_text(errors="replace")
            read |= set(re.findall(r'"(SONDE_[A-Z][A-Z_]*)[="]', text))
    assert read, "the scan found no reads at all"
    assert read <= declared, f"read but not declared in options.hpp: {sorted(read - declared)}"
