"""T.gemm_sp (2:4 structured sparsity) on the CPU: on sm_80 (and on sm_90a with
``tl.disable_wgmma``) the kernels compile (nvcc included) to ``tl::gemm_sp_ss`` (mma.sp m16n8k32)
over row-major shared tiles; on sm_90a to ``tl::wgmma_sp_gemm_ss`` (wgmma.mma_async.sp m64nNk32)
over the wgmma slab layout, warp-specialised with TMA where the main loop allows; bad operands are
located errors; the metadata facts of ``tilelang.cuda.intrinsics.sparse_layout``.
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


NO_WGMMA = {"tl.disable_wgmma": True}


@pytest.mark.parametrize("arch, configs", [("sm_80", None), ("sm_90a", NO_WGMMA)])
@pytest.mark.parametrize("e_dtype", [T.int16, T.int8, T.int32])
def test_compiles_to_gemm_sp_ss(arch, configs, e_dtype):
    k = tilelang.compile(sparse_kernel(e_dtype=e_dtype), target=arch, pass_configs=configs)
    src = k.get_kernel_source()
    ld_e = 64 // get_e_factor(T.float16, e_dtype)
    # whole A and B tiles with 32-byte-multiple rows are stored in the mma operands' XOR swizzle
    # (the two trailing flags), which tl::gemm_sp_ss reads with ldmatrix; E stays row-major
    assert f"tl::gemm_sp_ss<128, 128, 64, 2, 2, false, false, 32, {ld_e}, 128, true, true>" in src
    assert src.count("tl::cp_async_gs<16>") >= 2 and "^" in src.split("tl::cp_async_gs<16>", 1)[1].split(";", 1)[0]


@pytest.mark.parametrize("e_dtype", [T.int16, T.int8, T.int32])
@pytest.mark.parametrize("trans_b", [False, True])
def test_sm90a_takes_sparse_wgmma(e_dtype, trans_b):
    k = tilelang.compile(sparse_kernel(e_dtype=e_dtype, trans_b=trans_b), target="sm_90a")
    src = k.get_kernel_source()
    ld_e = 64 // get_e_factor(T.float16, e_dtype)
    assert f"tl::wgmma_sp_gemm_ss<128, 128, 64, 1, {str(trans_b).lower()}, false, {ld_e}>" in src
    assert "gemm_sp_ss<" not in src.replace("wgmma_sp_gemm_ss<", "")
    k.ensure_cubin()


def test_sparse_wgmma_ptx_and_fallbacks():
    from tilelang.jit import nvcc

    art = tilelang.lower(sparse_kernel(M=128, N=256, K=256, bk=128, threads=256), "sm_90a")
    assert "tl::wgmma_sp_gemm_ss<128, 256, 128, 2, false, false, 8>" in art.source
    # A, E (16-byte rows) and B arrive by TMA from a producer warpgroup (the general
    # warp-specialised body); E's 8-byte rows at bk=64 keep cp.async
    assert "tl::tma_load_2d" in art.source and "__launch_bounds__(384" in art.source
    ptx = nvcc.compile_ptx(art.source, "sm_90a")
    assert "wgmma.mma_async.sp.sync.aligned.m64n256k32.f32.f16.f16" in ptx
    # not whole warpgroups, or a float16 accumulator: mma.sp
    for kw in ({"threads": 64}, {"accum": T.float16}):
        src = tilelang.lower(sparse_kernel(**kw), "sm_90a").source
        assert "tl::gemm_sp_ss<" in src and "wgmma_sp_gemm_ss" not in src


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
