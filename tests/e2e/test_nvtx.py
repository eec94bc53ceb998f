"""NVTX ranges (nvtxRangePushA/W, Pop, StartEx/End) as regions: the calls made inside appear
beneath them, and the program gets the same return values from NVTX as without sonde."""
import pytest

from conftest import BIN, CLI, integrity_ok, query, run


def test_nvtx_ranges_are_regions_with_the_calls_beneath(db):
    bare = run([BIN / "nvtx_ranges"])
    r = run([BIN / "nvtx_ranges"], db)
    assert (r.returncode, r.stdout) == (bare.returncode, bare.stdout) == (0, "0 1 1 0 1\n" * 3 + "-1 64\n")
    assert integrity_ok(db)
    assert dict(query(db, "SELECT path, calls FROM callpaths")) == {
        "step": 3, "step;forward": 3, "step;forward;cblas_sgemm": 3,
        "step;backward": 3, "step;backward;cblas_sgemm": 6}
    # The pop with nothing open is NVTX's error (-1), not a region mismatch.
    assert query(db, "SELECT COUNT(*) FROM notes WHERE topic = 'regions'") == [(0,)]


NVTX3 = BIN / "nvtx3_ranges"


@pytest.mark.skipif(not NVTX3.exists(), reason="no nvtx3 headers (CUDA's include folder) here")
def test_nvtx3_ranges_through_the_injection_library(db):
    """NVTX 3 is header-only: `sonde run` names libsonde as NVTX_INJECTION64_PATH, and its
    InitializeInjectionNvtx2 fills NVTX's function table. Pushes, pops, start/end, a domain's
    push with a registered string: regions, with what NVTX returns unchanged."""
    bare = run([NVTX3])
    r = run([CLI, "run", "-o", db, "--", NVTX3])
    assert (r.returncode, r.stdout) == (bare.returncode, bare.stdout) == (0, "-2 -2 -2 -2\n" * 3 + "-2 64\n")
    assert integrity_ok(db)
    assert dict(query(db, "SELECT path, calls FROM callpaths")) == {
        "step": 3, "step;forward": 3, "step;forward;cblas_sgemm": 3,
        "step;backward": 3, "step;backward;cblas_sgemm": 6,
        "step;update": 3, "step;update;cblas_sgemm": 3}
    assert query(db, "SELECT COUNT(*) FROM notes WHERE topic = 'regions'") == [(0,)]


def test_nvtx3_tool_of_the_users_choice_is_kept(db, tmp_path):
    """An NVTX_INJECTION64_PATH the user set (another tool) is left alone: sonde records no
    NVTX 3 range, and the run goes on."""
    if not NVTX3.exists():
        pytest.skip("no nvtx3 headers here")
    r = run([CLI, "run", "-o", db, "--", NVTX3],
            NVTX_INJECTION64_PATH=str(tmp_path / "no-such-tool.so"))
    assert r.returncode == 0
    assert query(db, "SELECT COUNT(*) FROM callpaths WHERE path LIKE 'step%'") == [(0,)]
    assert query(db, "SELECT calls FROM callpaths WHERE path = 'cblas_sgemm'") == [(12,)]
