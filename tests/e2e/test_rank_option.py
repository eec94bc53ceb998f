"""--rank R on report, tree, shapes, metrics and candidates over a merged file: the rank as its own file
reads (same output, byte for byte), and read whole, a file of several ranks says first that its
figures are summed over them. known_time per rank, the launcher's variables given by hand."""
import json

import pytest

from test_ranks import merge, rank_files, sonde

COMMANDS = [
    # report's header and notes were the whole file's (processes, threads, wall time, idle).
    ["report"],
    ["report", "--format", "json"],
    ["tree"],
    ["tree", "--threads", "merge", "--format", "json"],
    ["tree", "--format", "csv"],
    ["shapes", "--format", "json"],
    ["metrics", "--format", "json"],
    ["candidates", "--format", "json"],
]


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ranks")
    files = rank_files(tmp, [40, 160])
    out = tmp / "run.db"
    p = merge(out, files)
    assert p.returncode == 0, p.stderr
    return out, files


@pytest.mark.parametrize("cmd", COMMANDS, ids=lambda c: " ".join(c))
def test_one_rank_of_the_merged_file_reads_as_its_own_file(ranks, cmd):
    out, files = ranks
    got = []
    for rank, own in enumerate(files):
        p = sonde(cmd[0], out, "--rank", rank, *cmd[1:])
        assert p.returncode == 0, p.stderr
        alone = sonde(cmd[0], own, *cmd[1:])
        assert alone.returncode == 0, alone.stderr
        if "json" in cmd:  # it names the file it read (the JSON envelope)
            mine, its = json.loads(p.stdout), json.loads(alone.stdout)
            assert mine.pop("file") == str(out) and its.pop("file") == str(own)
            assert mine == its
        else:
            assert p.stdout == alone.stdout
        assert p.stderr == "" and "summed" not in p.stdout
        got.append(p.stdout)
    if cmd[0] in ("tree", "metrics"):  # their sleeps differ (their GEMMs and advice do not)
        assert got[0] != got[1]


def test_all_ranks_are_said_to_be_summed(ranks):
    out, files = ranks
    p = sonde("tree", out, "--threads", "merge")
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[0].startswith("all 2 ranks summed (ranks 0, 1)")
    assert "2 threads merged" in p.stdout
    for cmd in ("shapes", "metrics", "candidates"):
        p = sonde(cmd, out, "--format", "json")
        assert p.returncode == 0, p.stderr
        json.loads(p.stdout)  # the note stays out of the document
        assert p.stderr.startswith("all 2 ranks summed"), (cmd, p.stderr)
    alone = sonde("tree", files[0])
    assert "summed" not in alone.stdout + alone.stderr


def test_a_rank_the_file_does_not_hold(ranks):
    out, _ = ranks
    for cmd in ("report", "tree", "shapes", "metrics", "candidates"):
        p = sonde(cmd, out, "--rank", 5)
        assert p.returncode == 2 and p.stdout == ""
        assert p.stderr.strip().endswith("holds no rank 5 (ranks 0, 1)"), p.stderr
