"""NVTX ranges (nvtxRangePushA/W, Pop, StartEx/End) as regions: the calls made inside appear
beneath them, and the program gets the same return values from NVTX as without sonde."""
from conftest import BIN, integrity_ok, query, run


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
