"""CUPTI 12 and 13 without a GPU: the stub libcupti presents itself as a given release
(tests/stubs/cupti: built as libcupti.so.13, and as CUDA 12.6's libcupti.so.12 without
cuptiSubscribe_v2; CUPTI_STUB_VERSION picks the release, whose record lengths it then lays
out). sonde must find the CUPTI of the program's runtime, read each release's records by that
release's layout, and refuse to guess at a release it does not know."""
import os
import shutil
from pathlib import Path

import pytest

from conftest import BIN, query, routine_calls, run
from test_cupti import DRIVER_DIR, STUBS, gpu_rows, notes

pytestmark = pytest.mark.skipif(
    not STUBS, reason="CUPTI headers absent at configure time: no CUPTI backend, no stub")

CUPTI12 = str(Path(STUBS) / "cuda12" / "libcupti.so.12")
CUPTI13 = str(Path(STUBS) / "libcupti.so.13")
KERNELS = sorted(["matmul(float*, float*, float*, int)"] * 3 + ["relu(float*, int)"] * 2
                 + ["directKer()"])


def run_app(db, program, mode="basic", **env):
    env["LD_LIBRARY_PATH"] = DRIVER_DIR + ":" + env.get("LD_LIBRARY_PATH", "")
    r = run([BIN / program, mode], db=db, **env)
    assert r.returncode == 0, r.stderr
    assert f"done {mode}" in r.stdout
    return r


def info(db, key):
    rows = query(db, "SELECT value FROM run_info WHERE key = ?", (key,))
    return rows[0][0] if rows else None


def assert_basic_profile(db):
    assert sorted(k[1] for k in gpu_rows(db, "kernel")) == KERNELS
    assert query(db, "SELECT kernel, calls, grid, block, registers FROM gpu_kernels "
                     "ORDER BY kernel") == [
        ("directKer()", 1, 1.0, 32.0, 8.0),
        ("matmul(float*, float*, float*, int)", 3, 128.0, 256.0, 32.0),
        ("relu(float*, int)", 2, 64.0, 128.0, 16.0)]
    copies = sorted((c[1], c[2], c[5]) for c in gpu_rows(db, "memcpy"))
    assert copies == [("memcpy DtoH", 4096, "cudaMemcpy DtoH")] + [
        ("memcpy HtoD", 1 << 20, "cudaMemcpy HtoD")] * 3
    (memset,) = gpu_rows(db, "memset")
    assert memset[2] == 512 and memset[5] == "cudaMemset"
    (started, ended), = query(db, "SELECT started_ns, ended_ns FROM processes")
    for row in gpu_rows(db):
        assert started <= row[3] <= row[4] <= ended


def test_cuda_12_records_are_read_by_cuda_12s_layout(db):
    # CUDA 12.6's CUPTI: version 24, 208-byte kernel and 88-byte memcpy records, and only
    # cuptiSubscribe to subscribe with.
    r = run_app(db, "cupti_app12", SONDE_CUPTI_LIBRARY=CUPTI12)
    assert "traced_by_cupti=1" in r.stdout
    assert_basic_profile(db)
    assert info(db, "gpu.cupti_version") == "24"
    assert info(db, "gpu.cupti_records") == (
        "CUDA 12.2-12.6: Kernel9, Memcpy5, Memset4, MemcpyPtoP4")
    assert notes(db) == []


@pytest.mark.parametrize("program,library,version,records", [
    ("cupti_app12", CUPTI12, "19", "CUDA 12.0-12.1: Kernel9, Memcpy5"),
    ("cupti_app12", CUPTI12, "27", "CUDA 12.8-12.9: Kernel9, Memcpy6"),
    ("cupti_app", CUPTI13, "130001", "CUDA 13.0: Kernel10, Memcpy6"),
    ("cupti_app", CUPTI13, "130400", "CUDA 13.1-13.4: Kernel11-13, Memcpy6-7"),
])
def test_each_release_is_read_by_its_layout(db, program, library, version, records):
    # The stub lays its records out as long as that release's are (13.4's longer still): a
    # reader that stepped or read by another release's layout would lose or garble them.
    run_app(db, program, SONDE_CUPTI_LIBRARY=library, CUPTI_STUB_VERSION=version)
    assert_basic_profile(db)
    assert info(db, "gpu.cupti_records").startswith(records)


@pytest.mark.parametrize("version,activity", [
    ("130200", "process-wide"), ("130300", "per-subscriber"), ("130400", "per-subscriber")])
def test_from_cuda_13_3_sonde_has_records_of_its_own(db, version, activity):
    # From 13.3 CUPTI traces each subscriber on its own through the subscriber-scope calls;
    # sonde uses them there, and its profile is the same as through the process-wide ones.
    run_app(db, "cupti_app", SONDE_CUPTI_LIBRARY=CUPTI13, CUPTI_STUB_VERSION=version)
    assert_basic_profile(db)
    assert info(db, "gpu.cupti_activity") == activity
    assert info(db, "gpu.dropped") == "0"


@pytest.mark.parametrize("version", ["17", "130500", "140000"])
def test_a_release_sonde_does_not_know_is_not_read(db, version):
    run_app(db, "cupti_app", SONDE_CUPTI_LIBRARY=CUPTI13, CUPTI_STUB_VERSION=version)
    (note,) = notes(db)
    assert f"CUPTI {version}" in note and "cannot read" in note
    assert gpu_rows(db) == []
    # The API callbacks still measure the CUDA calls.
    assert routine_calls(db, "cudaLaunchKernel") == 5
    assert info(db, "gpu.cupti_version") == version


def test_cuda_12s_cupti_is_found_beside_a_pip_runtime(db, tmp_path):
    # pip's CUDA 12 layout: site-packages/nvidia/cuda_runtime/lib/libcudart.so.12 and
    # site-packages/nvidia/cuda_cupti/lib/libcupti.so.12; no SONDE_CUPTI_LIBRARY, and no
    # libcupti on the loader's path.
    nvidia = tmp_path / "site-packages" / "nvidia"
    (nvidia / "cuda_runtime" / "lib").mkdir(parents=True)
    (nvidia / "cuda_cupti" / "lib").mkdir(parents=True)
    runtime = nvidia / "cuda_runtime" / "lib" / "libcudart.so.12"
    shutil.copy(Path(STUBS) / "runtime" / "libcudart_fake.so", runtime)
    # The program's own libcupti.so.12 (it drives the stub), seen under pip's path.
    os.symlink(CUPTI12, nvidia / "cuda_cupti" / "lib" / "libcupti.so.12")
    r = run_app(db, "cupti_app12", CUPTI_APP_RUNTIME=runtime)
    assert "no runtime" not in r.stdout
    assert_basic_profile(db)
    assert info(db, "gpu.cupti_version") == "24"
    assert notes(db) == []


def test_peer_copies_are_recorded(db):
    run_app(db, "cupti_app", "peer", SONDE_CUPTI_LIBRARY=CUPTI13)
    (copy,) = gpu_rows(db, "memcpy")
    assert copy[1:3] == ("memcpy PtoP", 1 << 24)
    assert copy[5:] == ("cudaMemcpyPeer", "exchange")


def test_callbacks_past_sonde_s_table_are_counted(db):
    run_app(db, "cupti_app", "newer_api", SONDE_CUPTI_LIBRARY=CUPTI13)
    (note,) = notes(db, "gpu-callbacks")
    assert note.startswith("1 CUDA API calls were not measured") and "runtime id 4000" in note
    assert [k[1] for k in gpu_rows(db, "kernel")] == ["step()"]
