"""The roofline model (tilelang.analysis.roofline): exact counts for a GEMM, an elementwise kernel and
a causal loop, the estimate on the target GPU, the kernel hover's lines, and the Run lens's
percentage of the roofline with a faked measurement (no GPU here)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

import tilelang.language as T
from tilelang.analysis import roofline
from tilelang.analysis.summary import summarize
from tilelang.tools import Analyzer
from tilelang.carver.arch import CUDA


def _gemm(M, N, K, bm, bn, bk, dtype=T.float16):
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((N, K), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), dtype)
            B_s = T.alloc_shared((bn, bk), dtype)
            C_l = T.alloc_fragment((bm, bn), T.float32)
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[bx * bn, k * bk], B_s)
                T.gemm(A_s, B_s, C_l, transpose_B=True)
            T.copy(C_l, C[by * bm, bx * bn])
    return main


@T.prim_func
def _scale(A: T.Tensor((1024, 256), T.float32), B: T.Tensor((1024, 256), T.float16)):
    with T.Kernel(1024 // 64, threads=128) as bx:
        for i, j in T.Parallel(64, 256):
            B[bx * 64 + i, j] = T.cast(A[bx * 64 + i, j] * 2.0, T.float16)


@T.prim_func
def _staged_add(A: T.Tensor((4096, 1024), T.float16), B: T.Tensor((4096, 1024), T.float16),
                C: T.Tensor((4096, 1024), T.float16)):
    with T.Kernel(4096 // 32, threads=256) as bx:
        A_s = T.alloc_shared((32, 1024), T.float16)
        B_s = T.alloc_shared((32, 1024), T.float16)
        T.copy(A[bx * 32, 0], A_s)
        T.copy(B[bx * 32, 0], B_s)
        for i, j in T.Parallel(32, 1024):
            C[bx * 32 + i, j] = A_s[i, j] + B_s[i, j]


# ----- counting ---------------------------------------------------------------------------------

def test_gemm_counts_flops_requested_dram_and_shared_bytes():
    M = N = K = 1024
    c = roofline.count([_gemm(M, N, K, 128, 128, 32)])
    assert c.flops == 2 * M * N * K and c.flops_by_dtype == {"float16": 2 * M * N * K}
    blocks, steps, tile = 8 * 8, K // 32, 128 * 32 * 2
    assert c.global_bytes == blocks * (steps * 2 * tile + 128 * 128 * 2)       # every tile request
    assert c.dram_bytes == 3 * M * N * 2                                       # A, B read, C written once
    # no layout inference here: the gemm's shared reads depend on its warp partition
    assert c.shared_bytes is None and "warp partition" in c.shared_why


@pytest.mark.parametrize("arch, a_reads, b_reads", [("sm_80", 2, 2), ("sm_90a", 1, 1)])
def test_gemm_shared_traffic_uses_the_warp_partition(arch, a_reads, b_reads):
    s = summarize(_gemm(1024, 1024, 1024, 128, 128, 32), arch)
    g = s["gemms"][0]
    # sm_80: 2 x 2 warps of mma.sync read their A rows / B columns; sm_90a: one wgmma warpgroup
    assert (g["warp_n"] if g["kind"] == "mma" else 1, g["warp_m"]) == (a_reads, b_reads)
    steps, tile, blocks = 1024 // 32, 128 * 32 * 2, 64
    copies = 2 * tile                                   # A and B tiles written into shared memory
    reads = tile * a_reads + tile * b_reads             # the gemm's operand reads
    assert s["roofline"]["shared_bytes"] == blocks * steps * (copies + reads)
    assert s["flops_per_launch"] == s["roofline"]["flops"] == 2 * 1024 ** 3


def test_elementwise_kernels_are_memory_bound_with_exact_bytes():
    c = roofline.count([_scale])
    assert (c.flops, c.global_bytes, c.dram_bytes, c.shared_bytes) == (0, 1024 * 256 * 6, 1024 * 256 * 6, 0)
    c = roofline.count([_staged_add])
    n = 4096 * 1024 * 2
    assert (c.global_bytes, c.dram_bytes) == (3 * n, 3 * n)
    assert c.shared_bytes == 2 * n + 2 * n              # copies in, element loads out
    est = roofline.on_arch(c, "sm_90a")
    assert est["bound"] == "memory" and est["device"] == "H100-SXM5-80GB"
    assert est["time_s"] == pytest.approx(3 * n / 3350e9) and est["compute_s"] == 0.0
    assert est["intensity"] == 0.0


def test_block_dependent_trip_count_is_averaged_over_the_grid():
    @T.prim_func
    def causal(Q: T.Tensor((1024, 64), T.float16), K: T.Tensor((1024, 64), T.float16),
               O: T.Tensor((1024, 64), T.float32)):
        with T.Kernel(8, threads=128) as bx:
            Q_s = T.alloc_shared((128, 64), T.float16)
            K_s = T.alloc_shared((128, 64), T.float16)
            S = T.alloc_fragment((128, 128), T.float32)
            T.copy(Q[bx * 128, 0], Q_s)
            for k in T.Pipelined(T.min(8, bx + 1), num_stages=1):
                T.copy(K[k * 128, 0], K_s)
                T.clear(S)
                T.gemm(Q_s, K_s, S, transpose_B=True)
            T.copy(S[0:128, 0:64], O[bx * 128, 0])

    c = roofline.count([causal])
    visits = sum(min(8, b + 1) for b in range(8))       # 36 of the 64 (block, k) pairs
    assert c.flops == visits * 2 * 128 * 128 * 64
    assert c.global_bytes == 8 * 128 * 64 * 2 + visits * 128 * 64 * 2 + 8 * 128 * 64 * 4


def test_symbolic_sizes_say_why_there_is_no_estimate():
    n = T.dynamic("n")

    @T.prim_func
    def dyn(A: T.Tensor((n, 64), T.float16), B: T.Tensor((n, 64), T.float16)):
        with T.Kernel(T.ceildiv(n, 64), threads=128) as bx:
            S = T.alloc_shared((64, 64), T.float16)
            T.copy(A[bx * 64, 0], S)
            T.copy(S, B[bx * 64, 0])

    with pytest.raises(ValueError, match=r"grid dimension blockIdx.x .* not a constant .*static shapes"):
        roofline.count([dyn])
    r = summarize(dyn, "sm_90a")["roofline"]
    assert "time_s" not in r and "static shapes" in r["no_estimate"]


def test_analyzer_api_and_hover_read_the_same_counts():
    func = _gemm(2048, 2048, 2048, 128, 128, 64)
    api = Analyzer.analysis(func, CUDA("sm_90a"))
    hov = summarize(func, "sm_90a")["roofline"]
    assert (api.total_flops, api.total_global_bytes, api.dram_bytes) == \
        (hov["flops"], hov["global_bytes"], hov["dram_bytes"])
    assert api.estimated_time == pytest.approx(hov["time_s"]) and api.bound == hov["bound"] == "compute"
    assert api.compute_time == pytest.approx(2 * 2048 ** 3 / 989.4e12)
    # the API has no layout inference: the gemm's shared reads are left open, the hover has them
    assert api.total_shared_bytes is None and hov["shared_bytes"] > 0
    assert Analyzer.analysis(_staged_add, CUDA("sm_90a")).total_shared_bytes == 4 * 4096 * 1024 * 2


def test_device_name_picks_the_product():
    c = roofline.count([_scale])
    h100, h200 = roofline.on_arch(c, "sm_90a"), roofline.on_arch(c, "sm_90a", "NVIDIA H200")
    assert (h100["bandwidth_gbps"], h200["bandwidth_gbps"]) == (3350.0, 4800.0)
    assert "no_estimate" in roofline.on_arch(c, "sm_89")
    assert roofline.percent_of_roofline(1e-3, 2e-3) == 50.0 and roofline.percent_of_roofline(0, 1) is None


# ----- the hover and the Run lens -----------------------------------------------------------------

def test_kernel_hover_shows_the_roofline_lines():
    from tilelang_lsp import hover

    text = hover.kernel_markdown(summarize(_gemm(1024, 1024, 1024, 128, 128, 32), "sm_90a"), "f()", None)
    assert "- work per launch: 2.15 GFLOP (T.gemm, float16)" in text
    assert "**6.29 MB from DRAM**" in text and "35.7 MB requested" in text
    assert "- shared-memory traffic: 67.1 MB" in text
    assert "- arithmetic intensity: **341.3 FLOP/B** (ridge point 295)" in text
    assert "- roofline on H100-SXM5-80GB (sm_90a): **2.17 µs, compute-bound**" in text
    text = hover.kernel_markdown(summarize(_scale, "sm_90a"), None, None)
    assert "no T.gemm (elementwise arithmetic is not counted)" in text
    assert "**0.47 µs, memory-bound** (no tensor-core work; memory 0.47 µs at 3350 GB/s)" in text


def _fake_gpu(monkeypatch, ms: float):
    """What ``run_kernel`` needs from a GPU, faked: torch sees one, compile and the Profiler return
    stand-ins, the measured median is ``ms``."""
    import torch

    import tilelang
    import tilelang.profiler
    from tilelang_lsp import worker_tools

    class Profiler:
        def __init__(self, kernel):
            self.kernel = kernel

        def do_bench(self):
            return ms

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    stand_in = SimpleNamespace(artifact=SimpleNamespace(arch="sm_90a"))
    monkeypatch.setattr(tilelang, "compile", lambda func, **kw: stand_in)
    monkeypatch.setattr(tilelang.profiler, "Profiler", Profiler)
    monkeypatch.setattr(worker_tools, "_device_name", lambda: "NVIDIA H200")
    monkeypatch.setattr(worker_tools, "_tensor_bytes", lambda prof: 0)


ELEMENTWISE = '''
import tilelang
import tilelang.language as T

# tilelang: check add(M=8192, N=4096)
@tilelang.jit(out_idx=[-1])
def add(M, N, block=32):
    @T.prim_func
    def kernel(A: T.Tensor((M, N), "float16"), B: T.Tensor((M, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(M, block), threads=256) as bx:
            for i, j in T.Parallel(block, N):
                C[bx * block + i, j] = A[bx * block + i, j] + B[bx * block + i, j]
    return kernel
'''


def test_run_lens_reports_the_percentage_of_the_roofline(monkeypatch, tmp_path):
    from tilelang_lsp import hover, lenses, worker_tools
    from tilelang_lsp.worker_check import CheckService

    path = tmp_path / "add.py"
    path.write_text(ELEMENTWISE)
    nbytes = 3 * 8192 * 4096 * 2
    predicted = nbytes / 4800e9                     # the H200's roofline: memory-bound
    _fake_gpu(monkeypatch, ms=predicted * 1e3 / 0.78)
    data = worker_tools.run_kernel(CheckService(), {"path": str(path), "text": ELEMENTWISE, "factory": "add"})
    assert data["ran"] and data["error"] is None, data
    assert data["roofline"]["dram_bytes"] == nbytes and data["roofline"]["device"] == "H200-SXM-141GB"
    assert data["roofline_percent"] == pytest.approx(78.0)
    assert lenses.run_title(data) == "53.8 µs, 78 % of roofline (memory-bound)"
    report = lenses.command_result("run", data)["report"]
    assert "- **78 % of roofline**: predicted 41.9 µs on H200-SXM-141GB, memory-bound" in report
    model = SimpleNamespace(factories=[SimpleNamespace(first_line=5, name="add")])
    runs = {("file:///add.py", "add"): data}
    titles = [x["title"] for x in lenses.lenses_for(model, "file:///add.py", "sm_90a", runs)]
    assert titles == ["▶ Compile for sm_90a", "▶ Run · last: 53.8 µs, 78 % of roofline (memory-bound)"]
    assert [x["title"] for x in lenses.lenses_for(model, "file:///add.py", "sm_90a")][1] == "▶ Run"
    # the kernel hover after the run: the static estimate on sm_90a's part, then the measured percentage
    text = hover.kernel_markdown(summarize(_scale, "sm_90a"), None, None, ran=data)
    assert ("- last Run: 53.8 µs on NVIDIA H200, **78 % of roofline** (memory-bound, 41.9 µs on "
            "H200-SXM-141GB)") in text
    assert math.isclose(data["gbps"], 0.0)


def test_trip_counts_through_binds_and_enclosing_loops():
    @T.prim_func
    def tri(A: T.Tensor((4, 128), T.float32), B: T.Tensor((4, 128), T.float32)):
        with T.Kernel(4, threads=128) as bx:
            for i in T.serial(7):                       # 64 + 32 + ... + 1 = 127 elements over i
                n = 128 // (1 << (i + 1))
                for j in T.serial(n):
                    B[bx, j] = A[bx, j]

    c = roofline.count([tri])
    assert c.global_bytes == 4 * (64 + 32 + 16 + 8 + 4 + 2 + 1) * 8

    @T.prim_func
    def data_dependent(L: T.Tensor((4,), T.int32), A: T.Tensor((4, 128), T.float32)):
        with T.Kernel(4, threads=128) as bx:
            n = L[bx]
            for j in T.serial(n):
                A[bx, j] = 0.0

    with pytest.raises(ValueError, match=r"loop 'j' is n, not a constant .*values read from a tensor"):
        roofline.count([data_dependent])


def test_gemm_sp_counts_dense_equivalent_flops_at_twice_the_peak():
    @T.prim_func
    def sp(A: T.Tensor((128, 64), T.float16), E: T.Tensor((128, 8), T.uint16), B: T.Tensor((128, 128), T.float16),
           C: T.Tensor((128, 128), T.float32)):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((128, 64), T.float16)
            E_s = T.alloc_shared((128, 8), T.uint16)
            B_s = T.alloc_shared((128, 128), T.float16)
            C_l = T.alloc_fragment((128, 128), T.float32)
            T.copy(A, A_s)
            T.copy(E, E_s)
            T.copy(B, B_s)
            T.clear(C_l)
            T.gemm_sp(A_s, E_s, B_s, C_l)
            T.copy(C_l, C)

    c = roofline.count([sp])
    assert c.flops_by_dtype == {"float16 (2:4 sparse)": 2 * 128 * 128 * 128} and c.shared_bytes is None
    est = roofline.estimate(c, 3350.0, {"float16": 989.4}.get)
    assert est.compute_s == pytest.approx(2 * 128 ** 3 / (2 * 989.4e12))
