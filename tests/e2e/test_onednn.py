"""oneDNN primitives under the preload: PyTorch's CPU convolutions reach dnnl_primitive_execute,
and each is recorded under its kind and direction with the exact FLOPs, bytes and GEMM view."""
import os
import subprocess
from pathlib import Path

import pytest

from conftest import query, routine_calls, run

PYTHON = "/usr/bin/python3"  # Debian's, the one python3-torch is built for
SCRIPT = Path(__file__).parent / "programs" / "torch_conv.py"
LIBDNNL = Path("/usr/lib/x86_64-linux-gnu/libdnnl.so.2")

# The script's two convolutions as implicit GEMMs (M = N*OH*OW, N = OC/g, K = IC/g*KH*KW,
# g GEMMs): FLOPs 2*M*N*K*g; bytes 4 * (src + weights + bias + dst elements).
FWD_A = dict(m=2 * 16 * 16, n=8, k=3 * 3 * 3, batch=1, flops=221184, bytes=4 * (1536 + 216 + 8 + 4096))
FWD_B = dict(m=4 * 4 * 4, n=3, k=4 * 3 * 5, batch=2, flops=46080, bytes=4 * (3840 + 360 + 384))


def torch_with_mkldnn():
    if not os.access(PYTHON, os.X_OK) or not LIBDNNL.exists():
        return False
    probe = subprocess.run([PYTHON, "-c", "import torch; print(torch.backends.mkldnn.is_available())"],
                           capture_output=True, text=True)
    return probe.returncode == 0 and probe.stdout.strip() == "True"


pytestmark = pytest.mark.skipif(not torch_with_mkldnn(),
                                reason="Debian's python3-torch with oneDNN (libdnnl.so.2) not installed")


@pytest.fixture(scope="module")
def profile(tmp_path_factory):
    db = tmp_path_factory.mktemp("onednn") / "prof.db"
    plain = run([PYTHON, SCRIPT])
    traced = run([PYTHON, SCRIPT], db)
    assert plain.returncode == 0, plain.stderr
    assert traced.returncode == 0, traced.stderr
    if not query(db, "SELECT 1 FROM routines WHERE name = 'dnnl:primitive'"):
        pytest.skip("libsonde was built without the oneDNN headers (libdnnl-dev)")
    return db, plain, traced


def totals(db, routine):
    return query(db, "SELECT SUM(n.calls), SUM(n.flops), SUM(n.bytes) FROM nodes n "
                     "JOIN routines r USING (routine_id) WHERE r.name = ?", (routine,))[0]


def test_output_unchanged(profile):
    _, plain, traced = profile
    assert traced.stdout == plain.stdout


def test_routines_are_onednn_kind(profile):
    db, _, _ = profile
    rows = query(db, "SELECT DISTINCT kind, library FROM routines WHERE name LIKE 'dnnl:%'")
    assert rows == [("onednn", "dnnl")]


def test_forward_convolutions_exact(profile):
    db, _, _ = profile
    calls, flops, nbytes = totals(db, "dnnl:convolution_fwd")
    assert calls == 4
    assert flops == 3 * FWD_A["flops"] + FWD_B["flops"]
    assert nbytes == 3 * FWD_A["bytes"] + FWD_B["bytes"]


def test_backward_convolutions_exact(profile):
    db, _, _ = profile
    # The backward passes do the forward's multiply-adds, over the same tensors.
    for routine in ("dnnl:convolution_bwd_data", "dnnl:convolution_bwd_weights"):
        assert totals(db, routine) == (1, FWD_B["flops"], FWD_B["bytes"])


def test_shapes_are_implicit_gemms(profile):
    db, _, _ = profile
    rows = query(db, "SELECT s.m, s.n, s.k, s.batch, s.dtype, SUM(s.calls), SUM(s.flops) "
                     "FROM shapes s JOIN nodes n USING (node_id) JOIN routines r USING (routine_id) "
                     "WHERE r.name = 'dnnl:convolution_fwd' GROUP BY 1, 2, 3, 4, 5 ORDER BY 1 DESC")
    assert rows == [
        (FWD_A["m"], FWD_A["n"], FWD_A["k"], 1, "f32", 3, 3 * FWD_A["flops"]),
        (FWD_B["m"], FWD_B["n"], FWD_B["k"], 2, "f32", 1, FWD_B["flops"]),
    ]


def test_layout_reorders_and_library_recorded(profile):
    db, _, _ = profile
    # ideep moves tensors in and out of oneDNN's blocked layouts: reorders, with bytes, no FLOPs.
    assert routine_calls(db, "dnnl:reorder") > 0
    assert totals(db, "dnnl:reorder")[1] == 0
    info = dict(query(db, "SELECT key, value FROM run_info WHERE key LIKE 'onednn.%'"))
    assert info["onednn.version"].startswith("2.")
    assert "libdnnl" in info["onednn.library"]


BF16_MATMUL = """\
import torch
x, w = torch.randn(64, 256), torch.randn(256, 128)
with torch.autocast("cpu", dtype=torch.bfloat16):
    for _ in range(5):
        y = torch.nn.functional.linear(x, w.t())
print(y.dtype)
"""


def test_shapes_of_a_bf16_run_name_its_gemms(tmp_path):
    """oneDNN keeps shapes for f32 only: a bf16 run's matmuls have FLOPs and no shape, and
    `sonde shapes` said "no GEMM-like calls recorded" of a red-team run's 480 dnnl:matmul calls
    (34.6 GFLOP). It names them."""
    script = tmp_path / "bf16.py"
    script.write_text(BF16_MATMUL)
    db = tmp_path / "bf16.db"
    r = run([PYTHON, script], db)
    assert r.returncode == 0 and r.stdout == "torch.bfloat16\n", r.stderr
    calls = query(db, "SELECT SUM(n.calls), SUM(n.flops) FROM nodes n JOIN routines r "
                      "USING (routine_id) WHERE r.kind = 'onednn' AND n.flops > 0")[0]
    if not calls[0]:
        pytest.skip("this oneDNN ran no FLOP-counted bf16 primitive")
    assert not query(db, "SELECT 1 FROM shapes")
    from conftest import CLI
    out = subprocess.run([CLI, "shapes", str(db)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"no GEMM shapes recorded: {calls[0]} FLOP-counted calls of "
                                 f"dnnl:"), out.stdout
    assert f"({calls[1] / 1e9:.1f} GFLOP)" in out.stdout, out.stdout
    # Beside f32 GEMMs with shapes, the bf16 ones are said under the table.
    script.write_text(BF16_MATMUL + "z = torch.nn.functional.linear(x, w.t())\n")
    mixed = tmp_path / "mixed.db"
    r = run([PYTHON, script], mixed)
    assert r.returncode == 0, r.stderr
    out = subprocess.run([CLI, "shapes", str(mixed)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and query(mixed, "SELECT COUNT(*) FROM shapes")[0][0] > 0
    assert out.stdout.splitlines()[-1].startswith("also "), out.stdout
