"""GPU wrappers under the preload, without a GPU: gpu_calls makes a known sequence of CUDA runtime,
driver, cuBLAS, cuBLASLt, cuDNN and NCCL calls against the stub libraries (tests/stubs/gpu), and
the profile must hold exactly those calls, their shapes, FLOPs and bytes, under the right paths."""
import os
import subprocess

import pytest

from conftest import BIN, LIB, query, routine_calls, run

PROGRAM = BIN / "gpu_calls"
KNOWN_TIME = BIN / "known_time"

pytestmark = pytest.mark.skipif(
    not PROGRAM.exists(),
    reason="gpu_calls not built: it needs the CUDA toolkit, cuDNN and NCCL headers at configure "
           "time")

# CUPTI, when it subscribes, records the runtime and driver itself and the preloaded wrappers
# stand aside (docs/gpu.md). These tests are about the wrappers: CUPTI is kept out.
NO_CUPTI = {"SONDE_CUPTI_LIBRARY": "/nonexistent/libcupti.so.13"}

# Calls per routine, as gpu_calls makes them (the stubs add the nested ones noted).
CALLS = {
    # runtime: the _ptsz/_ptds forms count as their routines
    "cudaMalloc": 2, "cudaFree": 2, "cudaMallocHost": 1, "cudaFreeHost": 1,
    "cudaMemcpy HtoD": 3, "cudaMemcpy DtoH": 1, "cudaMemcpy DtoD": 1, "cudaMemcpy Default": 1,
    "cudaMemcpy HtoH": 1, "cudaMemcpyAsync HtoD": 2, "cudaMemcpyAsync DtoH": 1,
    "cudaMemcpy2D HtoD": 1, "cudaMemset": 1, "cudaMemsetAsync": 1,
    # three by the program, two as nvcc 13 launches (__cudaLaunchKernel, _ptsz), one inside each
    # cublasSgemm_v2, two at the outer ncclGroupEnd
    "cudaLaunchKernel": 3 + 2 + 3 + 2,
    "cudaLaunchKernelExC": 1,
    "cudaDeviceSynchronize": 1, "cudaStreamSynchronize": 2, "cudaEventSynchronize": 1,
    # driver: cuCtxSynchronize once, not twice (the stub's cudaDeviceSynchronize calls it inside)
    "cuLaunchKernel": 1, "cuLaunchKernelEx": 1, "cuMemcpyHtoD_v2": 1, "cuMemcpyDtoH_v2": 1,
    "cuMemcpyDtoD_v2": 1, "cuMemcpyHtoDAsync_v2": 1, "cuMemcpyDtoHAsync_v2": 1,
    "cuMemcpyDtoDAsync_v2": 1, "cuCtxSynchronize": 1, "cuStreamSynchronize": 1,
    # cuBLAS: cublasLtMatmul once, not twice (the stub's cublasGemmEx calls it inside)
    "cublasSgemm_v2": 3, "cublasDgemm_v2": 1, "cublasZgemm_v2": 1, "cublasHgemm": 1,
    "cublasGemmEx": 1, "cublasSgemmStridedBatched": 1, "cublasSgemmBatched": 1,
    "cublasGemmStridedBatchedEx": 1, "cublasGemmBatchedEx": 1, "cublasLtMatmul": 1,
    "cublasSgemm_v2_64": 1, "cublasGemmStridedBatchedEx_64": 1,
    "cublasSgemmEx": 1, "cublasHgemmBatched": 1, "cublasHgemmStridedBatched": 1,
    "cublasCgemmStridedBatched": 1, "cublasGemmGroupedBatchedEx": 1,
    # cuDNN
    "cudnnConvolutionForward": 2, "cudnnConvolutionBackwardData": 1,
    "cudnnConvolutionBackwardFilter": 1, "cudnnConvolutionBiasActivationForward": 1,
    "cudnnPoolingForward": 1, "cudnnPoolingBackward": 1, "cudnnActivationForward": 2,
    "cudnnActivationBackward": 1, "cudnnBatchNormalizationForwardTraining": 1,
    "cudnnBatchNormalizationForwardInference": 1, "cudnnBatchNormalizationBackward": 1,
    "cudnnSoftmaxForward": 1, "cudnnSoftmaxBackward": 1, "cudnnBackendExecute": 3,
    "cudnnBatchNormalizationForwardTrainingEx": 1, "cudnnBatchNormalizationBackwardEx": 1,
    # NCCL
    # ncclBroadcast: once itself, once inside ncclBcast (NCCL's, and the stub's, implementation).
    "ncclAllReduce": 1 + 2, "ncclBroadcast": 1 + 1, "ncclReduce": 1, "ncclAllGather": 1,
    "ncclReduceScatter": 1, "ncclSend": 1, "ncclRecv": 1, "ncclAlltoAll": 1,
    "ncclGather": 1, "ncclScatter": 1, "ncclGroupStart": 2, "ncclGroupEnd": 2,
}


def gemm(m, n, k, batch=1, a=4, b=None, c=None, c_read=False, fma=2):
    """FLOPs and bytes of the GEMM model: fma*m*n*k*batch; batch*(a*mk + b*kn + c*mn[*2])."""
    b = a if b is None else b
    c = a if c is None else c
    return fma * m * n * k * batch, batch * (a * m * k + b * k * n + c * m * n * (2 if c_read else 1))


# routine -> [(m, n, k, batch, dtype, calls, flops, bytes)] per distinct shape
SHAPES = {
    "cublasSgemm_v2": [(2, 2, 2, 1, "f32", 1, *gemm(2, 2, 2, c_read=True)),  # beta on the device
                       (64, 32, 16, 1, "f32", 2, *[2 * v for v in gemm(64, 32, 16)])],
    "cublasDgemm_v2": [(8, 8, 8, 1, "f64", 1, *gemm(8, 8, 8, a=8, c_read=True))],
    "cublasZgemm_v2": [(4, 4, 4, 1, "c128", 1, *gemm(4, 4, 4, a=16, fma=8))],
    "cublasHgemm": [(16, 16, 16, 1, "f16", 1, *gemm(16, 16, 16, a=2))],
    "cublasGemmEx": [(128, 64, 32, 1, "bf16", 1, *gemm(128, 64, 32, a=2, c=4))],
    "cublasSgemmStridedBatched": [(10, 20, 30, 5, "f32", 1, *gemm(10, 20, 30, batch=5))],
    "cublasSgemmBatched": [(2, 3, 4, 7, "f32", 1, *gemm(2, 3, 4, batch=7))],
    "cublasGemmStridedBatchedEx": [(8, 8, 8, 3, "f16", 1, *gemm(8, 8, 8, batch=3, a=2))],
    "cublasGemmBatchedEx": [(4, 4, 4, 2, "f32", 1, *gemm(4, 4, 4, batch=2))],
    # The ILP64 forms: m past 2^31; beta = 1, so C read.
    "cublasSgemm_v2_64": [(3000000000, 2, 2, 1, "f32", 1, *gemm(3000000000, 2, 2))],
    "cublasSgemmEx": [(32, 16, 8, 1, "f16", 1, *gemm(32, 16, 8, a=2, c=4))],
    "cublasHgemmBatched": [(4, 4, 4, 4, "f16", 1, *gemm(4, 4, 4, batch=4, a=2))],
    "cublasHgemmStridedBatched": [(6, 6, 6, 2, "f16", 1, *gemm(6, 6, 6, batch=2, a=2))],
    "cublasCgemmStridedBatched": [(4, 4, 4, 3, "c64", 1, *gemm(4, 4, 4, batch=3, a=8, fma=8))],
    "cublasGemmStridedBatchedEx_64": [(8, 8, 8, 2, "f32", 1, *gemm(8, 8, 8, batch=2, c_read=True))],
    # A stored 32 x 64 and transposed: k comes from the descriptor's TRANSA, batch from layouts.
    "cublasLtMatmul": [(64, 48, 32, 4, "f16", 1, *gemm(64, 48, 32, batch=4, a=2))],
}

# Convolutions (float): x 2x3x32x32, w 8x3x3x3, pad 1 -> y 2x8x32x32; and x2 1x4x8x8, w2 6x2x3x3
# in 2 groups, stride 2 -> y2 1x6x3x3. FLOPs = 2 N K P Q (C/G) R S.
X, W, Y = 2 * 3 * 32 * 32, 8 * 3 * 3 * 3, 2 * 8 * 32 * 32
CONV = 2 * 2 * 8 * 32 * 32 * 3 * 3 * 3
X2, W2, Y2 = 1 * 4 * 8 * 8, 6 * 2 * 3 * 3, 1 * 6 * 3 * 3
CONV2 = 2 * 1 * 6 * 3 * 3 * 2 * 3 * 3
CONVOLUTIONS = {  # routine -> (flops, bytes)
    "cudnnConvolutionForward": (CONV + CONV2, 4 * (X + W + Y) + 4 * (X2 + W2 + Y2)),
    "cudnnConvolutionBackwardData": (CONV, 4 * (W + Y + 2 * X)),  # beta = 1: dx read too
    "cudnnConvolutionBackwardFilter": (CONV, 4 * (X + Y + W)),
    "cudnnConvolutionBiasActivationForward": (CONV, 4 * (X + W + Y + 8)),  # + bias; alpha2 = 0
}

COPY_BYTES = {
    "cudaMemcpy HtoD": 3000, "cudaMemcpy DtoH": 500, "cudaMemcpy DtoD": 64,
    "cudaMemcpy Default": 32, "cudaMemcpy HtoH": 16, "cudaMemcpyAsync HtoD": 512,
    "cudaMemcpyAsync DtoH": 128, "cudaMemcpy2D HtoD": 1000, "cudaMemset": 4096,
    "cudaMemsetAsync": 128, "cuMemcpyHtoD_v2": 300, "cuMemcpyDtoH_v2": 200, "cuMemcpyDtoD_v2": 100,
    "cuMemcpyHtoDAsync_v2": 50, "cuMemcpyDtoHAsync_v2": 40, "cuMemcpyDtoDAsync_v2": 30,
}

NCCL_BYTES = {"ncclAllReduce": 4000, "ncclBroadcast": 80 + 24, "ncclReduce": 7,
              "ncclAllGather": 200,
              "ncclReduceScatter": 100, "ncclSend": 24, "ncclRecv": 24,
              # AlltoAll: count x ranks, the rank count unknown here (a NULL communicator).
              "ncclAlltoAll": 9, "ncclGather": 44, "ncclScatter": 26}


@pytest.fixture(scope="module")
def profile(tmp_path_factory):
    db = tmp_path_factory.mktemp("gpu") / "prof.db"
    plain = run([PROGRAM], **NO_CUPTI)
    traced = run([PROGRAM], db, **NO_CUPTI)
    assert plain.returncode == 0, plain.stderr
    assert traced.returncode == 0, traced.stderr
    return db, plain, traced


def totals(db, routine):
    return query(db, "SELECT COALESCE(SUM(n.calls), 0), COALESCE(SUM(n.flops), 0), "
                     "COALESCE(SUM(n.bytes), 0) FROM nodes n JOIN routines r USING (routine_id) "
                     "WHERE r.name = ?", (routine,))[0]


def test_program_output_unchanged(profile):
    _, plain, traced = profile
    assert traced.stdout == plain.stdout == "gpu_calls: 0 failures\n"


def test_call_counts_exact(profile):
    db, _, _ = profile
    got = {name: routine_calls(db, name) for name in CALLS}
    assert got == CALLS
    # Nothing else of these kinds was recorded.
    recorded = {name for (name,) in query(
        db, "SELECT DISTINCT r.name FROM nodes n JOIN routines r USING (routine_id) "
            "WHERE r.kind IN ('cuda', 'cublas', 'cudnn', 'nccl') AND n.calls > 0")}
    assert recorded == set(CALLS)


def test_kinds_and_libraries(profile):
    db, _, _ = profile
    kinds = dict(((name, (kind, lib)) for name, kind, lib in query(
        db, "SELECT name, kind, library FROM routines WHERE kind IN "
            "('cuda', 'cublas', 'cudnn', 'nccl')")))
    assert kinds["cudaMemcpy HtoD"] == ("cuda", "cudart")
    assert kinds["cudaStreamSynchronize"] == ("cuda", "cudart")
    assert kinds["cuMemcpyDtoH_v2"] == ("cuda", "cuda")
    assert kinds["cuCtxSynchronize"] == ("cuda", "cuda")
    assert kinds["cublasGemmEx"] == ("cublas", "cublas")
    assert kinds["cublasLtMatmul"] == ("cublas", "cublasLt")
    assert kinds["cudnnBackendExecute"] == ("cudnn", "cudnn")
    assert kinds["ncclAllReduce"] == ("nccl", "nccl")


def test_roles_and_dtypes_from_the_tables(profile):
    # routines.role and dtype as the wrappers' tables state them (schema version 9): a copy's
    # role by its direction, a typed cuBLAS GEMM's element type, NULL where the table says none.
    db, _, _ = profile
    facts = {name: (dtype, role) for name, dtype, role in query(
        db, "SELECT name, dtype, role FROM routines WHERE kind IN ('cuda', 'cublas')")}
    assert facts["cudaLaunchKernel"] == (None, "launch")
    assert facts["cuLaunchKernel"] == (None, "launch")
    assert facts["cudaMemcpy HtoD"] == (None, "copy")
    assert facts["cuMemcpyDtoH_v2"] == (None, "copy")
    assert facts["cudaMemcpy DtoD"] == (None, "other")
    assert facts["cudaStreamSynchronize"] == (None, "sync")
    assert facts["cuCtxSynchronize"] == (None, "sync")
    assert facts["cudaMalloc"] == (None, "other")
    assert facts["cublasSgemm_v2"] == ("f32", None)
    assert facts["cublasZgemm_v2"] == ("c128", None)
    assert facts["cublasGemmEx"] == (None, None)
    assert facts["cublasLtMatmul"] == (None, None)


def test_copy_bytes_per_direction(profile):
    db, _, _ = profile
    for routine, nbytes in COPY_BYTES.items():
        assert totals(db, routine)[1:] == (0, nbytes), routine
    for routine in ("cudaLaunchKernel", "cudaMalloc", "cudaDeviceSynchronize", "cuLaunchKernel"):
        assert totals(db, routine)[1:] == (0, 0), routine


def test_cublas_shapes_and_flops(profile):
    db, _, _ = profile
    for routine, expected in SHAPES.items():
        rows = query(db, "SELECT s.m, s.n, s.k, s.batch, s.dtype, SUM(s.calls), SUM(s.flops), "
                         "SUM(s.bytes) FROM shapes s JOIN nodes n USING (node_id) "
                         "JOIN routines r USING (routine_id) WHERE r.name = ? "
                         "GROUP BY 1, 2, 3, 4, 5 ORDER BY 1", (routine,))
        assert rows == expected, routine
        calls = sum(e[5] for e in expected)
        assert totals(db, routine) == (calls, sum(e[6] for e in expected),
                                       sum(e[7] for e in expected)), routine
    # The transposes the calls named, read back from the arguments and the Lt descriptor.
    trans = dict(query(db, "SELECT r.name, s.trans_a || s.trans_b FROM shapes s JOIN nodes n "
                           "USING (node_id) JOIN routines r USING (routine_id) "
                           "WHERE r.name IN ('cublasLtMatmul', 'cublasDgemm_v2', 'cublasZgemm_v2')"))
    assert trans == {"cublasLtMatmul": "TN", "cublasDgemm_v2": "TN", "cublasZgemm_v2": "CN"}


def test_backend_execute_costed_from_the_plans_graph(profile):
    # Two runs of the forward-convolution plan (the descriptors' own FLOPs and bytes, and its
    # implicit-GEMM shape) and one batched matmul, read back through the backend attribute API.
    db, _, _ = profile
    mm = gemm(4, 5, 6, batch=2)
    assert totals(db, "cudnnBackendExecute") == (3, 2 * CONV + mm[0], 2 * 4 * (X + W + Y) + mm[1])
    shapes = query(db, "SELECT s.m, s.n, s.k, s.batch, s.dtype, SUM(s.calls) FROM shapes s "
                       "JOIN nodes n USING (node_id) JOIN routines r USING (routine_id) "
                       "WHERE r.name = 'cudnnBackendExecute' GROUP BY 1, 2, 3, 4, 5 ORDER BY 1")
    assert shapes == [(4, 5, 6, 2, "f32", 1), (2 * 32 * 32, 8, 27, 1, "f32", 2)]


def test_batch_norm_ex_bytes(profile):
    # y (2x8x32x32 floats) = BN(x) + z: x and z read, y written; backward reads x, y and dy and
    # writes dx and dz (betas 0: nothing read before it is written).
    db, _, _ = profile
    assert totals(db, "cudnnBatchNormalizationForwardTrainingEx") == (1, 0, 4 * 3 * Y)
    assert totals(db, "cudnnBatchNormalizationBackwardEx") == (1, 0, 4 * 5 * Y)


def test_grouped_gemm_sums_its_groups(profile):
    # Two groups of their own shapes: the FLOPs and bytes of both, C read in the group whose
    # beta is 1; no one shape to record.
    db, _, _ = profile
    g1, g2 = gemm(8, 4, 2, batch=3), gemm(16, 16, 16, batch=2, c_read=True)
    assert totals(db, "cublasGemmGroupedBatchedEx") == (1, g1[0] + g2[0], g1[1] + g2[1])
    assert query(db, "SELECT COUNT(*) FROM shapes s JOIN nodes n USING (node_id) JOIN routines r "
                     "USING (routine_id) WHERE r.name = 'cublasGemmGroupedBatchedEx'") == [(0,)]


def test_convolution_flops_and_shapes(profile):
    db, _, _ = profile
    for routine, (flops, nbytes) in CONVOLUTIONS.items():
        assert totals(db, routine)[1:] == (flops, nbytes), routine
    rows = query(db, "SELECT s.m, s.n, s.k, s.batch, s.dtype, s.flops FROM shapes s "
                     "JOIN nodes n USING (node_id) JOIN routines r USING (routine_id) "
                     "WHERE r.name = 'cudnnConvolutionForward' ORDER BY s.m")
    assert rows == [(9, 3, 18, 2, "f32", CONV2), (2 * 32 * 32, 8, 27, 1, "f32", CONV)]
    # The other cuDNN calls move bytes and compute nothing the model counts.
    assert totals(db, "cudnnPoolingForward")[1:] == (0, 4 * (Y + 2 * 8 * 16 * 16))


def test_nccl_bytes(profile):
    db, _, _ = profile
    for routine, nbytes in NCCL_BYTES.items():
        assert totals(db, routine) == (CALLS[routine], 0, nbytes), routine


def test_nccl_group_bytes_and_kernels_at_its_end(profile):
    # Inside a group the all-reduces only queue (bytes 0 there); the outer ncclGroupEnd launches
    # both kernels and carries both calls' bytes, 500 x 4 + 250 x 8.
    db, _, _ = profile
    assert totals(db, "ncclGroupEnd") == (2, 0, 4000)
    paths = dict(query(db, "SELECT path, calls FROM callpaths WHERE path LIKE '%ncclGroupEnd%'"))
    assert paths == {"step;ncclGroupEnd": 2, "step;ncclGroupEnd;cudaLaunchKernel": 2}


def test_call_paths(profile):
    db, _, _ = profile
    paths = dict(query(db, "SELECT path, calls FROM callpaths"))
    # Library calls inside the region sit under it; the runtime calls made before it do not.
    for routine in ("cublasGemmEx", "cublasLtMatmul", "cudnnConvolutionForward", "ncclAllReduce",
                    "cudnnBackendExecute"):
        assert paths.get(f"step;{routine}") == CALLS[routine], routine
        assert routine not in paths, routine
    assert paths["step;cudaMemcpy HtoD"] == 1
    assert paths["cudaMemcpy HtoD"] == 2
    assert paths["cudaStreamSynchronize"] == 2
    # A runtime call made inside cuBLAS shows beneath it (kChildren) ...
    assert paths["step;cublasSgemm_v2;cudaLaunchKernel"] == 3
    # ... a nested call of the same family is folded into the outer one ...
    assert not [p for p in paths if "cublasGemmEx;" in p]
    # ... and a driver call inside a runtime call is part of it (kSuppress).
    assert not [p for p in paths if p.startswith("cudaDeviceSynchronize;")]


def test_without_cuda_libraries(profile, db):
    # libsonde needs no CUDA library to load ...
    needed = subprocess.run(["readelf", "-d", LIB], capture_output=True, text=True).stdout
    assert "NEEDED" in needed
    for lib in ("libcuda", "libcudart", "libcublas", "libcudnn", "libnccl", "libcupti"):
        assert lib not in needed, lib
    # ... and a program without CUDA runs under it as before, its GPU routines registered but idle
    # (never called, so without rows).
    if not KNOWN_TIME.exists():
        pytest.skip("known_time not built")
    plain = run([KNOWN_TIME, 2, 100, 1])
    traced = run([KNOWN_TIME, 2, 100, 1], db)
    assert traced.returncode == plain.returncode == 0, traced.stderr
    assert query(db, "SELECT COUNT(*) FROM routines WHERE kind IN "
                     "('cuda', 'cublas', 'cudnn', 'nccl')") == [(0,)]
    assert query(db, "SELECT COUNT(*) FROM routines WHERE name = 'cblas_dgemm'") == [(1,)]


REAL = BIN / "gpu_real_descriptors"


@pytest.mark.skipif(not REAL.exists(), reason="NVIDIA's libcudart, libcublasLt and libcudnn not "
                                              "found at configure time")
def test_models_read_real_descriptors(db):
    # NVIDIA's own libraries, no GPU: the calls fail, but only after the wrappers have read the
    # real descriptors (attribute sizes and layouts as NVIDIA implements them).
    r = run([REAL], db, **NO_CUPTI)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "descriptor failures 0" in r.stdout
    assert totals(db, "cudnnConvolutionForward") == (1, CONV, 4 * (X + W + Y))
    assert totals(db, "cublasLtMatmul") == (1, *gemm(64, 48, 32, batch=4, a=2))
    shapes = query(db, "SELECT r.name, s.m, s.n, s.k, s.batch, s.trans_a || s.trans_b, s.dtype "
                       "FROM shapes s JOIN nodes n USING (node_id) JOIN routines r "
                       "USING (routine_id) ORDER BY r.name")
    assert shapes == [("cublasLtMatmul", 64, 48, 32, 4, "TN", "f16"),
                      ("cudnnConvolutionForward", 2 * 32 * 32, 8, 27, 1, "NN", "f32")]
    # The real runtime's versioned symbols (cudaMemcpy@@libcudart.so.13) are interposed too.
    assert totals(db, "cudaMemcpy HtoD") == (1, 0, 1000)
    assert routine_calls(db, "cudaDeviceSynchronize") == 1


CUPTI_STUBS = os.environ.get("SONDE_CUPTI_STUBS", "")


@pytest.mark.skipif(not CUPTI_STUBS, reason="the stub libcupti (tests/stubs/cupti) was not built")
def test_runtime_left_to_cupti_when_it_subscribes(db):
    # With CUPTI subscribed (the stub accepts sonde), the preloaded runtime and driver wrappers
    # stand aside: no call is counted twice. The library wrappers measure as before.
    r = run([PROGRAM], db, SONDE_CUPTI_LIBRARY=f"{CUPTI_STUBS}/libcupti.so.13")
    assert r.returncode == 0, r.stderr
    per_kind = dict(query(db, "SELECT r.kind, SUM(n.calls) FROM nodes n JOIN routines r "
                              "USING (routine_id) GROUP BY r.kind"))
    assert per_kind.get("cuda", 0) == 0
    for routine in ("cublasSgemm_v2", "cublasLtMatmul", "cudnnConvolutionForward", "ncclSend"):
        assert routine_calls(db, routine) == CALLS[routine], routine
