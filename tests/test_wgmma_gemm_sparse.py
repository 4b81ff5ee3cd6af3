"""T.gemm_sp (2:4 structured sparsity, mma.sp m16n8k32) on the CPU: the kernels compile (nvcc
included) to ``tl::gemm_sp_ss`` over row-major shared tiles, bad operands are located errors, and
the metadata facts of ``tilelang.cuda.intrinsics.sparse_layout``. (The file name follows the
wgmma_gemm tests; the instruction is the warp-level mma.sp, on sm_80 and sm_90a alike.)
tests/gpu/test_wgmma_gemm_gpu.py runs the kernels against torch."""

import pytest

import tilelang
import tilelang.language as T
from tilelang.cuda.intrinsics.sparse_layout import GROUP_CONFIG, get_e_factor, get_e_replicate_factor
from tilelang.diagnostics import TileLangCompileError


def sparse_kernel(M=128, N=128, K=128, bk=64, e_dtype=T.int16, accum=T.float32, trans_b=False, threads=128):
    ef = get_e_factor(T.float16, e_dtype)
    bshape = (N, K) if trans_b else (K, N)

    @T.prim_func
    def main(A_sparse: T.Tensor((M, K // 2), T.float16), E: T.Tensor((M, K // ef), e_dtype),
             B: T.Tensor(bshape, T.float16), C: T.Tensor((M, N), accum)):
        with T.Kernel(1, threads=threads):
            A_s = T.alloc_shared((M, bk // 2), T.float16)
            E_s = T.alloc_shared((M, bk // ef), e_dtype)
            B_s = T.alloc_shared((N, bk) if trans_b else (bk, N), T.float16)
            C_l = T.alloc_fragment((M, N), accum)
            T.clear(C_l)
            for k in T.Pipelined(K // bk, num_stages=2):
                T.copy(A_sparse[0, k * bk // 2], A_s)
                T.copy(E[0, k * bk // ef], E_s)
                if trans_b:
                    T.copy(B[0, k * bk], B_s)
                else:
                    T.copy(B[k * bk, 0], B_s)
                T.gemm_sp(A_s, E_s, B_s, C_l, transpose_B=trans_b)
            T.copy(C_l, C)

    return main


def test_metadata_facts():
    assert GROUP_CONFIG[T.float16] == (2, 4) and GROUP_CONFIG[T.float] == (1, 2)
    assert get_e_factor(T.float16, T.int16) == 16 and get_e_factor(T.float16, T.int8) == 8
    assert get_e_factor(T.float16, T.int32) == 32 and get_e_factor(T.float, T.int16) == 8
    assert get_e_replicate_factor(T.float16) == 2 and get_e_replicate_factor(T.int8) == 1


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("e_dtype", [T.int16, T.int8, T.int32])
def test_compiles_to_gemm_sp_ss(arch, e_dtype):
    k = tilelang.compile(sparse_kernel(e_dtype=e_dtype), target=arch)
    src = k.get_kernel_source()
    ld_e = 64 // get_e_factor(T.float16, e_dtype)
    # whole A and B tiles with 32-byte-multiple rows are stored in the mma operands' XOR swizzle
    # (the two trailing flags), which tl::gemm_sp_ss reads with ldmatrix; E stays row-major
    assert f"tl::gemm_sp_ss<128, 128, 64, 2, 2, false, false, 32, {ld_e}, 128, true, true>" in src
    assert src.count("tl::cp_async_gs<16>") >= 2 and "^" in src.split("tl::cp_async_gs<16>", 1)[1].split(";", 1)[0]


def test_transposed_b_and_half_accumulator():
    src = tilelang.compile(sparse_kernel(trans_b=True, accum=T.float16), target="sm_80").get_kernel_source()
    assert "tl::gemm_sp_ss<128, 128, 64, 2, 2, true, false, 32, 4, 64, true, true>" in src


def test_wrong_metadata_width_is_located():
    @T.prim_func
    def main(A: T.Tensor((64, 32), T.float16), E: T.Tensor((64, 8), T.int16), B: T.Tensor((64, 64), T.float16)):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((64, 32), T.float16)
            E_s = T.alloc_shared((64, 8), T.int16)
            B_s = T.alloc_shared((64, 64), T.float16)
            C_l = T.alloc_fragment((64, 64), T.float32)
            T.copy(A, A_s)
            T.copy(E, E_s)
            T.copy(B, B_s)
            T.gemm_sp(A_s, E_s, B_s, C_l)

    with pytest.raises(TileLangCompileError, match="T.gemm_sp: E must be"):
        tilelang.lower(main, target="sm_80")


def test_transposed_a_is_refused():
    with pytest.raises(Exception, match="transpose_A / transpose_E are not supported"):
        @T.prim_func
        def main(A: T.Tensor((64, 32), T.float16)):
            with T.Kernel(1, threads=128):
                A_s = T.alloc_shared((64, 32), T.float16)
                C_l = T.alloc_fragment((64, 64), T.float32)
                T.gemm_sp(A_s, A_s, A_s, C_l, transpose_A=True)
