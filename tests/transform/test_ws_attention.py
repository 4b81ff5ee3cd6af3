"""Warp specialisation of a general loop body (flash attention on sm_90a): N-D TMA boxes for the
K / V tiles, a consumer body of synchronous wgmma that releases its stage at the end of the
iteration, and the reasons a loop keeps the cp.async path."""

import sys
from pathlib import Path

import pytest

import tilelang.language as T
from tilelang.transform.kernel import analyze_kernel
from tilelang.transform.layout_inference import infer_layouts
from tilelang.transform.lower_tile_ops import Lowerer
from tilelang.transform.warp_specialize import plan_or_reason

from test_lowering import lowered_text

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
import flash_attention as fa  # noqa: E402


def _plan(func, configs=None):
    info = analyze_kernel(func)
    return plan_or_reason(Lowerer(info, infer_layouts(info, "sm_90a"), configs or {}))


@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
def test_attention_tiles_are_tma_boxes_of_the_4d_tensors(layout):
    func = fa.flashattn.get_prim_func(2, 4, 512, 128, False, 1, layout, block_M=128, block_N=64, num_stages=2)
    ws, why = _plan(func)
    assert why is None and ws.gemm is None          # the general consumer body
    k_map = ws.tensormaps[0]
    # innermost first: D, then S (bhsd) or H (bshd)
    if layout == "bhsd":
        assert k_map["dims"] == [128, 512, 4, 2] and k_map["box"] == [64, 64, 1, 1]
        assert k_map["strides"] == [256, 512 * 256, 4 * 512 * 256]
    else:
        assert k_map["dims"] == [128, 4, 512, 2] and k_map["box"] == [64, 1, 64, 1]
        assert k_map["strides"] == [256, 4 * 256, 512 * 4 * 256]


def test_attention_consumers_release_each_stage_after_the_body():
    func = fa.flashattn.get_prim_func(2, 4, 512, 128, False, 1, "bhsd", block_M=128, block_N=128, num_stages=2)
    text = lowered_text(func, "sm_90a")
    assert text.count("tl::tma_load_4d") == 4        # K and V, two 64-column slabs each
    consumer = text[text.index("tl::setmaxnreg_inc"):]
    loop = consumer[consumer.index("for k in range"):consumer.index("] / logsum[")]   # up to the epilogue
    assert "tl::wgmma_gemm_ss" in loop and "tl::wgmma_gemm_rs" in loop
    assert "__syncthreads" not in loop and "named_barrier_sync\", 1" not in loop   # no consumer-wide barrier
    assert "cp_async" not in loop
    # the release names the stage this iteration read, after the second gemm
    release = loop.index("tl::mbarrier_arrive")
    assert release > loop.index("tl::wgmma_gemm_rs")
    assert "tl_mbar[2 + k % 2]" in loop[release:release + 200]          # empty[k % S], S = 2


def test_a_staged_tile_read_after_the_loop_keeps_cp_async():
    @T.prim_func
    def kernel(A: T.Tensor((1024, 64), "float16"), B: T.Tensor((1024, 64), "float16"),
               C: T.Tensor((128, 64), "float32")):
        with T.Kernel(8, threads=128) as bx:
            A_s = T.alloc_shared((128, 64), "float16")
            B_s = T.alloc_shared((64, 64), "float16")
            S = T.alloc_fragment((128, 64), "float32")
            O = T.alloc_fragment((128, 64), "float32")
            T.copy(A[bx * 128, 0], A_s)
            T.clear(O)
            for k in T.Pipelined(16, num_stages=2):
                T.copy(B[k * 64, 0], B_s)
                T.gemm(A_s, B_s, S, transpose_B=True, clear_accum=True)
                for i, j in T.Parallel(128, 64):
                    O[i, j] += S[i, j]
            T.gemm(A_s, B_s, O, transpose_B=True)
            T.copy(O, C)

    ws, why = _plan(kernel)
    assert ws is None and why == "the staged tile 'B_s' is used outside the T.Pipelined loop"


def test_pass_configs_keep_the_cp_async_attention_loop():
    func = fa.flashattn.get_prim_func(2, 4, 512, 128, False, 1, "bhsd", block_M=128, block_N=128, num_stages=2)
    ws, why = _plan(func, {"tl.disable_tma_lower": True})
    assert ws is None and "tl.disable_tma_lower" in why

