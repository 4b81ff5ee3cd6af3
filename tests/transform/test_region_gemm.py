"""T.gemm / T.wgmma_gemm inside thread regions (``if tx < 128: ... elif tx < 256: ... else: ...``,
hand warp-specialised kernels such as deepseek_v32's sparse_mla_fwd_pipelined): on sm_90a each
consumer region of 128 threads is one warpgroup, so its gemms are wgmma with M=64 per warpgroup,
its fragments are indexed by the thread index relative to the region's start, compiler barriers
inside are named barriers of the region, and operands may be one stage of a staged shared buffer
or whole slabs of it."""

import os

import pytest

import tilelang
import tilelang.language as T
from tilelang.diagnostics.errors import TileLangCompileError


def _body(src):
    return src[src.index("__global__"):]


def _roles(forced=False, first_gemm_cols=(0, 64)):
    """Two consumer warpgroups (threads 0..127, 128..255) each multiply a 64x64 tile by one half
    (slabs of 64 columns) of a stage of a [2, 64, 128] shared buffer; threads 256..383 idle."""
    c0, c1 = first_gemm_cols

    @T.prim_func
    def kernel(A: T.Tensor((64, 64), T.bfloat16), B: T.Tensor((2, 64, 128), T.bfloat16),
               C: T.Tensor((64, 128), T.float32)):
        with T.Kernel(1, threads=384) as bx:
            a_s = T.alloc_shared((64, 64), T.bfloat16)
            b_s = T.alloc_shared((2, 64, 128), T.bfloat16)
            acc_l = T.alloc_fragment((64, 64), T.float32)
            acc_r = T.alloc_fragment((64, 64), T.float32)
            T.copy(A, a_s)
            T.copy(B, b_s)
            tx = T.get_thread_binding()
            if tx < 128:
                T.fill(acc_l, 0)
                for stage in T.serial(2):
                    if forced:
                        T.wgmma_gemm(a_s, b_s[stage, :, c0:c0 + 64], acc_l, transpose_B=True)
                        T.wait_wgmma(0)
                    else:
                        T.gemm(a_s, b_s[stage, :, c0:c0 + 64], acc_l)
                T.copy(acc_l, C[:, 0:64])
            elif tx < 256:
                T.fill(acc_r, 0)
                for stage in T.serial(2):
                    T.gemm(a_s, b_s[stage, :, c1:c1 + 64], acc_r)
                T.copy(acc_r, C[:, 64:128])
            else:
                pass

    return kernel


def test_consumer_regions_take_wgmma_per_warpgroup():
    src = _body(tilelang.lower(_roles(), "sm_90a").source)
    # M=64 over one warpgroup in each 128-thread region (not three over the block's 384 threads)
    assert src.count("tl::wgmma_gemm_ss<64, 64, 64, 1, false, false, false>") == 2
    assert "tl::gemm_ss" not in src


def test_region_operands_are_stage_and_slab_offsets():
    src = _body(tilelang.lower(_roles(), "sm_90a").source)
    # a_s: 4096 elements at 0; b_s at 4096, stage stride 64 * 128 = 8192, slab of 64 columns 4096
    assert "(&(((nv_bfloat16*)smem)[((stage * 8192) + 4096)]))" in src
    assert "(&(((nv_bfloat16*)smem)[((stage_1 * 8192) + 8192)]))" in src


def test_second_region_indexes_fragments_from_its_start():
    src = _body(tilelang.lower(_roles(), "sm_90a").source)
    second = src[src.index("if (((int)threadIdx.x) < 256)"):]
    # the accumulator store of threads 128..255 uses their index relative to 128
    assert "& 127)" in second or "- 128)" in second


def test_forced_wgmma_on_a_k_slab_of_a_stage_in_a_region():
    src = _body(tilelang.lower(_roles(forced=True), "sm_90a").source)
    assert "tl::wgmma_gemm_ss_desc<64, 64, 64, 1, false, true, false, 128, 128, __nv_bfloat16>" in src
    # the stage's byte offset: b_s at 8192 bytes, 16384 bytes a stage
    assert "tl::increase_descriptor_offset" in src and "(stage * 16384) + 8192)" in src


def test_slice_not_whole_slabs_is_refused():
    with pytest.raises(TileLangCompileError, match="wgmma"):
        tilelang.lower(_roles(forced=True, first_gemm_cols=(32, 64)), "sm_90a")


def test_mma_sync_gemm_in_a_region_not_at_thread_0_is_refused():
    with pytest.raises(TileLangCompileError, match="thread region that starts at thread 128"):
        tilelang.lower(_roles(), "sm_80")


def test_region_gemm_kernel_compiles_with_nvcc():
    from tilelang.jit import nvcc

    art = tilelang.lower(_roles(), "sm_90a")
    try:
        nvcc.compile_cubin(art.source, art.arch, art.compile_flags)
    except FileNotFoundError:
        pytest.skip("no nvcc")


def test_sparse_mla_fwd_pipelined_example_compiles():
    root = "/work/shared/conformance/upstream/examples/deepseek_v32"
    if not os.path.isdir(root) or not os.environ.get("TL_SLOW_EXAMPLES"):
        pytest.skip("upstream examples not here (or TL_SLOW_EXAMPLES unset)")
    import sys

    import torch

    sys.path.insert(0, root)
    import sparse_mla_fwd_pipelined as m

    q = torch.zeros((1, 256, 64, 576), dtype=torch.bfloat16)
    kv = torch.zeros((1, 512, 1, 576), dtype=torch.bfloat16)
    idx = torch.zeros((1, 256, 1, 256), dtype=torch.int32)
    qs = torch.tensor([1024], dtype=torch.int32)
    src = m.sparse_mla_fwd.get_kernel_source(q, kv, idx, qs, 64, 512, 64, 256, 1, 1, None, True, False)
    assert src.count("tl::wgmma_gemm_ss_desc<64, 64, ") == 3
    assert src.count("tl::wgmma_gemm_ss<64, 256, 64, 1, false, false, false>") == 2


def test_checker_splits_a_region_gemm_over_the_region_warps():
    from tilelang.analysis import check

    diags = check(_roles(), "sm_90a")
    assert not [d for d in diags if "TL0103" in str(getattr(d, "code", d))]
