"""Wide wgmma tiles (CPU: layout planning, generated source, host-evaluated descriptors).

A block tile up to 256 columns wide is one m64nNk16 instruction per k-step and 64-row block
(N = 96, 112, 160 included: never split into narrower atoms). Past 256 (to 512) it is a row of
instructions of the widest legal width W dividing N (``wgmma_inst_n``; 384 -> 2 x 192), each over
a W-column slice of B and of the accumulator, whose fragment layout does not change. The
descriptors of every slice are checked against the documented shared-memory layout by running
gemm_sm90.h's host-evaluable geometry (nvcc, no GPU).
"""

from __future__ import annotations

import re

import pytest

import tilelang
import tilelang.language as T
from tilelang.cuda.intrinsics.macro.wgmma_macro_generator import select_wgmma_inst_n
from tilelang.transform.layout_inference import wgmma_inst_n

from host_cuda import NVCC, run_host_program


def _matmul(N, block_N, trans_b, M=128, K=128, block_M=64, block_K=64):
    dtype = "float16"

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((N, K) if trans_b else (K, N), dtype),
             C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), dtype)
            B_s = T.alloc_shared((block_N, block_K) if trans_b else (block_K, block_N), dtype)
            C_l = T.alloc_fragment((block_M, block_N), "float")
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_s)
                if trans_b:
                    T.copy(B[bx * block_N, k * block_K], B_s)
                else:
                    T.copy(B[k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, C_l, transpose_B=trans_b)
            T.copy(C_l, C[by * block_M, bx * block_N])

    return main


def _gemm_calls(art):
    return re.findall(r"tl::(\w*gemm\w*)<(\d+), (\d+), (\d+),", art.source)


@pytest.mark.parametrize("n", [64, 96, 112, 128, 160, 176, 256, 384, 512, 24, 40])
def test_instruction_width_matches_upstreams_choice_where_it_is_wide(n):
    # up to 256 the whole width is one instruction (upstream's choice, and also for N % 16 == 8,
    # where upstream keeps gcd(N, 256)); past 256 the widest legal divisor, as upstream
    ours = wgmma_inst_n(n)
    assert ours == (n if n <= 256 else select_wgmma_inst_n(n))


@pytest.mark.parametrize("block_N", [96, 112, 160])
def test_odd_widths_are_one_wgmma_call_of_the_whole_width(block_N):
    art = tilelang.lower(_matmul(2 * block_N, block_N, True), "sm_90a")
    calls = _gemm_calls(art)
    assert calls and all(name.startswith("wgmma_gemm_ss") and int(n) == block_N for name, _, n, _ in calls)


@pytest.mark.parametrize("trans_b", [True, False], ids=["nt", "nn"])
def test_past_256_columns_stays_on_wgmma(trans_b):
    art = tilelang.lower(_matmul(768, 384, trans_b), "sm_90a")
    calls = _gemm_calls(art)
    assert calls and all(name.startswith("wgmma_gemm_ss") and n == "384" for name, _, n, _ in calls)


def test_past_256_with_slices_that_split_an_n_major_swizzle_slab_falls_back_to_mma():
    # 320 = 2 x 160, and 160 columns are 2.5 slabs of 64: not addressable by one descriptor
    art = tilelang.lower(_matmul(640, 320, False), "sm_90a")
    assert [name for name, *_ in _gemm_calls(art)] == ["gemm_ss"]
    art = tilelang.lower(_matmul(640, 320, True), "sm_90a")     # K-major B: any row slice works
    assert all(name.startswith("wgmma_gemm_ss") for name, *_ in _gemm_calls(art))


# ----- host-evaluated descriptors of the N slices (the documented layout of gemm_sm90.h) ------------
WIDE_SHAPES = [(64, 384, 64, False), (64, 384, 64, True), (128, 512, 32, True), (64, 320, 64, True),
               (64, 512, 128, False), (64, 96, 64, True)]


def _swizzle(addr, sw):
    return addr ^ (((addr >> 7) & (sw // 16 - 1)) << 4)


def _layout_addr(base, rows, cols, r, c):
    sw = 128 if cols * 2 % 128 == 0 else 64 if cols * 2 % 64 == 0 else 32
    w = sw // 2
    return base + _swizzle((c // w) * rows * sw + r * sw + (c % w) * 2, sw)


def _desc_addr(desc, mn, k, mn_major):
    start = (desc & 0x3FFF) << 4
    lbo = ((desc >> 16) & 0x3FFF) << 4
    sbo = ((desc >> 32) & 0x3FFF) << 4
    sw = {1: 128, 2: 64, 3: 32}[desc >> 62]
    if mn_major:
        w = sw // 2
        raw = start + (mn // w) * lbo + (mn % w) * 2 + (k // 8) * sbo + (k % 8) * sw
    else:
        raw = start + (mn // 8) * sbo + (mn % 8) * sw + k * 2
    return _swizzle(raw, sw)


@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")
def test_every_slice_descriptor_addresses_the_layout(tmp_path):
    base = 1024 * 64
    lines = [f"  dump<WgmmaShape<{m}, {n}, {k}, 1, false, {str(tb).lower()}, half, half, float>>({i});"
             for i, (m, n, k, tb) in enumerate(WIDE_SHAPES)]
    out = run_host_program(tmp_path, "wide", (
        "#include \"tl.h\"\n#include <cstdio>\nusing tl::detail::WgmmaShape;\n"
        "template <class S> void dump(int id) {\n"
        "  std::printf(\"S %d %d %d %d %d\\n\", id, S::kN, S::NI, S::kInstRegs, S::kBlockRegs);\n"
        "  for (int ks = 0; ks < S::KI; ++ks)\n"
        "    for (int ni = 0; ni < S::NI; ++ni)\n"
        f"      std::printf(\"B %d %d %d %llu\\n\", id, ks, ni, (unsigned long long)S::desc_b(S::desc_b0({base}u), "
        "ks, ni));\n"
        "}\nint main() {\n" + "\n".join(lines) + "\n  return 0;\n}\n"))
    seen = {i: set() for i in range(len(WIDE_SHAPES))}
    inst = {}
    for line in out:
        f = line.split()
        if f[0] == "S":
            i, kn, ni_count, inst_regs, block_regs = map(int, f[1:])
            n = WIDE_SHAPES[i][1]
            assert kn == wgmma_inst_n(n) and ni_count * kn == n
            assert inst_regs == kn // 2 and block_regs == n // 2     # slice ni's registers: [ni*kn/2, +kn/2)
            inst[i] = kn
            continue
        i, ks, ni, desc = map(int, f[1:])
        m, n, k, tb = WIDE_SHAPES[i]
        for c in range(inst[i]):
            col = ni * inst[i] + c
            for kk in range(16):
                row = ks * 16 + kk
                want = _layout_addr(base, n, k, col, row) if tb else _layout_addr(base, k, n, row, col)
                assert _desc_addr(desc, c, kk, not tb) == want, (WIDE_SHAPES[i], ks, ni, c, kk)
                seen[i].add((row, col))
    for i, (m, n, k, tb) in enumerate(WIDE_SHAPES):
        assert len(seen[i]) == k * n
