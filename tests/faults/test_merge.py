"""sonde merge against damaged inputs and a failing disk: one line naming the cause, no output
(and no temporary file) left, an existing output kept."""
import resource
import sqlite3

from conftest import CLI, clean_env, preloaded, prog, query, run


def rank_files(tmp_path, n=2, job="faults-merge-job"):
    files = []
    for rank in range(n):
        d = tmp_path / f"r{rank}"
        d.mkdir()
        r = preloaded([prog("exit_status"), 0], d / "prof.db",
                      env_extra={"OMPI_COMM_WORLD_RANK": rank, "OMPI_COMM_WORLD_SIZE": n,
                                 "PMIX_NAMESPACE": job})
        assert r.rc == 0, r.err
        (f,) = d.glob("*.db")
        files.append(f)
    return files


def merge(out, files, *extra, **kw):
    return run([CLI, "merge", "-o", out, *files, *extra], env=clean_env(), **kw)


def nothing_left(tmp_path, out):
    return not out.exists() and not list(tmp_path.glob(out.name + ".merging*"))


def test_truncated_input(tmp_path):
    """merge/truncated rank file: refused in one line naming it, no output"""
    files = rank_files(tmp_path)
    size = files[1].stat().st_size
    with open(files[1], "r+b") as f:
        f.truncate(size // 2)
    out = tmp_path / "run.db"
    r = merge(out, files)
    assert r.rc == 1 and len(r.err.splitlines()) == 1 and str(files[1]) in r.err, r.err
    assert nothing_left(tmp_path, out)


def test_foreign_inputs(tmp_path):
    """merge/not a profile: another SQLite database and a text file, each refused in one line"""
    files = rank_files(tmp_path, 1)
    other = tmp_path / "other.db"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE t (x)")
    con.commit()
    con.close()
    text = tmp_path / "notes.db"
    text.write_text("not a database\n" * 100)
    out = tmp_path / "run.db"
    for bad in (other, text):
        r = merge(out, [files[0], bad])
        assert r.rc == 1 and len(r.err.splitlines()) == 1 and str(bad) in r.err, r.err
        assert nothing_left(tmp_path, out)


def test_file_size_limit(tmp_path):
    """merge/ulimit -f: the write fails in one line, no partial output, the old output kept"""
    files = rank_files(tmp_path, 4)
    out = tmp_path / "run.db"
    assert merge(out, files[:1]).rc == 0
    before = query(out, "SELECT COUNT(*) FROM processes")
    limit = out.stat().st_size // 2  # not room for the schema and one rank
    r = merge(out, files, "--force",
              preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit)))
    assert r.rc == 1 and len(r.err.splitlines()) == 1, r.err
    assert query(out, "SELECT COUNT(*) FROM processes") == before
    assert not list(tmp_path.glob("run.db.merging*"))
