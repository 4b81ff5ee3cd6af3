"""``stmatrix.x4`` for a whole mma / wgmma accumulator copied into a 16-bit shared tile (opt-in
``tl.enable_stmatrix``, sm_90; ``lower_copy._stmatrix``): each warp stores four 8x8 matrices per
instruction instead of one 32-bit store per element pair (an epilogue's staging tile). Checked
here: the instruction's data and address placement against the layouts (simulated), the choice,
and that ptxas takes the generated code."""

import shutil

import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang.layout import axes
from tilelang.tir_utils import i32, simplify
from tilelang.transform.lower_copy import stmatrix_row

SM90 = "cuda -arch=sm_90a"
KEY = "tl.enable_stmatrix"


@pytest.mark.parametrize("layout", [axes.wgmma_accumulator(128, 128, 2, 256), axes.wgmma_accumulator(64, 256, 1, 128),
                                    axes.wgmma_accumulator(128, 256, 2, 256, warpgroups_n=1),
                                    axes.mma_accumulator(128, 128, 2, 2, 128), axes.mma_accumulator(64, 64, 2, 2, 128)],
                         ids=["wgmma-128x128-2wg", "wgmma-64x256", "wgmma-128x256", "mma-128x128", "mma-64x64"])
def test_every_element_lands_where_its_thread_would_store_it(layout):
    """stmatrix.x4 number s of a warp: lane L's register q holds the pair at row L / 4, columns
    2 (L % 4) .. +1 of matrix q, and matrix q's row r goes to the address lane 8 q + r gives.
    Every register of every thread must land on its own tile element, each element once."""
    width = layout.shape[1]
    owners = layout.owners()
    written = np.zeros(int(np.prod(layout.shape)), dtype=int)
    for warp in range(layout.num_threads // 32):
        for s in range(layout.local_size // 8):
            rows = [[int(simplify(e)) for e in stmatrix_row(layout, i32(warp * 32 + lane), i32(s))]
                    for lane in range(32)]
            for lane in range(32):
                tid = warp * 32 + lane
                for q in range(4):
                    i, j = rows[8 * q + lane // 4]
                    for half in range(2):
                        flat = owners[tid, 8 * s + 2 * q + half]
                        assert (flat // width, flat % width) == (i, j + 2 * (lane % 4) + half)
                        written[flat] += 1
    assert (written == 1).all()


def gemm(M, N, K, bm, bn, bk, threads, dtype=T.float16, c_dtype=T.float16, pad=0):
    """A GEMM whose epilogue stages C in shared memory (``pad``: columns more than the tile's)."""
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), c_dtype)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            A_s = T.alloc_shared((bm, bk), dtype)
            B_s = T.alloc_shared((bk, bn), dtype)
            acc = T.alloc_fragment((bm, bn), T.float32)
            C_s = T.alloc_shared((bm, bn + pad), c_dtype)
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=3):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, acc)
            T.copy(acc, C_s[0:bm, 0:bn])
            T.copy(C_s[0:bm, 0:bn], C[by * bm, bx * bn])
    return main


# (whole-tile epilogues: a 128x256 tile is otherwise chunked through two 64-column tiles by default,
# stage_epilogue.chunked, whose stores stay 32-bit)
WHOLE = {"tl.enable_chunked_epilogue": False}


def source(func, target=SM90, **configs):
    return tilelang.compile(func, target=target, pass_configs={**WHOLE, **configs}).get_kernel_source()


@pytest.mark.parametrize("dtype", [T.float16, T.bfloat16])
def test_the_epilogue_tile_is_written_with_stmatrix(dtype):
    func = gemm(1024, 1024, 1024, 128, 256, 64, 256, dtype, dtype)
    src = source(func, **{KEY: True})
    body = src[src.index("tl::stmatrix_x4"):]
    assert "for (int s = 0; s < 16; ++s)" in src          # 128 registers a thread: 16 x 8
    assert body.index("tl::stmatrix_x4") < body.index("tl::fence_proxy_async") < body.index("tl::tma_store")
    plain = source(func)
    assert "stmatrix" not in plain and source(func, **{KEY: False}) == plain


def test_where_it_does_not_apply_the_pair_stores_stay():
    on = {KEY: True}
    # float32 staging tile: stmatrix moves 16-bit elements only
    f32 = gemm(1024, 1024, 1024, 128, 128, 64, 256, T.float16, T.float32)
    assert "stmatrix" not in source(f32, **on)
    # rows of 132 halves (264 bytes): a matrix row would straddle 16-byte boundaries
    assert "stmatrix" not in source(gemm(1024, 1024, 1024, 128, 128, 64, 256, pad=4), **on)
    # sm_80: no stmatrix
    assert "stmatrix" not in source(gemm(1024, 1024, 1024, 128, 128, 32, 128), target="cuda -arch=sm_80", **on)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_ptxas_takes_it():
    kernel = tilelang.compile(gemm(1024, 1024, 1024, 128, 256, 64, 256), target=SM90, pass_configs={KEY: True, **WHOLE})
    assert "stmatrix.sync.aligned.m8n8.x4.shared.b16" in kernel.get_ptx()
    info = kernel.ptxas_info()
    assert info.spill_stores == 0 and info.spill_loads == 0


def _address(expr: str, **env) -> int:
    """A CUDA index expression of the generated code, evaluated (fully parenthesised by the
    code generator; every value involved is non-negative, so C and Python agree)."""
    return eval(expr.replace("((int)threadIdx.x)", "tx"), {"__builtins__": {}}, env)


@pytest.mark.parametrize("bm, bn, threads, pad", [(128, 256, 256, 0), (64, 128, 128, 0), (128, 128, 256, 8)])
def test_the_generated_addresses_match_the_pair_stores(bm, bn, threads, pad):
    """End to end on the generated CUDA: where stmatrix puts each register pair (lane L's row
    address for matrix q, row r given by lane 8 q + r, plus 2 (L % 4)) is where the plain code's
    own 32-bit store of that pair goes, for every thread and pair (swizzled and padded tiles)."""
    import re

    func = gemm(1024, 1024, 1024, bm, bn, 64, threads, pad=pad)
    on, off = source(func, **{KEY: True}), source(func)
    m = re.search(r"for \(int s = 0; s < (\d+); \+\+s\).*?tl::stmatrix_x4\(\(&\(\(\(half\*\)smem\)\[(.+?)\]\)\), acc",
                  on, re.S)
    groups, row_expr = int(m.group(1)), m.group(2)
    store = re.search(r"\*\(half2\*\)\(\(\(half\*\)smem\) \+ (.+?)\) = __\d+;", off)
    loop = re.findall(r"for \(int (\w+) = 0; \w+ < (\d+); \+\+\w+\)", off[:store.start()])[-1]
    pair_expr, var, pairs = store.group(1), loop[0], int(loop[1])
    assert pairs == groups * 4
    for warp in range(threads // 32):
        for s in range(groups):
            rows = [_address(row_expr, tx=warp * 32 + lane, s=s) for lane in range(32)]
            assert all(r % 8 == 0 for r in rows)                 # 16-byte aligned rows
            for lane in range(32):
                for q in range(4):
                    want = _address(pair_expr, tx=warp * 32 + lane, **{var: 4 * s + q})
                    assert rows[8 * q + lane // 4] + 2 * (lane % 4) == want
