"""The SIMT (FMA) fallback of T.gemm: which gemms take it, what it emits, and that src/tl/gemm_fma.h
computes what the accumulator fragment of layout inference says each thread holds.

The last part runs the device function on the host (g++, threadIdx faked, one call per thread)
and compares every register, placed through the fragment layout, with numpy."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang import targets
from tilelang.analysis import check
from tilelang.transform.lower_gemm_fma import fma_accumulator, fma_operand_a, fma_plan

ROOT = Path(__file__).resolve().parents[1]


def _ss_gemm(M, N, K, in_dtype, accum_dtype, threads=128, ta=False, tb=False):
    @T.prim_func
    def main(A: T.Tensor((K, M) if ta else (M, K), in_dtype), B: T.Tensor((N, K) if tb else (K, N), in_dtype),
             C: T.Tensor((M, N), accum_dtype)):
        with T.Kernel(1, threads=threads):
            A_s = T.alloc_shared((K, M) if ta else (M, K), in_dtype)
            B_s = T.alloc_shared((N, K) if tb else (K, N), in_dtype)
            C_l = T.alloc_fragment((M, N), accum_dtype)
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.clear(C_l)
            T.gemm(A_s, B_s, C_l, transpose_A=ta, transpose_B=tb)
            T.copy(C_l, C)

    return main


def _rs_gemm(M, N, K, dtype, threads=128):
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(1, threads=threads):
            A_s = T.alloc_shared((M, K), dtype)
            A_l = T.alloc_fragment((M, K), dtype)
            B_s = T.alloc_shared((K, N), dtype)
            C_l = T.alloc_fragment((M, N), dtype)
            T.copy(A, A_s)
            T.copy(A_s, A_l)
            T.copy(B, B_s)
            T.gemm(A_l, B_s, C_l, clear_accum=True)
            for i, j in T.Parallel(M, N):
                C_l[i, j] = C_l[i, j] * 2
            T.copy(C_l, C)

    return main


@pytest.mark.parametrize("a, c, arch, fma", [
    ("float64", "float64", "sm_90a", True), ("float64", "float64", "sm_80", True),
    ("float32", "float32", "sm_75", True), ("float32", "float32", "sm_80", False),
    ("bfloat16", "float32", "sm_75", True), ("bfloat16", "float32", "sm_90a", False),
    ("float16", "float32", "sm_75", False), ("int32", "int32", "sm_90a", True),
    ("int8", "int32", "sm_75", True), ("int8", "int32", "sm_80", False),
    ("bfloat16", "float16", "sm_90a", False),   # a refused accumulator stays TL0102
])
def test_which_gemms_take_the_fallback(a, c, arch, fma):
    assert targets.gemm_uses_fma(a, a, c, arch) is fma


def test_mixed_operands_are_not_a_fallback():
    assert not targets.gemm_uses_fma("float16", "bfloat16", "float32", "sm_75")


@pytest.mark.parametrize("in_dtype, accum, arch", [
    ("float32", "float32", "sm_75"), ("float64", "float64", "sm_75"), ("bfloat16", "float32", "sm_75"),
    ("float64", "float64", "sm_80"), ("float64", "float64", "sm_90a"),
])
def test_fallback_compiles_with_nvcc(in_dtype, accum, arch):
    kernel = tilelang.compile(_ss_gemm(64, 64, 32, in_dtype, accum), target={"kind": "cuda", "arch": arch},
                              out_idx=[2])
    src = kernel.get_kernel_source()
    assert "tl::gemm_fma_ss<" in src
    assert "mma" not in src.split("tl::gemm_fma_ss")[1].split(";")[0]


def test_bf16_on_turing_names_its_element_type():
    # TVM spells bf16 buffers as ushort before sm_80; the call passes the real element type
    src = tilelang.compile(_ss_gemm(64, 64, 32, "bfloat16", "float32"), target="sm_75",
                           out_idx=[2]).get_kernel_source()
    assert "__nv_bfloat16, __nv_bfloat16, float>" in src


def test_fp16_on_turing_keeps_the_tensor_cores():
    src = tilelang.compile(_ss_gemm(64, 64, 32, "float16", "float32"), target="sm_75",
                           out_idx=[2]).get_kernel_source()
    assert "tl::mma_sync_gemm_ss<" in src and "gemm_fma" not in src


def test_fp16_on_ampere_is_unchanged():
    src = tilelang.compile(_ss_gemm(64, 64, 32, "float16", "float32"), target="sm_80",
                           out_idx=[2]).get_kernel_source()
    assert "tl::gemm_ss<64, 64, 32," in src and "mma_sync_gemm" not in src and "gemm_fma" not in src


def test_register_a_and_epilogue_over_the_accumulator():
    src = tilelang.compile(_rs_gemm(32, 32, 16, "float64"), target="sm_90a", out_idx=[2]).get_kernel_source()
    assert "tl::gemm_fma_rs<32, 32, 16," in src


def test_k_need_not_be_a_multiple_of_16():
    src = tilelang.compile(_ss_gemm(32, 32, 8, "float64", "float64"), target="sm_90a",
                           out_idx=[2]).get_kernel_source()
    assert "tl::gemm_fma_ss<32, 32, 8," in src


@pytest.mark.parametrize("dtype, accum, arch", [("float64", "float64", "sm_90a"), ("float32", "float32", "sm_75"),
                                                ("bfloat16", "float32", "sm_75")])
def test_checker_accepts_fallback_types(dtype, accum, arch):
    # K = 8 is no multiple of the mma K, and 16 x 8 splits over no 4 warps: both fine on CUDA cores
    assert check(_ss_gemm(16, 8, 8, dtype, accum), arch) == []


def test_checker_still_refuses_mixed_operands():
    codes = [d.code for d in check(_ss_gemm(64, 64, 32, "float16", "float32"), "sm_75")]
    assert codes == []
    bad = [d.code for d in check(_ss_gemm(64, 64, 32, "bfloat16", "float16"), "sm_90a")]
    assert "TL0102" in bad


@pytest.mark.parametrize("M, N, K, threads", [(64, 64, 32, 128), (32, 32, 32, 128), (64, 32, 16, 128),
                                              (16, 8, 8, 128), (48, 40, 12, 64), (128, 128, 32, 256)])
def test_plan_fits_the_tile(M, N, K, threads):
    for dtype in ("float64", "float32", "bfloat16"):
        g = fma_plan(M, N, K, threads, dtype)
        assert threads % g.threads == 0 and M % g.TY == 0 and N % (g.TX * g.VN) == 0 and K % g.KV == 0
        frag = fma_accumulator(M, N, g, threads)
        owners = frag.owners()
        # every element is held, each by threads // g.threads replicas
        counts = np.bincount(owners.ravel(), minlength=M * N)
        assert (counts == threads // g.threads).all()


# ----- the device function, run on the host ---------------------------------------------------
_PRELUDE = """
#include <cstdio>
#include <cstdint>
struct FakeIdx { unsigned x; };
static FakeIdx threadIdx;
struct uint2 { unsigned x, y; };
struct uint4 { unsigned x, y, z, w; };
#define TL_DEVICE inline
"""

_MAIN = """
int main() {
  static TA A[SA];
  static TB B[SB];
  for (int i = 0; i < SA; ++i) { double v; if (scanf("%lf", &v) != 1) return 2; A[i] = (TA)v; }
  for (int i = 0; i < SB; ++i) { double v; if (scanf("%lf", &v) != 1) return 2; B[i] = (TB)v; }
  for (unsigned t = 0; t < THREADS; ++t) {
    threadIdx.x = t;
    TC C[REGS];
    for (int r = 0; r < REGS; ++r) C[r] = (TC)(1000 + r);   /* CLEAR must overwrite this */
    CALL;
    for (int r = 0; r < REGS; ++r) printf("%.17g\\n", (double)C[r]);
  }
  return 0;
}
"""


def _run_host(tmp_path, defines: dict, a_vals, b_vals):
    header = (ROOT / "src/tl/gemm_fma.h").read_text().replace('#include "common.h"', "")
    (tmp_path / "h.cpp").write_text(_PRELUDE + header + "".join(f"#define {k} {v}\n" for k, v in defines.items())
                                    + _MAIN)
    exe = tmp_path / "h"
    subprocess.run(["g++", "-std=c++17", "-O1", "-w", "-o", str(exe), str(tmp_path / "h.cpp")], check=True)
    data = "\n".join(repr(float(x)) for x in list(a_vals) + list(b_vals))
    out = subprocess.run([str(exe)], input=data, capture_output=True, text=True, check=True).stdout
    return np.array([float(x) for x in out.split()])


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs a host C++ compiler")
@pytest.mark.parametrize("M, N, K, threads, ta, tb, ctype", [
    (32, 32, 32, 128, False, False, "double"), (64, 32, 16, 128, False, True, "double"),
    (64, 32, 16, 128, True, False, "double"), (64, 32, 16, 128, True, True, "double"),
    (16, 8, 8, 128, False, False, "double"),    # fewer cells than threads: replicas
    (64, 64, 32, 128, False, False, "float"), (48, 40, 12, 64, True, True, "float"),
])
def test_ss_registers_match_the_layout(tmp_path, M, N, K, threads, ta, tb, ctype):
    dtype = "float64" if ctype == "double" else "float32"
    g = fma_plan(M, N, K, threads, dtype)
    frag = fma_accumulator(M, N, g, threads)
    rng = np.random.default_rng(0)
    a = rng.integers(-8, 8, size=(M, K)).astype(np.float64)
    b = rng.integers(-8, 8, size=(K, N)).astype(np.float64)
    a_st, b_st = (a.T if ta else a), (b.T if tb else b)
    lda, ldb = a_st.shape[1], b_st.shape[1]
    call = (f"tl::gemm_fma_ss<{M}, {N}, {K}, {g.TX}, {g.TY}, {g.VN}, {g.KV}, {str(ta).lower()}, "
            f"{str(tb).lower()}, true, {lda}, {ldb}, false, false, TA, TB, TC>(A, B, C)")
    defs = {"TA": ctype, "TB": ctype, "TC": ctype, "SA": a.size, "SB": b.size, "THREADS": threads,
            "REGS": frag.local_size, "CALL": call}
    got = _run_host(tmp_path, defs, a_st.ravel(), b_st.ravel()).reshape(threads, frag.local_size)
    want = (a @ b).ravel()
    np.testing.assert_array_equal(got, want[frag.owners()])


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs a host C++ compiler")
@pytest.mark.parametrize("M, N, K, threads, tb", [(32, 32, 16, 128, False), (64, 32, 16, 128, True)])
def test_rs_registers_match_the_layout(tmp_path, M, N, K, threads, tb):
    g = fma_plan(M, N, K, threads, "float64")
    frag_c = fma_accumulator(M, N, g, threads)
    frag_a = fma_operand_a(M, K, g, threads)
    rng = np.random.default_rng(1)
    a = rng.integers(-8, 8, size=(M, K)).astype(np.float64)
    b = rng.integers(-8, 8, size=(K, N)).astype(np.float64)
    b_st = b.T if tb else b
    # per-thread register A, from the operand layout; the harness reads thread t's slice
    a_regs = a.ravel()[frag_a.owners()]                       # threads x local
    ra = frag_a.local_size
    call = (f"tl::gemm_fma_rs<{M}, {N}, {K}, {g.TX}, {g.TY}, {g.VN}, {g.KV}, {str(tb).lower()}, true, "
            f"{b_st.shape[1]}, false, TA, TB, TC>(A + t * {ra}, B, C)")
    defs = {"TA": "double", "TB": "double", "TC": "double", "SA": a_regs.size, "SB": b.size,
            "THREADS": threads, "REGS": frag_c.local_size, "CALL": call}
    got = _run_host(tmp_path, defs, a_regs.ravel(), b_st.ravel()).reshape(threads, frag_c.local_size)
    np.testing.assert_array_equal(got, (a @ b).ravel()[frag_c.owners()])
