"""wgmma with warpgroups splitting N (CPU: planning, layouts, generated source, host-evaluated
descriptors, ptxas).

When M cannot be split into 64-row blocks over all of a block's warpgroups (M = 64 with 256
threads: upstream's MLA decode kernel, block_H = 64), the warpgroups split N instead: warpgroup
``wm + WGM * wn`` computes rows ``[wm * M/WGM, ...)`` x columns ``[wn * N/WGN, ...)`` with
m64n(N/WGN)k16 instructions over its slice of B, and a register A operand is replicated over the
N warpgroups. The call is ``tl::wgmma_gemm_*<M, N, K, tl::Warpgroups<WGM, WGN>, ...>``; tiles
whose M splits over all warpgroups keep the plain warpgroup count (and their code).
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

import tilelang
import tilelang.language as T
from tilelang.layout.axes import wgmma_accumulator, wgmma_operand_a
from tilelang.transform.layout_inference import wgmma_split

MLA = Path("/work/shared/conformance/upstream/examples/deepseek_mla/example_mla_decode.py")


import tvm

from host_cuda import NVCC, run_host_program

SPLIT_N = {"tl.enable_wgmma_split_n": True}   # (the default since session 13: docs/pass_configs.md)

def small_gemm(M=64, N=128, K=64, threads=256, dtype="float16", a_in_regs=False, trans_b=False,
               policy=None):
    """One block tile M x N over K (two k-steps of 64/2), A in shared memory or registers."""
    bk = K // 2
    policy = T.GemmWarpPolicy.FullCol if policy is None else policy

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((N, K) if trans_b else (K, N), dtype),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            A_s = T.alloc_shared((M, bk), dtype)
            B_s = T.alloc_shared((N, bk) if trans_b else (bk, N), dtype)
            C_l = T.alloc_fragment((M, N), "float32")
            if a_in_regs:
                A_l = T.alloc_fragment((M, bk), dtype)
            T.clear(C_l)
            for k in T.serial(2):
                T.copy(A[0, k * bk], A_s)
                if trans_b:
                    T.copy(B[0, k * bk], B_s)
                else:
                    T.copy(B[k * bk, 0], B_s)
                if a_in_regs:
                    T.copy(A_s, A_l)
                    T.gemm(A_l, B_s, C_l, transpose_B=trans_b, policy=policy)
                else:
                    T.gemm(A_s, B_s, C_l, transpose_B=trans_b, policy=policy)
            T.copy(C_l, C[0, 0])

    return main


def _calls(src):
    return re.findall(r"tl::(\w*gemm\w*)<(\d+), (\d+), (\d+), ([^,]+(?:, \d+>)?),", src)


# ----- planning -----------------------------------------------------------------------------------
@pytest.mark.parametrize("M,N,wg,tb,want", [
    (128, 64, 2, True, (2, 1)),      # M splits: unchanged (M-split kernels keep their code)
    (64, 64, 2, True, (1, 2)),       # the MLA score gemm: 2 x m64n32
    (64, 512, 2, False, (1, 2)),     # the MLA P @ V gemm: 2 x m64n256, whole 64-column slabs
    (128, 256, 4, True, (2, 2)),     # the most along M that still splits it
    (64, 128, 4, True, (1, 4)),
    (64, 96, 2, False, None),        # N-major B: 48 columns are not whole 64-column slabs
    (64, 96, 2, True, (1, 2)),       # K-major B: any 8-row slice
    (32, 64, 2, True, None),         # no 64-row block at all
    (64, 8, 2, True, None),          # 4 columns per warpgroup
])
def test_split_choice(M, N, wg, tb, want):
    got = wgmma_split(M, N, wg, tb, "float32", 2)
    if want is None:
        assert isinstance(got, str) and f"M={M}" in got
    else:
        assert got == want


def test_float16_accumulator_needs_16_columns_per_warpgroup():
    assert wgmma_split(64, 32, 2, True, "float32", 2) == (1, 2)
    assert isinstance(wgmma_split(64, 16, 2, True, "float16", 2), str)


@pytest.mark.parametrize("M,N,wg,threads,want", [
    (256, 256, 4, 512, (2, 2)),      # 512 threads leave 128 registers: m64n256 (about 154) cannot issue
    (256, 256, 4, None, (4, 1)),     # (no thread count: the widest instruction)
    (256, 128, 4, 512, (4, 1)),      # m64n128 fits 128 registers: unchanged
    (192, 256, 3, 384, (3, 1)),      # 384 threads leave 168: unchanged
    (128, 256, 2, 256, (2, 1)),      # a warp-specialised 256-thread GEMM (+ producer): unchanged
    (256, 256, 8, 1024, (2, 4)),     # 64 registers: m64n64
])
def test_split_leaves_each_instruction_registers(M, N, wg, threads, want):
    assert wgmma_split(M, N, wg, False, "float32", 2, threads=threads) == want


def test_a_tile_no_instruction_fits_says_so():
    # 64 rows on two warpgroups: N splits in two, m64n256 each, where 1024 threads leave 64 registers
    why = wgmma_split(64, 512, 2, True, "float32", 2, threads=1024)
    assert wgmma_split(64, 512, 2, True, "float32", 2, threads=256) == (1, 2)
    assert isinstance(why, str) and "registers a thread" in why and "1024 threads leave 64" in why


@pytest.mark.skipif(not NVCC, reason="nvcc not found")
def test_a_256x256_tile_on_512_threads_compiles():
    """Upstream's dequant example tunes block 256 x 256 on 512 threads: one m64n256 instruction per
    warpgroup needed about 154 registers where __launch_bounds__(512) leaves 128, and ptxas stopped
    (C7602). Split 2 x 2 the warpgroups issue m64n128 (as upstream's own split does, with spills)."""
    @T.prim_func
    def main(A: T.Tensor((1024, 1024), "float16"), B: T.Tensor((1024, 1024), "float16"),
             C: T.Tensor((1024, 1024), "float16")):
        with T.Kernel(4, 4, threads=512) as (bx, by):
            A_s = T.alloc_shared((256, 64), "float16")
            B_s = T.alloc_shared((64, 256), "float16")
            C_l = T.alloc_fragment((256, 256), "float32")
            T.clear(C_l)
            for k in T.Pipelined(16, num_stages=2):
                T.copy(A[by * 256, k * 64], A_s)
                T.copy(B[k * 64, bx * 256], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * 256, bx * 256])

    kernel = tilelang.compile(main, target="sm_90a")
    assert "tl::Warpgroups<2, 2>" in kernel.get_kernel_source()
    assert kernel.ensure_cubin()


# ----- layouts ------------------------------------------------------------------------------------
@pytest.mark.parametrize("M,N,wgm,wgn", [(64, 64, 1, 2), (64, 512, 1, 2), (128, 256, 2, 2), (64, 128, 1, 4)])
def test_accumulator_layout_is_the_documented_one(M, N, wgm, wgn):
    T_ = 128 * wgm * wgn
    frag = wgmma_accumulator(M, N, wgm, T_, warpgroups_n=wgn)
    MW, NW = M // wgm, N // wgn
    assert frag.local_size == (MW // 64) * NW // 2 and frag.replication == 1
    for tid in range(0, T_, 37):
        wg, t = tid // 128, tid % 128
        wm, wn = wg % wgm, wg // wgm
        w, l = t // 32, t % 32
        for i in range(frag.local_size):
            mi, rest = divmod(i, NW // 2)
            j, he = divmod(rest, 4)
            h, e = divmod(he, 2)
            row = wm * MW + mi * 64 + w * 16 + h * 8 + l // 4
            col = wn * NW + j * 8 + (l % 4) * 2 + e
            assert [int(x) for x in frag.index(tid, i)] == [row, col], (tid, i)


def test_register_a_is_replicated_over_the_n_warpgroups():
    frag = wgmma_operand_a(64, 64, 1, 256, warpgroups_n=2)
    assert frag.replication == 2 and frag.local_size == 64 * 64 // 128
    one = wgmma_operand_a(64, 64, 1, 128)
    for tid in range(0, 128, 5):
        for i in range(frag.local_size):
            assert [int(x) for x in frag.index(tid, i)] == [int(x) for x in frag.index(tid + 128, i)] \
                == [int(x) for x in one.index(tid, i)]
    # without N warpgroups the layout is the one of before
    assert wgmma_accumulator(128, 64, 2, 256, warpgroups_n=1).same_as(wgmma_accumulator(128, 64, 2, 256))


# ----- generated source ---------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("a_in_regs", [False, True], ids=["ss", "rs"])
@pytest.mark.parametrize("trans_b", [False, True], ids=["nn", "nt"])
def test_m64_on_256_threads_is_wgmma_split_over_n(dtype, a_in_regs, trans_b):
    art = tilelang.lower(small_gemm(dtype=dtype, a_in_regs=a_in_regs, trans_b=trans_b), "sm_90a", pass_configs=SPLIT_N)
    calls = _calls(art.source)
    assert calls == [("wgmma_gemm_rs" if a_in_regs else "wgmma_gemm_ss", "64", "128", "32",
                      "tl::Warpgroups<1, 2>")], calls
    assert "tl::gemm_ss" not in art.source and "tl::gemm_rs" not in art.source


def test_square_policy_also_splits_n_when_m_cannot_split():
    art = tilelang.lower(small_gemm(policy=T.GemmWarpPolicy.Square), "sm_90a", pass_configs=SPLIT_N)
    assert [c[4] for c in _calls(art.source)] == ["tl::Warpgroups<1, 2>"]


def test_m_split_tiles_keep_the_plain_warpgroup_count():
    art = tilelang.lower(small_gemm(M=128), "sm_90a", pass_configs=SPLIT_N)
    assert [c[4] for c in _calls(art.source)] == ["2"]
    assert "Warpgroups" not in art.source


def test_tiles_that_split_neither_way_stay_on_mma_sync():
    art = tilelang.lower(small_gemm(M=32, N=64, K=64), "sm_90a", pass_configs=SPLIT_N)
    assert [c[0] for c in _calls(art.source)] == ["gemm_ss"]


@pytest.mark.skipif(not MLA.exists(), reason="upstream's examples are not checked out")
def test_upstream_mla_decode_takes_wgmma():
    pytest.importorskip("einops")   # the example imports it (not one of our dependencies)
    spec = importlib.util.spec_from_file_location("example_mla_decode_split_n", MLA)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    # on by default since session 13 (the example sets no pass config); off, it stays on mma.sync
    kernel = mod.flashattn(132, 128, 1, 8192, 512, 64, 64, 64, 1, (512 + 64) ** -0.5)
    assert kernel.artifact.dynamic_smem <= 227 * 1024       # (it went 128 bytes over in session 12)
    with tvm.transform.PassContext(config={"tl.enable_wgmma_split_n": False}):
        off = mod.flashattn(132, 128, 1, 4096, 512, 64, 64, 64, 1, (512 + 64) ** -0.5)   # (another size: not the memoised kernel)
    assert "wgmma_gemm" not in off.get_kernel_source()
    src = kernel.get_kernel_source()
    assert sorted(_calls(src)) == [
        ("wgmma_gemm_ss", "64", "512", "64", "tl::Warpgroups<1, 2>"),    # P @ V: 2 x m64n256k16
        ("wgmma_gemm_ss", "64", "64", "512", "tl::Warpgroups<1, 2>"),    # Q @ KV^T: 2 x m64n32k16
        ("wgmma_gemm_ss", "64", "64", "64", "tl::Warpgroups<1, 2>"),     # Q_pe @ K_pe^T
    ]


# ----- host-evaluated descriptors -------------------------------------------------------------------
# the documented shared layout and a descriptor's addressing, as tests/test_wide_wgmma.py evaluates them
from test_wide_wgmma import _desc_addr, _layout_addr  # noqa: E402


# (M, N, K, trans_b, WGM, WGN)
SPLIT_SHAPES = [(64, 64, 512, True, 1, 2), (64, 512, 64, False, 1, 2), (64, 64, 64, True, 1, 2),
                (128, 256, 64, False, 2, 2), (64, 128, 32, True, 1, 4), (64, 96, 64, True, 1, 2)]


@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")
def test_every_warpgroup_descriptor_addresses_its_columns(tmp_path):
    base = 1024 * 64
    lines = [f"  dump<WgmmaShape<{m}, {n}, {k}, {wgm}, false, {str(tb).lower()}, half, half, float, 0, 0, {wgn}>>"
             f"({i});" for i, (m, n, k, tb, wgm, wgn) in enumerate(SPLIT_SHAPES)]
    out = run_host_program(tmp_path, "split", (
        "#include \"tl.h\"\n#include <cstdio>\nusing tl::detail::WgmmaShape;\n"
        "template <class S> void dump(int id) {\n"
        "  std::printf(\"S %d %d %d %d %d\\n\", id, S::kN, S::NI, S::kElems, S::kRegs);\n"
        "  for (int wn = 0; wn < S::kWarpgroupsN; ++wn)\n"
        "    for (int ks = 0; ks < S::KI; ++ks)\n"
        "      for (int ni = 0; ni < S::NI; ++ni)\n"
        f"        std::printf(\"B %d %d %d %d %llu\\n\", id, wn, ks, ni, (unsigned long long)S::desc_b("
        f"S::desc_b0({base}u, wn), ks, ni));\n"
        "}\nint main() {\n" + "\n".join(lines) + "\n  return 0;\n}\n"))
    seen = {i: set() for i in range(len(SPLIT_SHAPES))}
    inst = {}
    for line in out:
        f = line.split()
        if f[0] == "S":
            i, kn, ni_count, elems, regs = map(int, f[1:])
            m, n, k, tb, wgm, wgn = SPLIT_SHAPES[i]
            nw = n // wgn
            assert ni_count * kn == nw and elems == regs == (m // wgm // 64) * nw // 2
            inst[i] = kn
            continue
        i, wn, ks, ni, desc = map(int, f[1:])
        m, n, k, tb, wgm, wgn = SPLIT_SHAPES[i]
        for c in range(inst[i]):
            col = wn * (n // wgn) + ni * inst[i] + c
            for kk in range(16):
                row = ks * 16 + kk
                want = _layout_addr(base, n, k, col, row) if tb else _layout_addr(base, k, n, row, col)
                assert _desc_addr(desc, c, kk, not tb) == want, (SPLIT_SHAPES[i], wn, ks, ni, c, kk)
                seen[i].add((row, col))
    for i, (m, n, k, tb, wgm, wgn) in enumerate(SPLIT_SHAPES):
        assert len(seen[i]) == k * n


@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")
def test_split_n_kernels_pass_ptxas_without_spills():
    from tilelang.jit.nvcc import ptxas_info

    for a_in_regs in (False, True):
        art = tilelang.lower(small_gemm(a_in_regs=a_in_regs, dtype="bfloat16"), "sm_90a", pass_configs=SPLIT_N)
        for info in ptxas_info(art.source, "sm_90a").values():
            assert info.spill_stores == 0 and info.spill_loads == 0, info
