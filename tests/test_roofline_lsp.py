"""The roofline over a real ``tilelang-lsp`` process on stdio: the ``T.Kernel`` hover of a GEMM and of
an elementwise kernel (bound with a ``# tilelang: check`` pragma) shows FLOPs, bytes, intensity and
the predicted time and bound; after a Run lens (the tools worker's GPU faked by
``tests/fixtures/roofline_fake_gpu/sitecustomize.py``: a measured median of 0.1 ms on an "NVIDIA
H200"), the Run lens's title and the kernel hover show the measured time's percentage of the roofline."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "lsp"))

from lsp_testing import Doc, start_server  # noqa: E402

pytestmark = pytest.mark.timeout(300)

FAKE_MS = 0.1
SOURCE = '''"""Roofline hover fixture."""

import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def matmul(M, N, K, block_M=128, block_N=128, block_K=32, num_stages=3, threads=128):
    @T.prim_func
    def kernel(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), "float16")
            B_shared = T.alloc_shared((block_K, block_N), "float16")
            C_local = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return kernel


# tilelang: check add(M=8192, N=4096)
@tilelang.jit(out_idx=[-1])
def add(M, N, block=32):
    @T.prim_func
    def kernel(A: T.Tensor((M, N), "float16"), B: T.Tensor((M, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(M, block), threads=256) as bx:
            for i, j in T.Parallel(block, N):
                C[bx * block + i, j] = A[bx * block + i, j] + B[bx * block + i, j]

    return kernel


kernel = matmul(4096, 4096, 4096)
'''


@pytest.fixture(scope="module")
def doc(tmp_path_factory):
    folder = tmp_path_factory.mktemp("roofline")
    saved = {k: os.environ.get(k) for k in ("PYTHONPATH", "TILELANG_TEST_FAKE_RUN_MS")}
    fake = HERE / "fixtures" / "roofline_fake_gpu"
    os.environ["PYTHONPATH"] = os.pathsep.join([str(fake), saved["PYTHONPATH"] or ""])
    os.environ["TILELANG_TEST_FAKE_RUN_MS"] = str(FAKE_MS)
    try:
        client = start_server(folder)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    path = folder / "roofline_kernels.py"
    path.write_text(SOURCE)
    d = Doc(client, path)
    assert d.diagnostics(timeout=180) == []
    yield d
    d.close()
    assert client.shutdown() == 0


def _hover(doc, needle: str, nth: int = 0) -> str:
    line, ch = doc.position(needle, 3, nth)
    found = doc.client.at("textDocument/hover", doc.uri, line, ch)
    assert found is not None, f"no hover on {needle!r}"
    return found["contents"]["value"]


def test_kernel_hover_shows_the_roofline_of_a_gemm(doc):
    text = _hover(doc, "T.Kernel", 0)
    assert "- work per launch: 137 GFLOP (T.gemm, float16)" in text     # 2 * 4096^3
    assert "**101 MB from DRAM**" in text                                 # A, B read and C written once
    assert "- arithmetic intensity: **1365.3 FLOP/B** (ridge point 295)" in text
    assert "- roofline on H100-SXM5-80GB (sm_90a): **139 µs, compute-bound**" in text
    # 1024 blocks x 128 k-steps x (two 8 KiB tiles copied in, read once each by the one wgmma warpgroup)
    assert "- shared-memory traffic: 4.29 GB (tile copies and gemm operand reads per warp)" in text


def test_kernel_hover_shows_the_roofline_of_an_elementwise_kernel(doc):
    text = _hover(doc, "T.Kernel", 1)
    assert "no T.gemm (elementwise arithmetic is not counted)" in text
    assert "201 MB requested from global memory by the blocks, **201 MB from DRAM**" in text
    assert "- roofline on H100-SXM5-80GB (sm_90a): **60.1 µs, memory-bound**" in text
    assert "checked with add(M=8192, N=4096)" in text


def test_run_lens_shows_the_percentage_of_the_roofline(doc):
    client = doc.client
    result = client.request("workspace/executeCommand", {"command": "tilelang.run", "arguments": [doc.uri, "add"]},
                            timeout=240)
    data = result["data"]
    assert data.get("ran"), result["report"]
    # 201 MB at the H200's 4.8 TB/s: 41.9 us predicted, 100 us measured
    assert data["roofline"]["device"] == "H200-SXM-141GB" and data["roofline_percent"] == pytest.approx(41.94, abs=0.01)
    assert "**42 % of roofline**: predicted 41.9 µs on H200-SXM-141GB, memory-bound" in result["report"]
    found = client.request("textDocument/codeLens", {"textDocument": {"uri": doc.uri}})
    titles = [lens["command"]["title"] for lens in found]
    assert "▶ Run · last: 100 µs, 42 % of roofline (memory-bound)" in titles
    assert titles.count("▶ Run") == 1                                    # the GEMM factory has not run
    text = _hover(doc, "T.Kernel", 1)
    assert "- last Run: 100 µs on NVIDIA H200, **42 % of roofline** (memory-bound, 41.9 µs on H200-SXM-141GB)" in text
    assert "last Run" not in _hover(doc, "T.Kernel", 0)
