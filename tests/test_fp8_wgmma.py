"""8-bit float wgmma on sm_90a (CPU side): a T.gemm on float8_e4m3fn / float8_e5m2 shared tiles,
both K-major, takes the wgmma path (m64nNk32), its tiles are loaded by TMA boxes with the 8-bit
swizzle, and ptxas accepts the instructions; the shapes wgmma cannot take (a transposed operand,
K not a multiple of 32) keep mma.sync. GPU results: tests/gpu/test_fp8_wgmma_gpu.py."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

import tilelang
import tilelang.language as T

SRC = Path(__file__).resolve().parents[1] / "src"
NVCC = shutil.which("nvcc")
SM90 = "cuda -arch=sm_90a"


def fp8_matmul(M, N, K, block_M=128, block_N=128, block_K=64, a_dtype="float8_e4m3fn", b_dtype="float8_e4m3fn",
               out_dtype="float32", accum="float32", threads=128, stages=3, trans_b=True, global_dtype=None,
               a_in_registers=False):
    """C = A B^T (or A B): a pipelined GEMM with tiles of ``a_dtype`` / ``b_dtype``, A and B of those
    types in global memory too unless ``global_dtype`` names theirs (tests/test_tf32_wgmma.py: float32
    tensors, T.tfloat32 tiles); ``a_in_registers``: A goes from its shared tile to a fragment first."""

    @T.prim_func
    def main(A: T.Tensor((M, K), global_dtype or a_dtype),
             B: T.Tensor((N, K) if trans_b else (K, N), global_dtype or b_dtype),
             C: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), a_dtype)
            B_s = T.alloc_shared((block_N, block_K) if trans_b else (block_K, block_N), b_dtype)
            C_l = T.alloc_fragment((block_M, block_N), accum)
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=stages):
                T.copy(A[by * block_M, k * block_K], A_s)
                if trans_b:
                    T.copy(B[bx * block_N, k * block_K], B_s)
                else:
                    T.copy(B[k * block_K, bx * block_N], B_s)
                if a_in_registers:
                    A_f = T.alloc_fragment((block_M, block_K), a_dtype)
                    T.copy(A_s, A_f)
                    T.gemm(A_f, B_s, C_l, transpose_B=trans_b)
                else:
                    T.gemm(A_s, B_s, C_l, transpose_B=trans_b)
            T.copy(C_l, C[by * block_M, bx * block_N])

    return main


def _compile(func):
    return tilelang.compile(func, target=SM90)


@pytest.mark.parametrize("a_dtype,b_dtype", [("float8_e4m3fn", "float8_e4m3fn"), ("float8_e5m2", "float8_e5m2"),
                                             ("float8_e4m3fn", "float8_e5m2")])
def test_fp8_gemm_takes_wgmma_with_tma_boxes(a_dtype, b_dtype):
    kernel = _compile(fp8_matmul(1024, 1024, 1024, a_dtype=a_dtype, b_dtype=b_dtype))
    src = kernel.get_kernel_source()
    assert "tl::wgmma_gemm_ss_async<128, 128, 64, 1, false, true, false>" in src
    assert "tl::gemm_ss<" not in src
    assert "tl::tma_load_2d" in src
    maps = kernel.artifact.tensormaps
    assert [(t["dtype"], t["box"], t["swizzle"]) for t in maps] == [(a_dtype, [64, 128], 64), (b_dtype, [64, 128], 64)]


@pytest.mark.parametrize("block_K,swizzle", [(128, 128), (32, 32)])
def test_fp8_swizzle_follows_the_row_bytes(block_K, swizzle):
    kernel = _compile(fp8_matmul(512, 512, 512, block_K=block_K))
    assert {t["swizzle"] for t in kernel.artifact.tensormaps} == {swizzle}
    assert f"tl::wgmma_gemm_ss_async<128, 128, {block_K}," in kernel.get_kernel_source()


def test_fp8_gemm_with_an_n_major_b_keeps_mma_sync():
    # wgmma reads 8-bit operands K-major only: a K x N B stays on mma.sync
    src = _compile(fp8_matmul(512, 512, 512, trans_b=False)).get_kernel_source()
    assert "wgmma_gemm" not in src and "tl::gemm_ss<" in src


def test_fp8_wgmma_required_explains_why():
    @T.prim_func
    def main(A: T.Tensor((128, 64), "float8_e4m3fn"), B: T.Tensor((64, 128), "float8_e4m3fn"),
             C: T.Tensor((128, 128), "float32")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((128, 64), "float8_e4m3fn")
            B_s = T.alloc_shared((64, 128), "float8_e4m3fn")
            C_l = T.alloc_fragment((128, 128), "float32")
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.wgmma_gemm(A_s, B_s, C_l, clear_accum=True)
            T.wait_wgmma(0)
            T.copy(C_l, C)

    with pytest.raises(Exception, match="K-major"):
        _compile(main)


@pytest.mark.skipif(NVCC is None, reason="needs nvcc")
def test_ptxas_accepts_the_8bit_instructions(tmp_path):
    cu = tmp_path / "k.cu"
    cu.write_text("""#include "tl.h"
extern "C" __global__ void k(float* C) {
  extern __shared__ __align__(1024) unsigned char smem[];
  float acc[64];
  half h[64];
  tl::wgmma_gemm_ss<128, 128, 64, 2, false, true, true>((__nv_fp8_e4m3*)smem, (__nv_fp8_e5m2*)(smem + 8192), acc);
  tl::wgmma_gemm_ss<64, 128, 128, 1, false, true, false>((__nv_fp8_e5m2*)smem, (__nv_fp8_e5m2*)(smem + 16384), acc);
  tl::wgmma_gemm_ss<64, 128, 64, 1, false, true, false>((__nv_fp8_e4m3*)smem, (__nv_fp8_e4m3*)(smem + 16384), h);
  C[threadIdx.x] = acc[0] + acc[63] + (float)h[0];
}
""")
    subprocess.run([NVCC, "-arch=sm_90a", "-std=c++17", f"-I{SRC}", "-ptx", str(cu), "-o", str(tmp_path / "k.ptx")],
                   check=True, capture_output=True)
    subprocess.run([NVCC, "-arch=sm_90a", "-std=c++17", f"-I{SRC}", "-cubin", str(cu), "-o",
                    str(tmp_path / "k.cubin")], check=True, capture_output=True)
    ptx = (tmp_path / "k.ptx").read_text()
    found = sorted(set(re.findall(r"wgmma\.mma_async\.sync\.aligned\.(m64n\d+k\d+\.[\w.]+)", ptx)))
    assert found == ["m64n128k32.f16.e4m3.e4m3", "m64n128k32.f32.e4m3.e5m2", "m64n128k32.f32.e5m2.e5m2"]
    # k-steps: K / 32 per 64-row block (2 warpgroups x 1 block x 2 steps = 2 per thread's warpgroup)
    assert ptx.count("m64n128k32.f32.e4m3.e5m2") == 2 and ptx.count("m64n128k32.f32.e5m2.e5m2") == 4


def test_wgmma_gemm_on_8bit_operands_builds_descriptors_for_them():
    @T.prim_func
    def main(A: T.Tensor((128, 64), "float8_e4m3fn"), B: T.Tensor((128, 64), "float8_e4m3fn"),
             C: T.Tensor((128, 128), "float32")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((128, 64), "float8_e4m3fn")
            B_s = T.alloc_shared((128, 64), "float8_e4m3fn")
            C_l = T.alloc_fragment((128, 128), "float32")
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.wgmma_gemm(A_s, B_s, C_l, transpose_B=True, clear_accum=True)
            T.wait_wgmma(0)
            T.copy(C_l, C)

    src = _compile(main).get_kernel_source()
    assert "tl::wgmma_gemm_ss_desc<128, 128, 64, 1, false, true, true, 64, 64, __nv_fp8_e4m3>" in src
