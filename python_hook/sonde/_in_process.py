"""`python3 -m sonde --in-process`: libsonde.so loaded into the interpreter already running,
instead of a second interpreter started under `sonde run`.

Loaded RTLD_GLOBAL before the program imports anything, libsonde is in the global scope ahead
of every library loaded after it, so numpy's BLAS and torch's oneDNN resolve their calls through
it as under LD_PRELOAD (glibc searches the global scope before a dlopen'ed library's own). What
was bound to libc before sonde came (CPython's _exit, exec, sigaction, pthread_create), and what
a library loaded later binds to libc, libsonde points at its own wrappers as it starts
(libprof/src/symbols/rebind.hpp); what is left is listed in docs/python.md, "In-process launch".
Where that would lose something sonde was asked for, or a library sonde intercepts is loaded
already, `refusal` says why and the launcher starts again under `sonde run`.
"""
import os
import time
import sys

from ._say import say

# Shared objects an interpreter loads by itself (and the extension modules of its lib-dynload):
# none defines a function sonde intercepts, so loading sonde after them loses nothing.
_INTERPRETER_OWN = ("ld-linux", "libc.so", "libm.so", "libz.so", "libexpat.so", "libpthread.so",
                    "libdl.so", "librt.so", "libutil.so", "libffi.so", "libgcc_s.so",
                    "libstdc++.so", "libcrypt.so", "libssl.so", "libcrypto.so", "liblzma.so",
                    "libbz2.so", "libuuid.so", "libmpdec.so", "libreadline.so", "libncurses",
                    "libtinfo.so", "libsqlite3.so", "libgdbm", "libnsl.so", "libtirpc.so",
                    "libb2.so", "libpython", "libsonde.so", "libfmt.so", "libedit.so",
                    "libgssapi", "libkrb5", "libk5crypto", "libcom_err", "libkeyutils",
                    "libresolv", "libzstd.so", "liblz4.so", "libgpg-error", "libgcrypt",
                    "libselinux", "libpcre2")
# Before glibc 2.34 its libraries are files named for their release (ld-2.31.so, libc-2.28.so,
# libpthread-2.31.so), which /proc/self/maps shows in place of their sonames. Told apart without
# `re`, whose import cost every run 2.8 ms (`python3 -m sonde` on an empty script: 1.73 x plain
# with it, 1.55 x before).
_GLIBC_LIBRARIES = ("ld", "libc", "libm", "libpthread", "libdl", "librt", "libutil", "libnsl",
                    "libresolv", "libcrypt", "libanl", "libmvec", "libBrokenLocale")


def _glibc_file(base):
    name, dash, release = base.partition("-2.")
    return (dash != "" and release.endswith(".so") and release[:-3].isdigit()
            and (name in _GLIBC_LIBRARIES or name.startswith("libnss_")))


def _interpreter_own(path):
    base = os.path.basename(path)
    return (os.sep + "lib-dynload" + os.sep in path or "/gconv/" in path
            or base.startswith(_INTERPRETER_OWN) or _glibc_file(base))


def _loaded_objects():
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            return {line.split(None, 5)[5].strip() for line in maps if line.count(" ") >= 5
                    and ".so" in line}
    except (OSError, IndexError):
        return None


def refusal(opts):
    """Why this run cannot load sonde in-process (a sentence), or None."""
    if opts.sort:
        return "-s prints sonde run's report"
    objects = _loaded_objects()
    if objects is None:
        return "/proc/self/maps cannot be read"
    for path in sorted(objects):
        if os.path.basename(path).startswith("libsonde"):
            return "libsonde.so is loaded already (a run inside a run)"
        if _interpreter_own(path):
            continue
        return f"{path} was loaded before sonde"
    return None


def _fail(message, code=1):
    say(f"python3 -m sonde: {message}", error=True)
    sys.exit(code)


def _process_alive(pid, started_ns):
    """analyzers/programs/process_alive.cpp's rule: `pid` runs now as the process that started
    writing at `started_ns`, neither a zombie nor a later process given its pid."""
    try:
        os.kill(pid, 0)
    except PermissionError:
        pass
    except OSError:
        return False
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            fields = f.read().rpartition(")")[2].split()
        with open("/proc/stat", encoding="ascii") as f:
            boot = next(int(line.split()[1]) for line in f if line.startswith("btime "))
        if fields[0] in ("Z", "X", "x"):
            return False
        started_s = boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return True
    return not started_ns or started_s <= started_ns / 1e9 + 1.0


_URI_KEPT = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789/._~-")


def _file_uri(path, query):
    """A SQLite file: URI of `path`'s bytes, every byte but the unreserved ones percent-encoded
    (urllib.parse.quote did it, and its import, with re's and ipaddress's, cost each run into an
    existing profile 5.6 ms of the 10 ms it then spent before the program; it also refused a
    name that is not UTF-8)."""
    return "file:" + "".join(chr(b) if b in _URI_KEPT else f"%{b:02X}"
                             for b in os.fsencode(path)) + "?" + query


def _live_writer(path):
    """(a sonde profile?, with a process row?, the pid of a process of it still running on this
    host or 0), as analyzers/programs/previous_profile.cpp reads them."""
    try:
        import sqlite3
        con = sqlite3.connect(_file_uri(path, "mode=ro"), uri=True)
    except Exception:
        return False, False, 0
    try:
        if not con.execute("SELECT 1 FROM meta WHERE key = 'schema_version'").fetchall():
            return False, False, 0
        if not con.execute("SELECT 1 FROM processes LIMIT 1").fetchall():
            return True, False, 0
        host = os.uname().nodename  # gethostname(2) is uname's nodename: socket cost 3 ms
        for pid, h, started_ns in con.execute(
                "SELECT pid, host, started_ns FROM processes WHERE ended_ns IS NULL"):
            if pid and pid > 0 and pid != os.getpid() and (h is None or h == host) and \
                    _process_alive(pid, started_ns):
                return True, True, pid
        return True, True, 0
    except Exception:
        return False, False, 0
    finally:
        con.close()


def _blank_profile_age(path):
    """Why a profile no process wrote to may be so, by its age (launcher.cpp's
    blank_profile_age): another run's claim before its first flush, or a dead run's."""
    try:
        age = time.time() - os.stat(path).st_mtime
    except OSError:
        age = 0
    if age < 10:
        return " (a run started into it a moment ago?); left as it is"
    ago = f"{age:.0f} s" if age < 120 else f"{age / 60:.0f} min" if age < 7200 else \
        f"{age / 3600:.0f} h"
    return (f", {ago} after it was made (a run killed before its first flush, one whose flushes "
            "failed, or one still running with periodic flushes off): left as it is; remove it, "
            "or use --force, to write there")


def _keep_previous(output, path):
    """An existing profile becomes <output>.old, as `sonde run` keeps it (previous_profile.cpp);
    False where `path` is no profile of sonde's, left alone. A profile no process has written to
    yet (another run's claim of the name, before its first flush) stays: this run's profile goes
    beside it."""
    if os.path.islink(path) or not os.path.isfile(path):
        return False
    profile, started, pid = _live_writer(path)
    if not profile:
        return False
    if not started:
        say(f"sonde: {output} holds no process yet{_blank_profile_age(path)}")
        return True
    if pid:
        _fail(f"{output} is still being written by process {pid} of its run; use -o for another "
              "file (or --force once that process has ended)")
    old = path + ".old"
    if os.path.lexists(old) and (os.path.islink(old) or not os.path.isfile(old)):
        _fail(f"cannot keep the previous profile {output} as {output}.old: that is not a regular "
              f"file; use --force to replace {output} or -o for another file")
    try:
        for suffix in ("-journal", "-wal", "-shm"):
            if os.path.lexists(old + suffix):
                os.unlink(old + suffix)
        os.replace(path, old)
        for suffix in ("-journal", "-wal", "-shm"):
            if os.path.lexists(path + suffix):
                os.replace(path + suffix, old + suffix)
    except OSError as e:
        _fail(f"cannot keep the previous profile {output} as {output}.old: {e.strerror}")
    say(f"sonde: kept the previous profile {output} as {output}.old")
    return True


def _same_file(a, b):
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):  # either missing; a -c program's code with a NUL byte
        return False


def refuse_program_file_as_output(output, program):
    """The output is replaced (--force) or set aside as .old before the program runs: the
    script, or a file the program was given, of that name would be gone (as sonde run's
    refuse_command_file_as_output, which leaves a re-exec's check to this one: the command it
    starts holds -o's value too)."""
    for given in program:
        if _same_file(given, output):
            _fail(f"-o {output} names a file the command was given ({given}): the profile "
                  "would replace it before the command runs; give it another name", 2)


def _number(text):
    """A rank or size as libsonde reads it (rank_env.hpp, strtol whole): -1 where none."""
    text = (text or "").lstrip(" \t\n\v\f\r")
    digits = text[1:] if text[:1] in ("+", "-") else text
    if not digits or not digits.isascii() or not digits.isdigit():
        return -1
    value = int(text)
    return value if 0 <= value <= 1 << 30 else -1


def _own_tag(kind, program):
    """The tag of the file this process writes, as libsonde names it (sonde/rank_env.hpp and
    rank_launcher.hpp, detect_rank_env and own_output, whose tables _options.py holds): ".rank3"
    for a rank of a parallel job, ".launcher1" for a launcher (torchrun) started as task 1 of an
    outer job (srun's), "" for neither. `kind`/`program`: "-m" and the module with its
    arguments, or None and the script with its."""
    from ._options import LAUNCHER_MODULES, LAUNCHER_SCRIPTS, RANK_SCHEMES
    env = os.environ
    outer = None  # (rank, size, 1) of an outer scheme, while a later one may number more ranks
    found = None
    for rank_var, size_var, least, required, is_outer in RANK_SCHEMES:
        if required and not env.get(required):
            continue
        rank, size = _number(env.get(rank_var)), _number(env.get(size_var))
        if rank < 0 or size < least or rank >= size:
            continue
        if outer and size <= outer[1]:
            continue
        if is_outer and not outer:
            outer = (rank, size, True)
            continue
        found = (rank, size, not required)
        break
    rank, _, may_launch = found or outer or (-1, 0, False)
    if rank < 0:
        return ""
    name = program[0] if program else ""
    subcommand = program[1] if len(program) > 1 else None
    table = LAUNCHER_MODULES if kind == "-m" else LAUNCHER_SCRIPTS if kind is None else ()
    if kind is None:
        name = os.path.basename(name)
    launcher = may_launch and any(
        name == n and (not sub or sub == subcommand) for n, sub in table)
    return f".launcher{rank}" if launcher else f".rank{rank}"


def _tagged(path, tag):
    """"dir/prof.db" with `tag` before its extension (sonde/output_name.hpp)."""
    slash, dot = path.rfind("/"), path.rfind(".")
    return path[:dot] + tag + path[dot:] if dot != -1 and dot > slash + 1 else path + tag


def _prepare_output(output, force, kind=None, program=()):
    """As `sonde run` does before it starts its command (analyzers/programs/launcher.cpp): for
    a rank, or a launcher under an outer job, its own file, which libsonde will claim (every
    rank of `mpirun python3 -m sonde -o prof.db` set the same earlier prof.db aside as .old,
    though none writes it; racing, a rank could find it gone and stop the job)."""
    try:
        path = os.path.abspath(output)
    except OSError as e:  # a relative name in a folder since removed: getcwd fails
        _fail(f"cannot place the profile {output}: the current directory is gone "
              f"({e.strerror}); give -o an absolute path")
    asked = path  # SONDE_OUTPUT: libsonde names its rank's file from it as it starts
    tag = _own_tag(kind, program)
    file = os.path.basename(path)
    if tag and not (tag + "." in file or file.endswith(tag)):  # a name that is its own already
        output, path = _tagged(output, tag), _tagged(path, tag)
    # SQLite's unix VFS makes a full path in 512 bytes, a journal's "-journal" after it: a
    # longer one's profile was lost.
    from ._options import LONGEST_PROFILE_PATH
    if len(os.fsencode(path)) > LONGEST_PROFILE_PATH:
        _fail(f"the output's full path is {len(os.fsencode(path))} bytes long, over the "
              f"{LONGEST_PROFILE_PATH} SQLite can open a file by: give -o a shorter path")
    if os.path.lexists(path):
        # Said at once: it was "not a sonde profile; use --force", and --force then said
        # "is a directory" (a red-team find).
        if os.path.isdir(path):
            _fail(f"{output} is a directory: name the profile's file (say, {output}/prof.db)")
        # A rank's earlier file stays, the rank writing beside it and saying so, as under
        # sonde run (a job's ranks start at once: none may take another's aside).
        if not force and not tag and not _keep_previous(output, path):
            _fail(f"{output} already exists and is not a sonde profile; use --force to replace "
                  "it or -o for another file")
    directory = os.path.dirname(path)
    if not os.path.isdir(directory):
        _fail(f"output directory {directory} does not exist")
    if not os.access(directory, os.W_OK | os.X_OK):
        # access(2) gives no reason; a read-only mount was a bare "cannot write" (sonde run
        # says the errno of its probe file).
        import errno
        try:
            read_only = os.statvfs(directory).f_flag & os.ST_RDONLY
        except OSError:
            read_only = False
        why = os.strerror(errno.EROFS if read_only else errno.EACCES)
        _fail(f"cannot write to output directory {directory}: {why}")
    if force:
        # A stale journal or WAL beside a new database would be replayed into it by SQLite.
        for suffix in ("", "-journal", "-wal", "-shm"):
            try:
                os.unlink(path + suffix)
            except FileNotFoundError:
                pass
            except OSError as e:
                _fail(f"cannot remove {path + suffix}: {e.strerror}")
    return asked


def extension_unloadable(error):
    """One line for an extension or libsonde that exists but does not load (an undefined symbol,
    a libstdc++ older than the one it was built against): a traceback said it until
    2026-12-06."""
    return (f"cannot load sonde's extension or libsonde.so here ({error}): this install of "
            f"sonde was built for another system, or is damaged; install the wheel made for "
            f"this Python and system (docs/install.md)")


def _set_run_environment(opts, output, lib):
    """The variables `sonde run` sets for its command (launcher.cpp, set_environment): read by
    libsonde as it loads, and inherited by the program's children, which are preloaded."""
    env = os.environ
    env["SONDE_OUTPUT"] = output
    old = env.get("LD_PRELOAD")
    env["LD_PRELOAD"] = f"{lib}:{old}" if old else lib  # made carriable once loaded (start)
    from ._options import RUN_OPTIONS
    # As sonde run sets them (run_options.hpp); a bad value was refused as the options were read
    # (__main__'s _refuse_bad_values: exit 2).
    for flag, name, flag_value in RUN_OPTIONS:
        value = getattr(opts, flag[2:].replace("-", "_"), None)
        if value:
            env[name] = flag_value or value
    env.pop("SONDE_DELAY_UNTIL", None)
    try:
        delay = float(env.get("SONDE_DELAY", ""))
    except ValueError:
        delay = 0
    if 0 < delay <= 1e6:
        import time
        env["SONDE_DELAY_UNTIL"] = str(time.time_ns() + round(delay * 1e9))
    if not env.get("NVTX_INJECTION64_PATH"):
        env["NVTX_INJECTION64_PATH"] = lib
    # The driver's cuInit starts sonde's GPU side through this (InitializeInjection), since
    # its dlopen by CPython's extensions never reaches sonde's dlopen wrapper. Another tool
    # named here keeps CUPTI (Nsight), as under sonde run.
    if not env.get("CUDA_INJECTION64_PATH"):
        env["CUDA_INJECTION64_PATH"] = lib
    env.pop("SONDE_RUN_ID", None)  # an enclosing run's would make this run join it
    env.pop("SONDE_UNPROFILED", None)  # nor is its failure this run's


def _carry_preload(_sonde, lib):
    """LD_PRELOAD as ld.so can read it: it splits the list at spaces and colons, so a libsonde
    under such a path goes in through the link libsonde made of it (sonde/preload_path.hpp, as
    sonde run and libsonde's own children use)."""
    carries = lambda path: not any(c in path for c in " :\t\n")  # noqa: E731
    preload = _sonde.preload_path()
    if carries(lib) or not preload:
        return
    if not carries(preload):
        _fail(f"cannot preload {lib} into the program's children: its path holds a space or a "
              f"colon, which LD_PRELOAD cannot carry, and no link to it could be made in a "
              f"temporary folder (TMPDIR, /tmp, /dev/shm, /var/tmp)")
    os.environ["LD_PRELOAD"] = os.environ["LD_PRELOAD"].replace(lib, preload, 1)


def _sync_run_environment(_sonde):
    """os.environ as sonde's setenv left the C environment: a child started with an env built
    from os.environ (subprocess's env=) joins the run with the right parent."""
    for entry in _sonde.run_env():
        name, _, value = entry.partition("=")
        os.environ[name] = value


def start(opts, lib, by_name, output_shown, kind, program):
    """Loads libsonde (`lib`; `by_name`: not the copy the extension links) into this
    interpreter for the run; False when it did not start recording (it said why). `kind`,
    `program`: the program ("-m" and its module, None and its script, "-c" and its code) and
    its arguments."""
    output = _prepare_output(output_shown, opts.force, kind, program)
    _set_run_environment(opts, output, lib)
    flags = sys.getdlopenflags()
    sys.setdlopenflags(os.RTLD_NOW | os.RTLD_GLOBAL)
    try:
        # The extension links libsonde.so (found by its RUNPATH, or loaded first by name where
        # SONDE_LIBRARY names another copy): importing it loads sonde into the global scope.
        if by_name:
            import ctypes
            ctypes.CDLL(lib, mode=os.RTLD_NOW | os.RTLD_GLOBAL)
        from . import _sonde
    except (ImportError, OSError) as e:
        _fail(extension_unloadable(e))
    finally:
        sys.setdlopenflags(flags)
    if not _sonde.in_process(output_shown):
        return False
    _carry_preload(_sonde, lib)
    sonde = sys.modules[__package__]
    sonde._preloaded = True
    sonde._bind_extension()  # region and stop, chosen when the launcher imported sonde
    _sync_run_environment(_sonde)
    return True

