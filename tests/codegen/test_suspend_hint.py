"""mbarrier waits probe with a suspend-time hint (src/tl/barrier.h); ``tl.disable_mbarrier_suspend_hint``
opts a kernel out by defining the hint as 0 in front of tl.h (the header side:
tests/test_src_sm90_headers.py)."""

import tilelang
import tilelang.language as T

DEFINE = "#define TL_MBARRIER_SUSPEND_HINT_NS 0\n"


def _gemm():
    @T.prim_func
    def main(A: T.Tensor((512, 256), "float16"), B: T.Tensor((256, 512), "float16"), C: T.Tensor((512, 512), "float16")):
        with T.Kernel(4, 4, threads=128) as (bx, by):
            A_s = T.alloc_shared((128, 64), "float16")
            B_s = T.alloc_shared((64, 128), "float16")
            C_l = T.alloc_fragment((128, 128), "float32")
            T.clear(C_l)
            for k in T.Pipelined(4, num_stages=3):
                T.copy(A[by * 128, k * 64], A_s)
                T.copy(B[k * 64, bx * 128], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * 128, bx * 128])

    return main


def test_the_key_defines_the_hint_away_in_front_of_the_library():
    on = tilelang.lower(_gemm(), "sm_90a").source
    off = tilelang.lower(_gemm(), "sm_90a", pass_configs={"tl.disable_mbarrier_suspend_hint": True}).source
    assert "tl::mbarrier_wait" in on and DEFINE not in on
    assert off == DEFINE + on


def test_kernels_without_mbarrier_waits_are_left_alone():
    on = tilelang.lower(_gemm(), "sm_80").source          # cp.async pipeline: no mbarrier
    off = tilelang.lower(_gemm(), "sm_80", pass_configs={"tl.disable_mbarrier_suspend_hint": True}).source
    assert "mbarrier_wait" not in on and off == on
