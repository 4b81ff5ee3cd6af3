"""T.cumsum / T.cummax with ``tl.enable_warp_scan`` (on by default since session 48): rows fewer than the block's threads
are scanned a warp each, 32 elements at a time (``tl::warp_inclusive_scan``, the chunk totals
carried from lane 31), where that takes fewer dependent steps than a thread a row, one element at
a time (upstream issue 1001's `T.cumsum(T.view(smem, (1, hidden)), dim=1)`: one row of `hidden`).
CPU only: the generated CUDA is inspected and compiled; tests/gpu/test_warp_scan_gpu.py runs it."""

import pytest

import tilelang
import tilelang.language as T
from tilelang.jit import nvcc

try:
    nvcc.find_nvcc()
    HAVE_NVCC = True
except Exception:  # noqa: BLE001
    HAVE_NVCC = False

ON = {"tl.enable_warp_scan": True}


def scan_kernel(M, N, dim=1, reverse=False, kind="sum", dtype="float32", frag=False, threads=128, guard=False):
    scan = T.cumsum if kind == "sum" else T.cummax

    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(1, threads=threads) as bx:
            S = T.alloc_shared((M, N), dtype)
            T.copy(A, S)
            if frag:
                F = T.alloc_fragment((M, N), dtype)
                T.copy(S, F)
                scan(F, dim=dim, reverse=reverse)
                T.copy(F, B)
            elif guard:
                tx = T.get_thread_binding()
                if tx < 64:
                    scan(S, dim=dim, reverse=reverse)
                T.copy(S, B)
            else:
                scan(S, dim=dim, reverse=reverse)
                T.copy(S, B)

    return main


def _source(configs=ON, **kw):
    return tilelang.lower(scan_kernel(**kw), "sm_90a", pass_configs=configs).source


def test_on_by_default_and_off_with_the_key():
    assert "tl::warp_inclusive_scan" in _source(configs=None, M=1, N=4096)
    src = _source(configs={"tl.enable_warp_scan": False}, M=1, N=4096)
    assert "warp_inclusive_scan" not in src and "cumsum_acc" in src


@pytest.mark.parametrize("kw", [dict(M=1, N=4096), dict(M=1, N=100, reverse=True), dict(M=6, N=300),
                                dict(M=300, N=3, dim=0), dict(M=1, N=4096, kind="max"),
                                dict(M=2, N=256, dtype="int32"), dict(M=4, N=128, frag=True)])
def test_few_long_rows_scan_a_warp_each(kw):
    src = _source(**kw)
    assert "tl::warp_inclusive_scan<tl::" + ("MaxOp" if kw.get("kind") == "max" else "SumOp") + ">" in src
    assert "tl::warp_lane_value(scan_v, 31)" in src and "cumsum_acc" not in src


def test_a_partial_chunk_reads_inside_the_row_and_stores_only_its_elements():
    src = _source(M=1, N=100, reverse=True)
    body = src[src.index("scan_carry[0] = 0x0p+0f"):]
    (load,) = [ln for ln in body.split("\n") if ln.strip().startswith("scan_v = (((")]
    assert "< 100) ?" in load and load.rstrip(";)").endswith("0x0p+0f/*0.000000e+00*/")   # past the end: 0
    store = body[body.index("if ("):]
    assert store.index("< 100") < store.index("= scan_v")


@pytest.mark.parametrize("why, kw", [
    ("a row a thread is as quick", dict(M=128, N=64)),
    ("16-bit sums stay serial", dict(M=1, N=256, dtype="float16")),
    ("part of a warp under a thread guard", dict(M=1, N=256, guard=True)),
    ("a block smaller than a warp", dict(M=1, N=256, threads=16)),
])
def test_the_serial_scan_stays(why, kw):
    assert "warp_inclusive_scan" not in _source(**kw), why


@pytest.mark.skipif(not HAVE_NVCC, reason="nvcc not found")
@pytest.mark.parametrize("kw", [dict(M=1, N=100, reverse=True), dict(M=300, N=3, dim=0), dict(M=1, N=512, kind="max"),
                                dict(M=2, N=256, dtype="int32"), dict(M=2, N=64, dtype="float64")])
def test_the_warp_scan_compiles(kw):
    art = tilelang.lower(scan_kernel(**kw), "sm_90a", pass_configs=ON)
    (info,) = nvcc.ptxas_info(art.source, "sm_90a", art.compile_flags).values()
    assert info.spill_stores == 0
    ptx = nvcc.compile_ptx(art.source, "sm_90a", art.compile_flags)
    assert "shfl.sync.up" in ptx and "shfl.sync.idx" in ptx
