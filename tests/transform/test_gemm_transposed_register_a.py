"""T.gemm with a register A operand stored transposed (``transpose_A=True`` on a fragment of
K x M, upstream's dsa_sparse_finetune/indexer_bwd): the fragment gets the A-operand layout with
its two dimensions swapped, and the register gemm templates (which ignore TRANS_A) read it as
usual (CPU: generated source)."""

import pytest

import tilelang
import tilelang.language as T


def _kernel(M=16, N=128, K=32, threads=128):
    @T.prim_func
    def k(P: T.Tensor((K, M), T.float32), B: T.Tensor((K, N), T.bfloat16), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(1, threads=threads):
            p_s = T.alloc_shared((K, M), T.float32)
            b_s = T.alloc_shared((K, N), T.bfloat16)
            a_f = T.alloc_fragment((K, M), T.bfloat16)
            c_f = T.alloc_fragment((M, N), T.float32)
            T.copy(P, p_s)
            T.copy(B, b_s)
            T.copy(p_s, a_f)
            T.gemm(a_f, b_s, c_f, transpose_A=True, clear_accum=True)
            T.copy(c_f, C)

    return k


def test_transposed_register_a_compiles_to_gemm_rs():
    src = tilelang.compile(_kernel(), target="cuda -arch=sm_90a",
                           pass_configs={"tl.disable_warp_specialized": True}).get_kernel_source()
    assert "tl::gemm_rs<16, 128, 32, 1, 4, true, false, true, 128>" in src


def test_transposed_register_a_layout_is_the_operand_layout_swapped():
    from tilelang.layout import mma_operand_a
    from tilelang.transform.layout_inference import _operand_a

    plain = mma_operand_a(16, 32, 1, 4, 128)
    flipped = _operand_a(plain, True)
    assert flipped.shape == (32, 16)
    # element (k, m) of the stored fragment sits where element (m, k) of A sits in the plain layout
    from tilelang.tir_utils import const_int

    for m, k in [(0, 0), (3, 5), (15, 31), (8, 17)]:
        assert const_int(flipped.thread_of([k, m])) == const_int(plain.thread_of([m, k]))
        assert const_int(flipped.local_of([k, m])) == const_int(plain.local_of([m, k]))
    assert _operand_a(plain, False) is plain
