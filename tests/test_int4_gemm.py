"""``T.gemm`` on int4 / uint4 tiles (upstream's examples/gemm_int4, session 26): the operands are
multiplied as the bytes holding them (two elements each, element 2i in the low nibble) through
``tl::gemm_ss``'s int8 path with mma.sync m16n8k64 (``PACK``: A's code 1 int4 / 2 uint4, plus 4
times B's), so both operands are K-major and in shared memory; their shared layout is the byte
swizzle of the int8 path. GPU check: tests/gpu/test_int4_gemm_gpu.py."""

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang.layout import SharedLayout
from tilelang.tir_utils import eval_int

sys.path.insert(0, str(Path(__file__).resolve().parent))
from host_cuda import NVCC, SRC  # noqa: E402
from upstream_paths import examples as upstream_examples  # noqa: E402


def int4_gemm(M=256, N=256, K=256, bm=128, bn=128, bk=64, a_dtype=T.int4, b_dtype=T.int4, transpose_b=True,
              stages=3):
    """C = A B^T on int4 tiles, as upstream's example writes it (B given as N x K)."""
    b_shape = (N, K) if transpose_b else (K, N)
    b_tile = (bn, bk) if transpose_b else (bk, bn)

    @T.prim_func
    def main(A: T.Tensor((M, K), a_dtype), B: T.Tensor(b_shape, b_dtype), C: T.Tensor((M, N), T.int32)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), a_dtype)
            B_s = T.alloc_shared(b_tile, b_dtype)
            C_l = T.alloc_fragment((bm, bn), T.int32)
            T.clear(C_l)
            for ko in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                T.copy(A[by * bm, ko * bk], A_s)
                if transpose_b:
                    T.copy(B[bx * bn, ko * bk], B_s)
                else:
                    T.copy(B[ko * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_l, transpose_B=transpose_b)
            T.copy(C_l, C[by * bm, bx * bn])

    return main


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_the_gemm_runs_on_the_operand_bytes(arch):
    """K and the row strides go to tl::gemm_ss in bytes (64 int4 columns: 32), with PACK naming the
    element types (5: int4 x int4); nvcc builds it (tilelang.compile) for Hopper and Ampere alike."""
    src = tilelang.compile(int4_gemm(), target=f"cuda -arch={arch}").get_kernel_source()
    assert "tl::gemm_ss<128, 128, 32, 2, 2, false, true, false, 32, 32, 0, 0, 0, 0, 0, 5>(" in src
    assert "wgmma" not in src


def test_the_shared_tiles_take_the_byte_swizzle():
    """Element (r, c) of a 128 x 64 int4 tile sits in nibble c % 2 of the byte where the int8
    path's swizzle puts byte (r, c / 2) of a 128 x 32 byte tile: 16-byte chunks of 32 elements,
    XOR-permuted in pairs every 4 rows (rows of 32 bytes)."""
    nib = SharedLayout((128, 64), 1, True, elem_bits=4)
    byte = SharedLayout((128, 32), 1, True)
    assert (nib.vector, nib.group, byte.group) == (32, 2, 2)
    r, c = np.meshgrid(np.arange(128), np.arange(64), indexing="ij")
    from tvm import tirx

    rv, cv = tirx.Var("r", "int32"), tirx.Var("c", "int32")
    got = eval_int(nib.offset([rv, cv]), {rv: r, cv: c}, arrays=True)
    want = 2 * eval_int(byte.offset([rv, tirx.floordiv(cv, 2)]), {rv: r, cv: c}, arrays=True) + c % 2
    assert (got == want).all()
    assert sorted(got.ravel().tolist()) == list(range(128 * 64))


def test_an_m_or_n_major_operand_is_refused_at_the_gemm():
    with pytest.raises(tilelang.diagnostics.errors.TileLangCompileError) as err:
        tilelang.compile(int4_gemm(transpose_b=False), target="cuda -arch=sm_80")
    text = str(err.value)
    assert "TL0102" in text and "K-major" in text and "transpose_B=False" in text


@pytest.mark.skipif(NVCC is None, reason="needs nvcc")
def test_ptx_multiplies_with_m16n8k64_on_4bit_types_and_k32_on_8bit(tmp_path):
    cu = tmp_path / "k.cu"
    kernels = "".join(f"""
extern "C" __global__ void k{pack}(int* C) {{
  extern __shared__ __align__(1024) unsigned char smem[];
  int acc[32];
  tl::gemm_ss<64, 64, 32, 2, 2, false, true, true, 32, 32, 0, 0, 0, 0, 0, {pack}>((int*)smem, (int*)(smem + 2048), acc);
  int s = 0;
  for (int i = 0; i < 32; ++i) s += acc[i];
  C[threadIdx.x] = s;
}}
""" for pack in (5, 6, 10))
    # int8 through the same integer Mma (m16n8k32), signed A with unsigned B
    kernels += """
extern "C" __global__ void k8(int* C) {
  extern __shared__ __align__(1024) unsigned char smem[];
  int acc[32];
  tl::gemm_ss<64, 64, 32, 2, 2, false, true, true, 32, 32>((const int8_t*)smem, (const uint8_t*)(smem + 2048), acc);
  int s = 0;
  for (int i = 0; i < 32; ++i) s += acc[i];
  C[threadIdx.x] = s;
}
"""
    cu.write_text('#include "tl.h"\n' + kernels)
    subprocess.run([NVCC, "-arch=sm_80", "-std=c++17", f"-I{SRC}", "-ptx", str(cu), "-o", str(tmp_path / "k.ptx")],
                   check=True, capture_output=True)
    ptx = (tmp_path / "k.ptx").read_text()
    found = sorted(set(re.findall(r"mma\.sync\.aligned\.(m16n8k\d+\.row\.col\.s32\.\w+\.\w+)\.s32", ptx)))
    assert found == ["m16n8k32.row.col.s32.s8.u8", "m16n8k64.row.col.s32.s4.s4", "m16n8k64.row.col.s32.u4.s4",
                     "m16n8k64.row.col.s32.u4.u4"]
    # 64 x 64 over 2 x 2 warps, K = 32 bytes: 2 x 4 m16n8 tiles per warp, one k-step each
    assert ptx.count("mma.sync.aligned.m16n8k64") == 3 * 8 and ptx.count("mma.sync.aligned.m16n8k32") == 8
    assert "ldmatrix.sync.aligned.m8n8.x4.shared.b16" in ptx


@pytest.mark.skipif(upstream_examples("gemm_int4") is None, reason="upstream's examples/gemm_int4 not found")
def test_upstreams_example_compiles():
    sys.path.insert(0, str(upstream_examples("gemm_int4")))
    import example_tilelang_gemm_int4 as m

    kernel = tilelang.compile(m.matmul_nt_int4(1024, 1024, 1024, 128, 128, 64, 128), out_idx=-1,
                              target="cuda -arch=sm_90a")
    assert "tl::gemm_ss<128, 128, 32, 2, 2, false, true, false, 32, 32, 0, 0, 0, 0, 0, 5>(" in kernel.get_kernel_source()
