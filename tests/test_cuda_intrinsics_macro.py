"""tilelang.cuda.intrinsics.macro: the TensorCoreIntrinEmitter family (CPU: lane arithmetic,
generated CUDA, nvcc), the wgmma descriptor helpers and the gemm implementation registry."""

import pytest

import tilelang
import tilelang.language as T
from tilelang.cuda.intrinsics.layout.utils import (get_ldmatrix_offset, mma_load_a_index, mma_load_b_index,
                                                   mma_store_index_map)
from tilelang.cuda.intrinsics.macro.mma_macro_generator import TensorCoreIntrinEmitter
from tilelang.cuda.intrinsics.macro.mma_sm75_macro_generator import TensorCoreIntrinEmitterSM75
from tilelang.cuda.intrinsics.macro.wgmma_macro_generator import compute_gmma_descriptor, select_wgmma_inst_n


def _ldmatrix_element(matrix, dtype, bits, transposed, lane, e):
    """Where ldmatrix.x4 (as the emitter addresses it) puts stored element -> register e of lane."""
    p = 32 // bits
    reg, within = e // p, e % p
    if transposed == (matrix == "A"):          # .trans (16-bit only)
        src = 8 * reg + 2 * (lane % 4) + within
        r, c = get_ldmatrix_offset(matrix, src, 0, 0, dtype, transposed)
        return r, c + lane // 4
    src = 8 * reg + lane // 4
    r, c = get_ldmatrix_offset(matrix, src, 0, 0, dtype, transposed)
    return r, c + (lane % 4) * p + within


@pytest.mark.parametrize("dtype,bits,matrix,transposed", [
    ("float16", 16, "A", False), ("float16", 16, "A", True), ("float16", 16, "B", False),
    ("float16", 16, "B", True), ("int8", 8, "A", False), ("int8", 8, "B", True),
    ("float32", 32, "A", False), ("float32", 32, "B", True)])
def test_ldmatrix_offsets_match_mma_fragments(dtype, bits, matrix, transposed):
    for lane in range(32):
        for e in range(4 * 32 // bits):
            got = _ldmatrix_element(matrix, dtype, bits, transposed, lane, e)
            if matrix == "A":
                s, k = mma_load_a_index(lane, e, bits)
                want = (k, s) if transposed else (s, k)
            else:
                s, k = mma_load_b_index(lane, e, bits)
                want = (s, k) if transposed else (k, s)
            assert got == want, (lane, e)


def test_store_map_covers_the_tile_once():
    seen = {mma_store_index_map(lane, e) for lane in range(32) for e in range(8)}
    assert seen == {(r, c) for r in range(16) for c in range(16)}


def _emitter_kernel(dtype, accum, a_t, b_t, M=64, N=64, K=32):
    em = TensorCoreIntrinEmitter(a_dtype=dtype, b_dtype=dtype, accum_dtype=accum, a_transposed=a_t,
                                 b_transposed=b_t, block_row_warps=2, block_col_warps=2, warp_row_tiles=M // 2,
                                 warp_col_tiles=N // 2, chunk=K)
    a_shape = (K, M) if a_t else (M, K)
    b_shape = (N, K) if b_t else (K, N)

    @T.prim_func
    def main(A: T.Tensor(a_shape, dtype), B: T.Tensor(b_shape, dtype), C: T.Tensor((M, N), accum)):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared(a_shape, dtype)
            B_s = T.alloc_shared(b_shape, dtype)
            C_s = T.alloc_shared((M, N), accum)
            A_l = T.alloc_local((em.warp_rows * em.local_size_a,), dtype)
            B_l = T.alloc_local((em.warp_cols * em.local_size_b,), dtype)
            C_l = T.alloc_local((em.warp_rows * em.warp_cols * em.local_size_out,), accum)
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.clear(C_l)
            for ki in T.serial(K // em.micro_size_k):
                em.ldmatrix_a(A_l, A_s, ki)
                em.ldmatrix_b(B_l, B_s, ki)
                em.mma(A_l, B_l, C_l)
            em.stmatrix(C_l, C_s)
            T.copy(C_s, C)

    return main


@pytest.mark.parametrize("dtype,accum,a_t,b_t,ld", [
    ("float16", "float32", False, True, ["tl::ptx_ldmatrix<4, false>"]),
    ("float16", "float32", True, False, ["tl::ptx_ldmatrix<4, true>"]),
    ("bfloat16", "float32", False, False, ["tl::ptx_ldmatrix<4, false>", "tl::ptx_ldmatrix<4, true>"]),
    ("float16", "float16", False, True, ["tl::ptx_ldmatrix<4, false>"]),
    ("int8", "int32", False, True, ["tl::ptx_ldmatrix<4, false>"]),
    ("int8", "int32", False, False, ["tl::ptx_ldmatrix<4, false>"]),   # B per element
])
def test_emitter_kernel_compiles(dtype, accum, a_t, b_t, ld):
    K = 64 if dtype == "int8" else 32
    kernel = tilelang.compile(_emitter_kernel(dtype, accum, a_t, b_t, K=K), target="cuda")   # runs nvcc
    src = kernel.get_kernel_source()
    assert "tl::mma_sync(" in src
    for call in ld:
        assert call in src


def test_mma_rejects_unsupported_combination():
    em = TensorCoreIntrinEmitterSM75(a_dtype="int8", b_dtype="int8", accum_dtype="int32", b_transposed=True,
                                     warp_row_tiles=32, warp_col_tiles=32, chunk=64)
    with pytest.raises(NotImplementedError, match="m8n8k16"):
        em.mma(None, None, None)


def test_fragment_layouts_follow_the_register_maps():
    em = TensorCoreIntrinEmitter(a_dtype="float16", b_dtype="float16", accum_dtype="float32", b_transposed=True,
                                 block_row_warps=2, block_col_warps=2, warp_row_tiles=32, warp_col_tiles=32, chunk=32)
    import tvm

    buf = tvm.tirx.decl_buffer((64, 64), "float32", scope="local.fragment")
    frag = em.make_mma_store_layout(buf)
    for lane in range(32):
        for e in range(8):
            r, c = mma_store_index_map(lane, e)
            thread, local = frag.forward_fn(16 + r, 32 + c)     # warp_m 0, tile i 1; warp_n 1, tile j 0
            assert thread == lane + 32 * 2 and local == (1 * em.warp_cols + 0) * 8 + e
    a = tvm.tirx.decl_buffer((64, 32), "float16", scope="local.fragment")
    fa = em.make_mma_load_layout(a, "A")
    for lane in range(32):
        for e in range(8):
            s, k = mma_load_a_index(lane, e, 16)
            assert fa.forward_fn(s, k) == (lane, e)


def test_wgmma_helpers():
    assert [select_wgmma_inst_n(n) for n in (96, 24, 384)] == [96, 8, 192]
    import tvm
    from tilelang.layout.swizzle import make_full_bank_swizzled_layout, make_quarter_bank_swizzled_layout

    buf = tvm.tirx.decl_buffer((64, 64), "float16", name="B", scope="shared")
    p = compute_gmma_descriptor(make_quarter_bank_swizzled_layout(buf), buf, transposed=False)
    assert (p.swizzle_mode.wgmma_layout_type(), p.leading_byte_offset, p.stride_byte_offset) == (3, 1, 16)
    p = compute_gmma_descriptor(make_full_bank_swizzled_layout(buf), buf, transposed=True)
    assert p.stride_byte_offset == 64 and not p.is_k_major
    with pytest.raises(ValueError, match="not a 128/64/32-byte bank swizzle"):
        compute_gmma_descriptor(T.Layout((64, 64), lambda i, j: (j, i)), buf, transposed=False)


def test_gemm_registry():
    from tvm.target import Target

    from tilelang.cuda.op.gemm import GemmMMA, GemmMMASm75
    from tilelang.tileop.gemm.registry import resolve_gemm_impl

    assert resolve_gemm_impl("cuda.mma", Target({"kind": "cuda", "arch": "sm_75"})) is GemmMMASm75
    assert resolve_gemm_impl("cuda.mma", Target({"kind": "cuda", "arch": "sm_90a"})) is GemmMMA
    with pytest.raises(ValueError, match="No GEMM implementation"):
        resolve_gemm_impl("cuda.nothing", Target({"kind": "cuda", "arch": "sm_80"}))
