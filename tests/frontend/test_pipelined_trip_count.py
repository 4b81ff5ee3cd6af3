"""``T.Pipelined(n, num_stages=S)`` with a constant n below S keeps max(n, 2) stages: buffers for
iterations that never run only cost shared memory (an autotune config at a small size stopped at
the budget, TL0501, where the same config fits once the stages it can use are counted)."""

from tvm import tirx

import tilelang
import tilelang.language as T
from tilelang.language.loops import STAGES_ATTR
from tilelang.tir_utils import walk_stmts


def _stages(func):
    out = []
    walk_stmts(func.body, lambda s: isinstance(s, tirx.For) and STAGES_ATTR in s.annotations
               and out.append(int(s.annotations[STAGES_ATTR])))
    return out


def gemm(K, stages, bk=128, order=None, stage=None):
    @T.prim_func
    def main(A: T.Tensor((256, K), "float16"), B: T.Tensor((K, 256), "float16"), C: T.Tensor((256, 256), "float16")):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            A_s = T.alloc_shared((128, bk), "float16")
            B_s = T.alloc_shared((bk, 128), "float16")
            C_l = T.alloc_fragment((128, 128), "float32")
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=stages, order=order, stage=stage):
                T.copy(A[by * 128, k * bk], A_s)
                T.copy(B[k * bk, bx * 128], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * 128, bx * 128])

    return main


def test_constant_trip_count_below_the_stages_clamps_them():
    assert _stages(gemm(256, 4)) == [2]          # 2 iterations
    assert _stages(gemm(384, 4)) == [3]          # 3 iterations
    assert _stages(gemm(128, 3)) == [2]          # 1 iteration: still 2 (a pipelined loop stays one)


def test_enough_iterations_or_few_stages_keep_what_was_asked():
    assert _stages(gemm(1024, 4)) == [4]
    assert _stages(gemm(128, 2)) == [2]
    assert _stages(gemm(128, 1)) == [1]
    assert _stages(gemm(128, 0)) == [0]


def test_symbolic_trip_count_and_explicit_schedules_keep_the_stages():
    assert _stages(gemm(T.dynamic("K"), 4)) == [4]
    assert _stages(gemm(256, 4, order=[0, 1, 2], stage=[0, 0, 3])) == [4]


def test_the_clamped_config_fits_the_budget():
    """128x128x128 fp16 tiles: 64 KiB a stage, 4 stages over budget, the 2 that 2 iterations use fit."""
    art = tilelang.lower(gemm(256, 4), "sm_90a")
    assert 128 * 1024 <= art.dynamic_smem <= 227 * 1024
