"""Configuration cells: bad values of every SONDE_* variable and `sonde run` flag, bounded trace
memory, no secret in a profile (environment, command line), children that set their own
LD_PRELOAD, sonde loaded twice or nested, static binaries."""
import os
import re
import resource
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from conftest import (CLI, LIB, PYTHON, Run, calls, clean_env, notes, plain, preloaded, prog,
                      profile_whole, query, same_behaviour, secrets_absent, sonde_run,
                      in_process)

SOURCE = Path(os.environ.get("SONDE_SOURCE", Path(__file__).parents[2]))
BUILD = Path(os.environ.get("SONDE_BUILD", ""))
OPTIONS = SOURCE / "libprof/include/sonde/options.hpp"


def option_names(reader="kLibrary"):
    """The variables options.hpp declares for a reader (the library unless the spec names
    another): a new one gets its cells without a list to update."""
    names = []
    for block in OPTIONS.read_text().split("OptionSpec{")[1:]:
        m = re.match(r'\s*"(SONDE_[A-Z_]+)"', block)
        spec_reader = re.search(r"OptionReader::(k[A-Za-z]+)", block)
        if m and (spec_reader.group(1) if spec_reader else "kLibrary") == reader:
            names.append(m.group(1))
    return names


BAD_VALUES = {"empty": "", "garbage": "x!y", "negative": "-1", "huge": "9" * 40,
              "nan": "nan", "inf": "inf", "overflow": "1e10", "tiny": "1e-300"}


def measured(cmd, env, cwd=None, timeout=60, limit_as=None):
    """Runs cmd to its end; returns the Run and the CPU seconds and peak RSS (MiB) it used."""
    def limits():
        os.setsid()
        if limit_as:
            resource.setrlimit(resource.RLIMIT_AS, (limit_as, limit_as))
    start = time.monotonic()
    p = subprocess.Popen([str(c) for c in cmd], env=env, cwd=cwd, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, errors="replace", preexec_fn=limits)
    try:
        out, err = p.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, 9)
        out, err = p.communicate()
        timed_out = True
    # communicate() reaped the child: its rusage is in RUSAGE_CHILDREN's running totals, so the
    # caller takes differences around this call.
    return Run(p.returncode, out, err, time.monotonic() - start, timed_out)


def child_usage():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def sonde_lines(err):
    return [line for line in err.splitlines() if "sonde" in line.lower()]


# --- bad values ----------------------------------------------------------------------------

@pytest.mark.parametrize("value", BAD_VALUES.keys())
@pytest.mark.parametrize("name", option_names())
def test_bad_value(name, value, tmp_path):
    """SONDE_X set to a bad value: the host runs as without sonde, at most one line said"""
    cmd = [prog("exit_status"), 0]
    db = str(tmp_path / "prof.db")
    env = clean_env(LD_PRELOAD=LIB, SONDE_OUTPUT=db)
    env[name] = BAD_VALUES[value]
    alone = plain(cmd, cwd=tmp_path)
    profiled = measured(cmd, env, cwd=tmp_path, timeout=30)
    same_behaviour(alone, profiled)
    assert len(sonde_lines(profiled.err)) <= 1, profiled.err
    if name != "SONDE_OUTPUT":
        profile_whole(db)
        assert calls(db, "cblas_sgemm") == 10


def test_bad_value_said_once_per_run(db):
    """a bad value in a run of several processes (a shell and its children): said once, not per process"""
    child = prog("exit_status")
    cmd = ["/bin/sh", "-c", f"{child} 0 && {child} 0"]
    r = run_env(cmd, clean_env(LD_PRELOAD=LIB, SONDE_OUTPUT=db, SONDE_MAX_DEPTH="1"))
    same_behaviour(plain(cmd), r)
    assert sum("SONDE_MAX_DEPTH" in line for line in r.err.splitlines()) == 1, r.err
    profile_whole(db)
    assert calls(db, "cblas_sgemm") == 20


def test_regions_deeper_than_the_depth_limit_end_without_a_mismatch(db, tmp_path):
    """depth: 300 nested regions under SONDE_MAX_DEPTH=256 end as begun: the depth note alone (each
    end of a refused begin closed an outer region of the same name: 44 'mismatches')"""
    script = tmp_path / "deep.py"
    script.write_text("import ctypes\n"
                      "lib = ctypes.CDLL(None)\n"
                      "for _ in range(300): lib.sonde_region_begin(b'deep')\n"
                      "for _ in range(300): lib.sonde_region_end(b'deep')\n"
                      "lib.sonde_region_begin(b'after'); lib.sonde_region_end(b'after')\n"
                      "print('done')\n")
    r = preloaded([PYTHON, script], db, env_extra={"SONDE_MAX_DEPTH": "256"})
    assert (r.rc, r.out) == (0, "done\n"), r.err  # (sonde's region API: no run without it)
    assert "did not match" not in r.err, r.err
    profile_whole(db)
    said = notes(db)
    assert not any("did not match" in n for n in said), said
    assert any("deeper than SONDE_MAX_DEPTH=256" in n for n in said), said
    # 256 frames below the thread's root (the limit counts them), each closed once, in order.
    assert query(db, "SELECT COUNT(*), MIN(n.calls), MAX(n.calls) FROM nodes n JOIN routines r "
                     "USING (routine_id) WHERE r.name = 'deep'") == [(256, 1, 1)]
    assert query(db, "SELECT n.depth FROM nodes n JOIN routines r USING (routine_id) "
                     "WHERE r.name = 'after'") == [(1,)]


@pytest.mark.parametrize("value", BAD_VALUES.keys())
@pytest.mark.parametrize("name", option_names("kPython"))
def test_bad_value_python(name, value, db, tmp_path):
    """SONDE_X of the Python side set to a bad value under python3 -m sonde: the script runs as alone,
    the default taken with at most one line (SONDE_PYTHON_BUILTINS too, since 2026-12-05; it
    stopped the launch with exit 2 before, against the README's rule)"""
    script = tmp_path / "script.py"
    script.write_text("import subprocess, sys\n"
                      "print(subprocess.run([sys.executable, '-c', 'print(6 * 7)'],"
                      " capture_output=True, text=True).stdout.strip())\n")
    env = clean_env(PYTHONPATH=BUILD / "python")
    env[name] = BAD_VALUES[value]
    r = measured([PYTHON, "-m", "sonde", "-o", db, script], env, cwd=tmp_path, timeout=60)
    same_behaviour(plain([PYTHON, script], cwd=tmp_path), r)
    # The launcher's own last line (where the profile went) is not about the value.
    said = [line for line in sonde_lines(r.err) if "profile written to" not in line]
    assert len(said) <= 1, r.err
    profile_whole(db)


@pytest.mark.parametrize("how", ["env", "flag"])
@pytest.mark.parametrize("value", ["1e10", "1e-300", "1e308"])
def test_flush_interval_no_busy_loop(how, value, db):
    """an absurd flush interval: no flush loop burning a core while the host sleeps (set in the
    environment: the default, with one line); typed as sonde run's option, a usage error"""
    cmd = [prog("cfg_threads"), 1, 10, 1000]
    if how == "flag":
        r = measured([CLI, "run", "-o", db, "--flush-interval", value, "--", *cmd], clean_env(),
                     timeout=30)
        assert r.rc == 2 and r.err.startswith(f"sonde run: --flush-interval: '{value}' is "), r.err
        assert len(r.err.splitlines()) == 1 and not os.path.exists(db), r.err
        return
    env = clean_env(LD_PRELOAD=LIB, SONDE_OUTPUT=db, SONDE_FLUSH_INTERVAL=value)
    full = cmd
    before = child_usage()
    r = measured(full, env, timeout=30)
    cpu = child_usage() - before
    assert not r.timed_out and r.rc == 0, r.err
    assert cpu < 0.25, f"{cpu:.2f} s of CPU in a 1 s sleep: a flush loop"
    assert len(sonde_lines(r.err)) <= 2, r.err  # the warning and `sonde run`'s last word
    profile_whole(db)


@pytest.mark.parametrize("args", [["report", "--top", "-5"], ["tree", "--min-pct", "nan"],
                                  ["tree", "--min-pct", "-1"], ["shapes", "--top", "-1"]])
def test_report_flags_rejected(args, db):
    """sonde report --top -5, tree --min-pct nan: a usage error, not a silent default"""
    r = measured([prog("exit_status"), 0], clean_env(LD_PRELOAD=LIB, SONDE_OUTPUT=db))
    assert r.rc == 0
    r = measured([CLI, args[0], db, *args[1:]], clean_env())
    assert r.rc == 2, f"accepted ({r.rc}): {r.out[:200]}"
    assert args[1] in r.err, r.err


# --- trace memory --------------------------------------------------------------------------

def test_trace_buffer_maximum(db):
    """SONDE_TRACE_BUFFER=268435456 (the largest accepted): no bad_alloc, events recorded"""
    cmd = [prog("exit_status"), 0]
    env = clean_env(LD_PRELOAD=LIB, SONDE_OUTPUT=db, SONDE_TRACE=1,
                    SONDE_TRACE_BUFFER=268435456)
    # A 3 GiB address space: a buffer reserved whole (6 GiB) fails the same way here as on a
    # machine without that much memory, and never eats this one's.
    r = measured(cmd, env, limit_as=3 << 30)
    same_behaviour(plain(cmd), r)
    profile_whole(db)
    assert query(db, "SELECT COUNT(*) FROM trace_events")[0][0] >= 10


def test_trace_memory_follows_events(db):
    """trace mode, 32 threads of 20 calls, default buffer: memory follows the events"""
    cmd = [prog("cfg_threads"), 32, 20]
    env = clean_env(LD_PRELOAD=LIB, SONDE_OUTPUT=db, SONDE_TRACE=1)
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    r = measured(cmd, env)
    same_behaviour(plain(cmd), r)
    rss_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    assert rss_mib < 200 or before / 1024 >= 200, f"peak RSS {rss_mib:.0f} MiB"
    profile_whole(db)
    assert calls(db, "cblas_sgemm") == 640
    assert query(db, "SELECT COUNT(*) FROM trace_events")[0][0] >= 640


def test_trace_memory_cap(db):
    """trace memory capped (SONDE_TRACE_MEMORY=1): drops counted in trace_drops and a note"""
    cmd = [prog("cfg_threads"), 4, 20000]
    env = clean_env(LD_PRELOAD=LIB, SONDE_OUTPUT=db, SONDE_TRACE=1, SONDE_TRACE_MEMORY=1)
    r = measured(cmd, env)
    same_behaviour(plain(cmd), r)
    profile_whole(db)
    assert calls(db, "cblas_sgemm") == 80000
    events = query(db, "SELECT COUNT(*) FROM trace_events")[0][0]
    dropped = query(db, "SELECT COALESCE(SUM(dropped), 0) FROM trace_drops")[0][0]
    assert dropped > 0 and events < 80000
    # Every intercepted call is either an event or a drop (thread roots are no events).
    assert events + dropped >= 80000
    assert any("SONDE_TRACE_MEMORY" in n for n in notes(db)), notes(db)


# --- secrets -------------------------------------------------------------------------------

ENV_SECRETS = {
    "PYTHON_API_TOKEN": "tok-6f1d2a", "CUDA_SECRET_THING": "cuda-3e8b77",
    "NCCL_PASSWORD": "nccl-9a0c11", "OMP_AUTH_HEADER": "omp-bearer-42aa",
    "MKL_LICENSE_KEY": "mkl-5d5d5d", "OPENBLAS_CREDENTIAL": "oblas-7f7f7f",
    "SONDE_API_KEY": "sonde-k-1b2b3b", "PYTHONSTARTUP": "/home/alice-secret-dir/startup.py",
    "CUDA_UNKNOWN_VAR": "cuda-unknown-0b0b", "OMP_PASS": "omp-pass-6c6c",
}


@pytest.mark.parametrize("mode", ["preload", "sonde-run"])
def test_environment_secrets(mode, db):
    """secrets in allow-listed prefixes (PYTHON_API_TOKEN, CUDA_*, ...): never in the file"""
    cmd = [prog("exit_status"), 0]
    extra = dict(ENV_SECRETS, OMP_NUM_THREADS="3")
    r = (preloaded(cmd, db, env_extra=extra) if mode == "preload"
         else sonde_run(cmd, db, env_extra=extra))
    same_behaviour(plain(cmd), r)
    profile_whole(db)
    secrets_absent(db, ENV_SECRETS.values())
    # The known names that explain a run are still recorded.
    assert query(db, "SELECT value FROM run_info WHERE key = 'env.OMP_NUM_THREADS'") == [("3",)]


ARG_SECRETS = ["hunter2-pw", "sk-live-8c1e9f", "tok-ab12cd", "s3cr3t-val", "bearer-77aa",
               "urlpw-5e5e", "onearg-pw-3f", "hdr-bearer-9d", "pwd-val-4c", "ghp_urltok77"]
SECRET_ARGS = ["--password=hunter2-pw", "--api-key", "sk-live-8c1e9f", "--token=tok-ab12cd",
               "--client-secret", "s3cr3t-val", "AUTH_HEADER=bearer-77aa",
               "--db=postgres://ann:urlpw-5e5e@dbhost/x", "--steps", "3",
               # forms a red-team run found stored: one quoted argument, a header, --pwd, a
               # token as a URL's user
               "--password onearg-pw-3f", "Authorization: Bearer hdr-bearer-9d",
               "--pwd=pwd-val-4c", "https://ghp_urltok77@github.com/a/b"]


@pytest.mark.parametrize("mode", ["preload", "sonde-run", "python"])
@pytest.mark.parametrize("record", ["args", "no-args"])
def test_command_line_secrets(mode, record, db, tmp_path):
    """--password=..., --api-key ...: values redacted in runs and processes (SONDE_RECORD_ARGS=0: none)"""
    extra = {} if record == "args" else {"SONDE_RECORD_ARGS": "0"}
    if mode == "python":
        script = tmp_path / "script.py"
        script.write_text("import sys\nprint(len(sys.argv))\n")
        cmd = [PYTHON, "-m", "sonde", "-o", db, str(script), *SECRET_ARGS]
        extra["PYTHONPATH"] = str(BUILD / "python")
        r = plain(cmd, env_extra=extra)
        alone = plain([PYTHON, str(script), *SECRET_ARGS])
    elif mode == "preload":
        cmd = [prog("cfg_args"), *SECRET_ARGS]
        alone, r = plain(cmd), preloaded(cmd, db, env_extra=extra)
    else:
        cmd = [prog("cfg_args"), *SECRET_ARGS]
        args = ["--no-record-args"] if record == "no-args" else []
        alone, r = plain(cmd), sonde_run(cmd, db, args=args)
    same_behaviour(alone, r)
    profile_whole(db)
    secrets_absent(db, ARG_SECRETS)
    commands = [c for (c,) in query(db, "SELECT command FROM runs UNION ALL "
                                        "SELECT command FROM processes")]
    assert commands
    for c in commands:
        if record == "args":
            assert "--steps 3" in c, c  # what is no secret stays
        else:
            assert "--steps" not in c, c


# Issue 37's ten spellings a hostile user's run stored in clear: (arguments, their secrets).
SPELLINGS = {
    "url-password-slash": (["--db", "postgres://u:slashA9/slashB9@dbhost/x"],
                           ["slashA9", "slashB9"]),
    "url-password-hash": (["redis://:hashC8#hashD8@cache:6379/0"], ["hashC8", "hashD8"]),
    "bare-config-key": (["configure", "set", "aws_secret_access_key", "awskey-7q7q"],
                        ["awskey-7q7q"]),
    "creds": (["--creds", "creds-5t5t"], ["creds-5t5t"]),
    "jwt": (["--jwt", "eyJjwt.9u9u"], ["eyJjwt.9u9u"]),
    "dash-value": (["--ssh-key", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXkbody42\n"
                                 "-----END OPENSSH PRIVATE KEY-----"], ["b3BlbnNzaC1rZXkbody42"]),
    "amz-signature": (["https://bkt.s3.amazonaws.com/o?X-Amz-Date=20260101T000000Z&"
                       "X-Amz-Signature=amzsig0a0a"], ["amzsig0a0a"]),
    "sig": (["https://h.example/f?exp=1&sig=plainsig1b1b"], ["plainsig1b1b"]),
    "azure-sas": (["--sas", "sv=2022-11-02&ss=b&sp=r&sig=azsig2c2c"], ["azsig2c2c"]),
    "empty-first": (["--access-token", "", "emptyfirst5f5f"], ["emptyfirst5f5f"]),
    "options-end": (["--hf_token", "--", "dashdash6a6a"], ["dashdash6a6a"]),
}
# What is no secret stays readable: (arguments, as the command must show them).
ORDINARY = [(["--lr", "0.1"], "--lr 0.1"), (["--data", "/path/with#hash"], "--data /path/with#hash"),
            (["https://host:443/p@scope/pkg"], "https://host:443/p@scope/pkg"),
            (["--out", "run.sig"], "--out run.sig")]
ENV_CODE = ('import os; os.environ["HF_TOKEN"] = "hfset3d3d"; '
            'os.environ.setdefault("WANDB_API_KEY", "wandb4e4e"); print("ok")')
PLAIN_CODE = 'import sys; n = "keep-me"; print(n, len(sys.argv))'


def recorded_commands(db):
    return [c for (c,) in query(db, "SELECT command FROM runs UNION ALL "
                                    "SELECT command FROM processes")]


@pytest.mark.parametrize("mode", ["preload", "sonde-run", "python"])
@pytest.mark.parametrize("spelling", SPELLINGS)
def test_more_secret_spellings(spelling, mode, db, tmp_path):
    """issue 37's ten spellings (a URL password with '/' or '#', `set aws_secret_access_key`,
    --creds, --jwt, a value starting with '-', URL signatures, `--token "" x`, `--token -- x`):
    never in the file; ordinary values beside them stay readable"""
    args, secrets = SPELLINGS[spelling]
    args = [a for plain_args, _ in ORDINARY for a in plain_args] + args
    if mode == "python":
        script = tmp_path / "script.py"
        script.write_text("import sys\nprint(len(sys.argv))\n")
        cmd = [PYTHON, "-m", "sonde", "-o", db, str(script), *args]
        r = plain(cmd, env_extra={"PYTHONPATH": str(BUILD / "python")})
        alone = plain([PYTHON, str(script), *args])
    else:
        cmd = [prog("cfg_args"), *args]
        alone, r = plain(cmd), under_mode(mode, cmd, db)
    same_behaviour(alone, r)
    profile_whole(db)
    secrets_absent(db, secrets)
    commands = recorded_commands(db)
    assert commands
    for c in commands:
        for _, shown in ORDINARY:
            assert shown in c, c


@pytest.mark.parametrize("mode", ["preload", "python"])
def test_secrets_set_in_python_code(mode, db):
    """`python3 -c` code that sets os.environ["HF_TOKEN"] = "..." or setdefault("WANDB_API_KEY",
    "..."): the values never in the file; a program without secrets is recorded as given"""
    for code, secrets in [(ENV_CODE, ["hfset3d3d", "wandb4e4e"]), (PLAIN_CODE, [])]:
        Path(db).unlink(missing_ok=True)
        if mode == "python":
            r = plain([PYTHON, "-m", "sonde", "-o", db, "-c", code],
                      env_extra={"PYTHONPATH": str(BUILD / "python")})
        else:
            r = preloaded([PYTHON, "-c", code], db)
        same_behaviour(plain([PYTHON, "-c", code]), r)
        profile_whole(db)
        secrets_absent(db, secrets)
        if not secrets:
            assert any(code in c for c in recorded_commands(db)), recorded_commands(db)


def under_mode(mode, cmd, db):
    return preloaded(cmd, db) if mode == "preload" else sonde_run(cmd, db)


FRESH_ENV_CHILDREN = """import os, subprocess, sys
subprocess.run([sys.executable, "-c", "pass", "child-arg-b7"], env={"PATH": "/usr/bin:/bin"})
os.spawnve(os.P_WAIT, "/bin/true", ["/bin/true", "spawnve-arg-c8"], {})
os.waitpid(os.posix_spawn("/bin/true", ["/bin/true", "spawn-arg-d9"], {}), 0)
"""


@pytest.mark.parametrize("mode", ["sonde-run", "in-process"])
def test_no_record_args_in_fresh_environments(mode, db, tmp_path):
    """--no-record-args: children given an environment of their own keep their arguments out too"""
    script = tmp_path / "fresh.py"
    script.write_text(FRESH_ENV_CHILDREN)
    if mode == "sonde-run":
        r = sonde_run([PYTHON, str(script), "root-arg-a6"], db, args=["--no-record-args"])
    else:
        r = in_process(["--no-record-args", str(script), "root-arg-a6"], db)
    assert r.rc == 0, r.err
    profile_whole(db)
    commands = [c for (c,) in query(db, "SELECT command FROM processes")]
    assert len(commands) >= 4, commands  # the root and its three children
    secrets_absent(db, ["root-arg-a6", "child-arg-b7", "spawnve-arg-c8", "spawn-arg-d9"])


# --- children and nesting ------------------------------------------------------------------

@pytest.mark.parametrize("how", ["execve", "shell"])
def test_child_sets_own_preload(how, db):
    """a child exec'd with its own LD_PRELOAD (execve env, or LD_PRELOAD=lib ./child): still profiled"""
    child = [prog("exit_status"), 0]
    if how == "execve":
        cmd = [prog("cfg_exec_env"), *child]
    else:
        cmd = ["/bin/sh", "-c", f"LD_PRELOAD=libm.so.6 {child[0]} 0"]
    same_behaviour(plain(cmd), preloaded(cmd, db))
    profile_whole(db)
    assert calls(db, "cblas_sgemm") == 10


def test_preload_twice(db):
    """LD_PRELOAD=libsonde.so:libsonde.so: one sonde, every call counted once"""
    cmd = [prog("exit_status"), 0]
    r = run_env(cmd, clean_env(LD_PRELOAD=f"{LIB}:{LIB}", SONDE_OUTPUT=db))
    same_behaviour(plain(cmd), r)
    profile_whole(db)
    assert calls(db, "cblas_sgemm") == 10


def test_two_copies_preloaded(db, tmp_path):
    """two different libsonde.so files preloaded: the first records, the second stays off, said once"""
    other = tmp_path / "other" / "libsonde.so"
    other.parent.mkdir()
    shutil.copy(LIB, other)
    cmd = [prog("exit_status"), 0]
    r = run_env(cmd, clean_env(LD_PRELOAD=f"{LIB}:{other}", SONDE_OUTPUT=db))
    same_behaviour(plain(cmd), r)
    profile_whole(db)
    assert calls(db, "cblas_sgemm") == 10
    assert query(db, "SELECT COUNT(*) FROM processes")[0][0] == 1
    assert len(sonde_lines(r.err)) == 1 and "stays inactive" in r.err, r.err


def run_env(cmd, env):
    return measured(cmd, env, timeout=60)


def test_sonde_under_sonde(tmp_path):
    """sonde run -- sonde run -- prog: the inner run's profile has the host's calls"""
    outer, inner = str(tmp_path / "outer.db"), str(tmp_path / "inner.db")
    cmd = [prog("exit_status"), 3]
    r = run_env([CLI, "run", "-o", outer, "--", CLI, "run", "-o", inner, "--", *cmd], clean_env())
    alone = plain(cmd)
    assert r.rc == alone.rc and r.out == alone.out, r.err
    profile_whole(inner)
    assert calls(inner, "cblas_sgemm") == 10
    profile_whole(outer)  # the inner sonde itself, profiled by the outer one
    # Two runs, each in its own file: the host joined the inner one, not the outer.
    [(inner_uuid,)] = query(inner, "SELECT uuid FROM runs")
    [(outer_uuid,)] = query(outer, "SELECT uuid FROM runs")
    assert inner_uuid != outer_uuid


def test_static_binary(db, tmp_path):
    """a statically linked host: runs unchanged, nothing recorded, and `sonde run` says why"""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None or not Path("/usr/lib/x86_64-linux-gnu/libc.a").exists():
        pytest.skip("no static libc to link with")
    src = tmp_path / "static_host.c"
    src.write_text('#include <stdio.h>\nint main(void) { puts("static host"); return 4; }\n')
    exe = tmp_path / "static_host"
    subprocess.run([cc, "-static", "-O1", "-o", str(exe), str(src)], check=True)
    alone = plain([exe])
    r = sonde_run([exe], db)
    same_behaviour(alone, r)
    assert not Path(db).exists()
    assert len(sonde_lines(r.err)) == 1 and "is statically linked" in r.err, r.err


def test_a_count_that_grows_between_flushes_is_one_note(db, tmp_path):
    """depth: calls beyond SONDE_MAX_DEPTH on both sides of a periodic flush: one note, said once"""
    # Each flush added a note of its running total (246, then 692: read as 938), each on stderr.
    script = tmp_path / "deep.py"
    script.write_text("import time\n"
                      "def down(n):\n"
                      "    return 0 if n == 0 else 1 + down(n - 1)\n"
                      "down(500)\n"
                      "time.sleep(1.5)\n"  # a periodic flush (every second) in between
                      "down(700)\n"
                      "print('ok')\n")
    r = run_env([PYTHON, "-m", "sonde", "-o", db, script],
                clean_env(PYTHONPATH=str(Path(os.environ["SONDE_BUILD"]) / "python"),
                          SONDE_MAX_DEPTH="256"))
    assert (r.rc, r.out) == (0, "ok\n"), r.err
    depth = [n for n in notes(db) if "deeper than SONDE_MAX_DEPTH" in n]
    # The hook's own frames take a few levels: 500 + 700 calls, less 2 x (256 - those) kept.
    assert len(depth) == 1 and int(depth[0].split()[0]) > 500 + 700 - 2 * 256, depth
    assert sum("deeper than SONDE_MAX_DEPTH" in l for l in r.err.splitlines()) == 1, r.err


def test_a_count_whose_words_change_with_it_is_still_one_note(db, tmp_path):
    """regions: 1 end that matches no open region, a periodic flush, 1 more: one note of 2"""
    # '1 region end did not match' and '2 region ends did not match' differ beyond the count:
    # the words every version holds name the note, not the text after the number.
    script = tmp_path / "ends.py"
    script.write_text("import ctypes, time\n"
                      "lib = ctypes.CDLL(None)\n"
                      "lib.sonde_region_end(b'never_begun')\n"
                      "time.sleep(1.5)\n"  # a periodic flush (every second) in between
                      "lib.sonde_region_end(b'never_begun')\n"
                      "print('done')\n")
    r = preloaded([PYTHON, script], db)
    assert (r.rc, r.out) == (0, "done\n"), r.err
    ends = [n for n in notes(db) if "did not match the innermost open region" in n]
    assert ends == ["2 region ends did not match the innermost open region"], ends
