"""Gemm operands declared ``T.tfloat32`` (stored as float32) reach the mma.sync tensor cores as they
are: ``tl::gemm_ss`` / ``gemm_rs`` get TF32 bits 1 (A) and 2 (B) and skip the per-k-step rounding
(``cvt.rna.tf32``) that float32 operands get. CPU: the generated call, the allocation annotation,
the SASS-level effect through ptxas (no rounding instructions left) and nvcc compiling it."""

import re

import pytest

import tilelang
import tilelang.language as T
from tilelang.jit import nvcc

try:
    HAVE_NVCC = bool(nvcc.find_nvcc())
except Exception:  # noqa: BLE001 - no toolchain: source checks only
    HAVE_NVCC = False


def _gemm(a_dtype, b_dtype, M=64, N=64, K=64, bk=32):
    @T.prim_func
    def kernel(A: T.Tensor((M, K), T.float32), B: T.Tensor((N, K), T.float32), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((M, bk), a_dtype)
            B_s = T.alloc_shared((N, bk), b_dtype)
            C_l = T.alloc_fragment((M, N), T.float32)
            T.clear(C_l)
            for k in T.Pipelined(K // bk, num_stages=2):
                T.copy(A[0, k * bk], A_s)
                T.copy(B[0, k * bk], B_s)
                T.gemm(A_s, B_s, C_l, transpose_B=True)
            T.copy(C_l, C[0, 0])

    return kernel


def _call(src):
    return re.search(r"tl::gemm_ss<([^>]*)>", src).group(1).split(", ")


@pytest.mark.parametrize("a, b, flag", [(T.tfloat32, T.tfloat32, "3"), (T.float32, T.tfloat32, "2"),
                                        (T.tfloat32, T.float32, "1")])
def test_declared_tfloat32_operands_are_not_rounded(a, b, flag):
    args = _call(tilelang.lower(_gemm(a, b), "sm_80").source)
    # M N K WARP_M WARP_N TRANS_A TRANS_B CLEAR LDA LDB CA CB SA SB TF32
    assert len(args) == 15 and args[10:14] == ["0", "0", "0", "0"] and args[14] == flag


def test_float32_operands_keep_the_default_rounding():
    args = _call(tilelang.lower(_gemm(T.float32, T.float32), "sm_80").source)
    assert len(args) == 10     # no optional arguments: TF32 = 0, both operands rounded


def test_tfloat32_allocation_is_annotated_and_stored_as_float32():
    func = _gemm(T.tfloat32, T.float32)
    text = func.script()
    assert 'annotations={"tl.tfloat32": 1}' in text and text.count("tl.tfloat32") == 1
    assert "float A_s" not in text and 'A_s = T.alloc_buffer((64, 32), scope="shared.dyn"' in text


@pytest.mark.skipif(not HAVE_NVCC, reason="no nvcc")
def test_unrounded_operands_compile_without_rounding_instructions():
    def ptx(a, b):
        return nvcc.compile_ptx(tilelang.lower(_gemm(a, b), "sm_80").source, "sm_80")

    assert ptx(T.float32, T.float32).count("cvt.rna.tf32.f32") > 0
    assert ptx(T.tfloat32, T.tfloat32).count("cvt.rna.tf32.f32") == 0
    mixed = ptx(T.tfloat32, T.float32)
    assert 0 < mixed.count("cvt.rna.tf32.f32") < ptx(T.float32, T.float32).count("cvt.rna.tf32.f32")
    for arch in ("sm_80", "sm_90a"):
        art = tilelang.lower(_gemm(T.tfloat32, T.tfloat32), arch)
        assert nvcc.compile_cubin(art.source, arch, art.compile_flags)[:4] == b"\x7fELF"
