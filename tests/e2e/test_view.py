"""`sonde view`: the real server on real sockets. Only 127.0.0.1 listens; every file needs the
run's token (query or the cookie `/` sets); '..' and anything but the four paths are refused;
SIGTERM/SIGINT end it with status 0; a port in use, a missing file or a non-profile exit 2;
`--html` writes one file whose data element no routine name can break out of. The pages are
the viewer's build (<build>/viewer/dist) when it was built, else a small stand-in
(viewer_fixture/) that reads the data the same way."""
import http.client
import json
import os
import re
import select
import shutil
import signal
import socket
import sqlite3
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from conftest import BIN, CLI, clean_env, run

HERE = Path(__file__).parent
BUILD = Path(os.environ.get("SONDE_BUILD", "."))
SOURCE = Path(os.environ.get("SONDE_SOURCE", HERE.parents[1]))
HOSTILE = "</script><img src=x onerror=alert(1)>"
BUILT = BUILD / "viewer" / "dist"
VIEWER = BUILT if all((BUILT / f).is_file() for f in ("index.html", "app.js", "app.css")) \
    else HERE / "viewer_fixture"


def view_env(**extra):
    return clean_env(SONDE_VIEWER_DIR=VIEWER, **extra)


@pytest.fixture(scope="module")
def profile(tmp_path_factory):
    db = tmp_path_factory.mktemp("view") / "prof.db"
    r = run([BIN / "named_regions", HOSTILE, "plain_region"], db=db, timeout=60)
    assert r.returncode == 0, r.stderr
    return db


@contextmanager
def serving(*args, env=None, timeout=60):
    """`sonde view ARGS` running; yields (process, url, port, token)."""
    p = subprocess.Popen([CLI, "view", *map(str, args)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env or view_env())
    try:
        ready, _, _ = select.select([p.stdout], [], [], timeout)
        line = p.stdout.readline().strip() if ready else ""
        m = re.fullmatch(r"http://127\.0\.0\.1:(\d+)/\?token=([0-9a-f]+)", line)
        assert m, f"no URL printed: {line!r} {p.stderr.read() if p.poll() is not None else ''}"
        yield p, line, int(m.group(1)), m.group(2)
    finally:
        if p.poll() is None:
            p.kill()
        p.wait(timeout=10)


@pytest.fixture(scope="module")
def server(profile):
    with serving(profile) as s:
        yield s


def get(port, path, headers=None, method="GET"):
    """One request with the path sent as written (no normalisation of '..')."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, path, headers=headers or {})
        r = conn.getresponse()
        return r.status, dict(r.getheaders()), r.read()
    finally:
        conn.close()


def stops_cleanly(p, sig, within=5.0):
    t0 = time.monotonic()
    p.send_signal(sig)
    rc = p.wait(timeout=within + 5)
    return rc, time.monotonic() - t0, p.stderr.read()


def test_every_file_needs_the_token(server):
    _, _, port, token = server
    wrong = token[:-1] + ("0" if token[-1] != "0" else "1")
    for path in ("/", "/app.js", "/app.css", "/data.json"):
        for query in ("", "?token=", f"?token={wrong}", f"?token={token[:-2]}", "?token=x"):
            status, _, body = get(port, path + query)
            assert status == 403, (path, query, status)
            assert b"sonde_token" not in body and token.encode() not in body
    assert get(port, "/", {"Cookie": f"sonde_token_{port}={wrong}"})[0] == 403
    # Another viewer's cookie (another port) is not this one's.
    assert get(port, "/app.js", {"Cookie": f"sonde_token_{port + 1}={token}"})[0] == 403


def test_with_the_token_each_file_has_its_type_and_no_cache(server):
    _, _, port, token = server
    status, headers, body = get(port, f"/?token={token}")
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert body == (VIEWER / "index.html").read_bytes()
    cookie = headers["Set-Cookie"]
    assert cookie.startswith(f"sonde_token_{port}={token};")
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    name_value = cookie.split(";")[0]
    types = {"/app.js": ("text/javascript", "app.js"), "/app.css": ("text/css", "app.css")}
    for path, (ctype, file) in types.items():
        for headers_in, query in (({"Cookie": name_value}, ""), ({}, f"?token={token}")):
            status, h, body = get(port, path + query, headers_in)
            assert status == 200 and h["Content-Type"].split(";")[0] == ctype, (path, status)
            assert body == (VIEWER / file).read_bytes()
            assert h["Cache-Control"] == "no-store"
            assert h["X-Content-Type-Options"] == "nosniff"
            assert h["Referrer-Policy"] == "no-referrer"


def test_data_json_is_the_bundle(server):
    _, _, port, token = server
    status, headers, body = get(port, f"/data.json?token={token}")
    assert status == 200 and headers["Content-Type"] == "application/json"
    assert headers["Cache-Control"] == "no-store"
    bundle = json.loads(body)
    assert bundle["format_version"] == 2 and len(bundle["profiles"]) == 1
    assert HOSTILE in body.decode()  # a JSON string: the browser shows it as text
    # Ranges and HEAD work on the same bytes.
    status, _, part = get(port, f"/data.json?token={token}", {"Range": "bytes=0-9"})
    assert status == 206 and part == body[:10]
    status, h, empty = get(port, f"/data.json?token={token}", method="HEAD")
    assert status == 200 and empty == b"" and int(h["Content-Length"]) == len(body)


def test_parts_are_the_bundles_members(server):
    """The page's requests: the index, then each part of a profile, each the whole bundle's
    member; the first tree is the tree at 0.1 %, 64 levels deep; unknown parts and profiles are
    refused, and every part still needs the token."""
    _, _, port, token = server
    status, _, body = get(port, f"/data.json?token={token}&part=index")
    assert status == 200
    index = json.loads(body)
    assert index["format_version"] == 2 and index["diff"] is False
    assert [p["path"] for p in index["profiles"]] and "tree" in index["parts"]
    whole = json.loads(get(port, f"/data.json?token={token}")[2])["profiles"][0]
    for name in index["parts"]:
        status, h, body = get(port, f"/data.json?token={token}&profile=0&part={name}")
        assert status == 200 and h["Content-Type"] == "application/json", name
        assert json.loads(body) == whole[name], name
    status, _, body = get(port, f"/data.json?token={token}&profile=0&part=tree_first")
    first = json.loads(body)
    assert status == 200 and first["min_pct"] == 0.1 and first["max_depth"] == 64 and first["trees"]
    for query in ("profile=0&part=nope", "profile=1&part=tree", "profile=x&part=tree",
                  "profile=&part=tree", "part=tree"):
        assert get(port, f"/data.json?token={token}&{query}")[0] == 404, query
    assert get(port, "/data.json?profile=0&part=tree")[0] == 403


@pytest.mark.parametrize("path", [
    "/../../../../etc/passwd", "/%2e%2e/%2e%2e/etc/passwd", "/%2E%2E%2F%2E%2E%2Fetc%2Fpasswd",
    "/app.js/../data.json", "/..%2f..%2f..%2fetc%2fpasswd", "/.%2e/.%2e/etc/passwd",
    "/..\\..\\etc\\passwd", "/index.html", "/etc/passwd", "//etc/passwd", "/%2fetc%2fpasswd",
    "/app.js%00", "/data.json/", "/favicon.ico", "/../index.html",
])
def test_other_paths_are_refused(server, path):
    _, _, port, token = server
    status, _, body = get(port, f"{path}?token={token}")
    assert status in (400, 404), status
    assert b"root:" not in body and b"<html" not in body.lower()


def test_only_get_and_head(server):
    _, _, port, token = server
    for method in ("POST", "PUT", "DELETE", "OPTIONS"):
        assert get(port, f"/?token={token}", method=method)[0] in (403, 404, 405)


def test_another_host_name_is_refused(server):
    """A page of another site whose name was made to resolve to 127.0.0.1 (DNS rebinding) would
    send its own Host; with the token too it gets nothing."""
    _, _, port, token = server
    assert get(port, f"/?token={token}", {"Host": f"evil.example:{port}"})[0] == 403
    assert get(port, f"/?token={token}", {"Host": f"localhost:{port}"})[0] == 200
    for host in (f"localhost.evil.example:{port}", f"evil.localhost:{port}", "localhost:80ab",
                 f"127.0.0.1.evil:{port}", f"[::1]x:{port}", f"::1:{port}", ""):
        assert get(port, f"/?token={token}", {"Host": host})[0] == 403, host


def test_a_tunnel_port_is_a_loopback_host(server):
    """Through `ssh -L 9000:localhost:PORT` (or a forwarded port) the browser sends its own
    port: the loopback name is what is checked, not the port."""
    _, _, port, token = server
    for host in ("localhost:9000", "127.0.0.1:9000", "localhost", "[::1]:9000", "[::1]"):
        assert get(port, f"/?token={token}", {"Host": host})[0] == 200, host


def listeners(port):
    """(address, port) of the sockets listening on `port`, IPv4 and IPv6, from /proc."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not os.path.exists(table):
            continue
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            address, local_port = fields[1].rsplit(":", 1)
            if int(local_port, 16) == port and fields[3] == "0A":  # TCP_LISTEN
                found.append(address)
    return found


def test_listens_on_loopback_only(server):
    p, _, port, _ = server
    # 0100007F is 127.0.0.1 in the kernel's byte order; nothing on 0.0.0.0 or IPv6.
    assert listeners(port) == ["0100007F"]
    # A connection to another address of this machine is refused.
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("10.255.255.255", 1))
            own = s.getsockname()[0]
    except OSError:
        own = None
    if own and not own.startswith("127."):
        with pytest.raises(OSError):
            socket.create_connection((own, port), timeout=2).close()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_ends_it_cleanly(profile, sig):
    with serving(profile) as (p, url, port, token):
        # A browser holds its connection open between requests.
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", f"/data.json?token={token}")
        assert conn.getresponse().read()
        rc, took, err = stops_cleanly(p, sig)
        conn.close()
    assert rc == 0 and err == "", (rc, err)
    assert took < 4, took
    assert listeners(port) == []


def test_port_in_use_exits_2(profile):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = subprocess.run([CLI, "view", str(profile), "--port", str(port)], env=view_env(),
                           capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and f"127.0.0.1:{port} is in use" in r.stderr


def test_a_second_viewer_on_the_same_port_exits_2(profile):
    """cpp-httplib's default socket options set SO_REUSEPORT: a second `sonde view --port N`
    bound the port beside the first and the kernel shared the connections between them."""
    with serving(profile) as (p, url, port, token):
        second = subprocess.Popen([CLI, "view", str(profile), "--port", str(port)],
                                  env=view_env(), stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        try:
            out, err = second.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            second.kill()
            out, err = second.communicate()
        assert second.returncode == 2, out
        r = subprocess.CompletedProcess([], 2, out, err)
        assert f"127.0.0.1:{port} is in use" in r.stderr
        assert get(port, f"/?token={token}")[0] == 200


def test_a_fixed_free_port(profile):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with serving(profile, "--port", port) as (p, url, got, token):
        assert got == port and get(port, f"/?token={token}")[0] == 200


def test_a_url_that_cannot_be_printed_stops_it(profile):
    """Standard output on a full disk: nobody could open the viewer, so it stops (it served on,
    unseen, before)."""
    with open("/dev/full", "w") as full:
        r = subprocess.run([CLI, "view", str(profile)], env=view_env(), stdout=full,
                           stderr=subprocess.PIPE, text=True, timeout=30)
    assert r.returncode == 1
    assert r.stderr == "sonde view: cannot print the URL on standard output: " \
                       "No space left on device\n"


def one_line_exit_2(args, env=None):
    r = subprocess.run([CLI, "view", *map(str, args)], env=env or view_env(),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, (args, r.returncode, r.stderr)
    assert r.stdout == "" and r.stderr.count("\n") == 1, r.stderr
    return r.stderr


def test_bad_inputs_exit_2_with_one_line(profile, tmp_path):
    assert "no such file" in one_line_exit_2([tmp_path / "missing.db"])
    text = tmp_path / "notes.txt"
    text.write_text("not a database\n" * 100)
    assert "not a SQLite database" in one_line_exit_2([text])
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE t (x)").connection.commit()
    assert "not a sonde profile" in one_line_exit_2([other])
    # The second of two is bad: no URL is printed for half the data.
    assert "no such file" in one_line_exit_2([profile, tmp_path / "missing.db"])
    # Usage errors (CLI11's message and its pointer to --help).
    for args in ([profile, "--port", "70000"], [profile, "--port", "-1"],
                 [profile, "--html", tmp_path / "x.html", "--port", "8080"],
                 [profile, "--html", tmp_path / "x.html", "--open"], [profile, "--force"], []):
        r = subprocess.run([CLI, "view", *map(str, args)], env=view_env(), capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 2 and r.stdout == "", (args, r.returncode)
    assert not (tmp_path / "x.html").exists()


def test_missing_viewer_files_are_named(profile, tmp_path):
    r = subprocess.run([CLI, "view", str(profile)], env=clean_env(SONDE_VIEWER_DIR=tmp_path),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and r.stderr.count("\n") == 1
    assert f"SONDE_VIEWER_DIR={tmp_path}" in r.stderr and "index.html" in r.stderr
    if not BUILT.exists():  # the build tree's own place, named when nothing is there
        r = subprocess.run([CLI, "view", str(profile)], env=clean_env(), capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 1 and str(BUILT) in r.stderr, r.stderr


@pytest.mark.parametrize("layout", ["viewer/dist", "share/sonde/viewer"])
def test_pages_found_beside_the_executable(profile, tmp_path, layout):
    """A build tree (<build>/bin/sonde, <build>/viewer/dist) and an installed one
    (<prefix>/bin/sonde, <prefix>/share/sonde/viewer), without SONDE_VIEWER_DIR."""
    (tmp_path / "bin").mkdir()
    shutil.copy2(CLI, tmp_path / "bin" / "sonde")  # /proc/self/exe would resolve a link
    shutil.copytree(HERE / "viewer_fixture", tmp_path / layout)
    out = tmp_path / "page.html"
    r = subprocess.run([tmp_path / "bin" / "sonde", "view", str(profile), "--html", str(out)],
                       env=clean_env(), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "<title>sonde view (test fixture)</title>" in out.read_text()


def html_data(page):
    m = re.search(r'<script id="sonde-data" type="application/json">(.*?)</script>', page, re.S)
    assert m, "no data element"
    return json.loads(m.group(1))


def test_html_is_one_file_no_name_can_break_out_of(profile, server, tmp_path):
    out = tmp_path / "report.html"
    r = subprocess.run([CLI, "view", str(profile), "--html", str(out)], env=view_env(),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout == "" and r.stderr == "", r.stderr
    page = out.read_text()
    _, _, port, token = server
    served = json.loads(get(port, f"/data.json?token={token}")[2])
    assert html_data(page) == served
    # The name is in the file only escaped: its '<' never reaches the HTML parser.
    assert HOSTILE not in page and "<img src=x" not in page
    assert "\\u003c/script\\u003e\\u003cimg src=x onerror=alert(1)\\u003e" in page
    # Exactly two script elements (the data, then the app) and they close where they should.
    assert len(re.findall(r"<script\b", page, re.I)) == 2
    assert len(re.findall(r"</script", page, re.I)) == 2
    # Offline: nothing loaded from anywhere (src/href/url()/@import naming a URL or a file).
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*(?:(?:https?|ftp|wss?):|//|app\.)""",
                         page, re.I)
    assert not re.search(r"""url\(\s*["']?\s*(?:https?:|//)|@import""", page, re.I)


def test_html_refuses_to_overwrite_without_force(profile, tmp_path):
    out = tmp_path / "report.html"
    out.write_text("keep me")
    assert "already exists; use --force" in one_line_exit_2([profile, "--html", out])
    assert out.read_text() == "keep me"
    r = subprocess.run([CLI, "view", str(profile), "--html", str(out), "--force"],
                       env=view_env(), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert html_data(out.read_text())["format_version"] == 2
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"]  # no temporary left


BROWSER_SCRIPT = """#!/bin/sh
# Records what sonde view hands the browser, as a browser would see it.
out="$1"; shift
{{
  printf 'argv:'; for a in "$@"; do printf ' %s' "$a"; done; echo
  for fd in /proc/$$/fd/*; do printf 'fd: %s\\n' "$(readlink "$fd")"; done
  f="${{1#file://}}"
  printf 'mode: %s\\n' "$(stat -c %a "$f")"
  printf 'page: '; cat "$f"
}} > "$out.tmp"
mv "$out.tmp" "$out"
"""


def test_open_hands_the_browser_a_private_page_not_the_token(profile, tmp_path):
    """The token never appears on a command line (any local user reads those in /proc): the
    browser gets a page only the user can read, which redirects to the URL; it inherits no
    socket of the server, and the page is removed when the server stops."""
    record = tmp_path / "record.txt"
    browser = tmp_path / "browser.sh"
    browser.write_text(BROWSER_SCRIPT.format())
    browser.chmod(0o755)
    env = view_env(BROWSER=f"{browser} {record} %s", XDG_RUNTIME_DIR=tmp_path)
    with serving(profile, "--open", env=env) as (p, url, port, token):
        deadline = time.monotonic() + 20
        while not record.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        text = record.read_text()
        page_path = re.search(r"argv: file://(\S+)", text).group(1)
        assert token not in text.split("page:")[0], text
        assert "mode: 600" in text and f'content="0;url={url}"' in text
        assert not [l for l in text.splitlines() if l.startswith("fd: socket:")], text
        assert Path(page_path).parent == tmp_path
        rc, _, err = stops_cleanly(p, signal.SIGTERM)
    assert rc == 0 and err == "", err
    assert not Path(page_path).exists()


def test_open_without_a_browser_goes_on_serving(profile, tmp_path):
    env = view_env(BROWSER=str(tmp_path / "no-such-browser"), XDG_RUNTIME_DIR=tmp_path)
    with serving(profile, "--open", env=env) as (p, url, port, token):
        assert get(port, f"/?token={token}")[0] == 200
        rc, _, err = stops_cleanly(p, signal.SIGTERM)
    assert rc == 0
    assert err.count("\n") == 1 and "no browser to start" in err and "open the URL" in err
    assert list(tmp_path.iterdir()) == []


# In a real browser (Debian's chromium, playwright-core from the viewer's npm packages).
NODE_ROOT = Path(os.environ.get("VIEWER_NODE_ROOT", SOURCE / "viewer"))
CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))


def browse(url, *mode):
    if not CHROMIUM.exists():
        pytest.skip(f"no chromium at {CHROMIUM}")
    if not (NODE_ROOT / "node_modules" / "playwright-core").is_dir():
        pytest.skip(f"playwright-core not installed in {NODE_ROOT} (the viewer's npm ci)")
    r = subprocess.run(["node", HERE / "view_browser.mjs", NODE_ROOT, url, *mode],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.splitlines()[-1])


def test_browser_shows_the_page_with_the_token_and_nothing_without(profile):
    with serving(profile) as (p, url, port, token):
        page = browse(url)
        refused = browse(f"http://127.0.0.1:{port}/")
    assert page["status"] == 200 and page["errors"] == [] and page["dialogs"] == []
    assert "plain_region" in page["text"] and HOSTILE in page["text"]  # as text
    assert page["injected"] == 0
    assert all(u.startswith(f"http://127.0.0.1:{port}/") for u in page["requests"])
    assert refused["status"] == 403 and "plain_region" not in refused["text"]
    assert len(refused["requests"]) == 1  # the refusal loads nothing further


def test_browser_opens_the_html_file_offline(profile, tmp_path):
    out = tmp_path / "report.html"
    r = subprocess.run([CLI, "view", str(profile), "--html", str(out)], env=view_env(),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    page = browse(out.as_uri(), "offline")
    assert page["errors"] == [] and page["dialogs"] == [] and page["injected"] == 0
    assert "plain_region" in page["text"] and HOSTILE in page["text"]
    assert page["requests"] == [out.as_uri()]
