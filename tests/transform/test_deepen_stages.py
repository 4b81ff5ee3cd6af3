"""transform/deepen_stages.py: a pipelined loop without a gemm in a grid of at most one block per SM
runs with as many stages as shared memory holds; everything else keeps the written count."""

from __future__ import annotations

import re

import pytest

import tilelang.language as T
from tilelang.analysis import check
from tilelang.engine.lower import lower
from tilelang.language.loops import STAGES_ATTR
from tilelang.transform import deepen_stages

KEY = deepen_stages.KEY


def _gemv(blocks=32, stages=2, n=4096, gemm=False):
    """upstream's gemv_alloc_reducer in shape: each block streams 128 rows of A in 128 x 128 tiles
    (32 KiB of fp16 a stage) and reduces them against x; ``gemm``: the loop multiplies each tile
    by a 128 x 64 one instead."""
    M = 128 * blocks

    @T.prim_func
    def main(A: T.Tensor((M, n), T.float16), x: T.Tensor((n,), T.float16), o: T.Tensor((M,), T.float32)):
        with T.Kernel(blocks, threads=256) as bx:
            acc = T.alloc_fragment((128,), T.float32)
            if gemm:
                C = T.alloc_fragment((128, 64), T.float32)
                B_s = T.alloc_shared((128, 64), T.float16)
                T.clear(C)
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(n, 128), num_stages=stages):
                a_s = T.alloc_shared((128, 128), T.float16)
                T.copy(A[bx * 128, k * 128], a_s)
                if gemm:
                    T.copy(A[k * 128, 0], B_s)
                    T.gemm(a_s, B_s, C)
                else:
                    a_f = T.alloc_fragment((128, 128), T.float16)
                    x_f = T.alloc_fragment((128,), T.float16)
                    T.copy(a_s, a_f)
                    T.copy(x[k * 128], x_f)
                    for i, j in T.Parallel(128, 128):
                        acc[i] += a_f[i, j] * x_f[j]
            if gemm:
                T.reduce_sum(C, acc, dim=1)
            T.copy(acc, o[bx * 128])

    return main


def _waits(func, arch="sm_90a", configs=None):
    """The distinct cp.async wait depths of the kernel's CUDA (stages - 1 in the main loop)."""
    src = lower(func, arch, pass_configs=configs or {}).source
    return sorted({int(n) for n in re.findall(r"cp_async_wait<(\d+)>", src)})


def test_one_wave_loop_takes_what_shared_memory_holds():
    # 227 KiB - 8 KiB margin holds six 32 KiB stages; the written two become six
    assert _waits(_gemv()) == [0, 5]
    assert _waits(_gemv(), configs={KEY: False}) == [0, 1]


def test_cap_by_setting_trip_count_and_arch():
    assert _waits(_gemv(), configs={KEY: 3}) == [0, 2]
    assert _waits(_gemv(n=512)) == [0, 3]             # four trips: four stages
    assert _waits(_gemv(), arch="sm_80") == [0, 3]     # 163 KiB a block: four stages


@pytest.mark.parametrize("why", ["many waves", "gemm", "one stage"])
def test_left_as_written(why):
    if why == "many waves":        # 264 blocks: two a SM on 132 SMs, their shared memory is shared
        func, before = _gemv(blocks=264), [0, 1]
    elif why == "gemm":            # a gemm's ring is budgeted with the warp-specialised plans
        func, before = _gemv(gemm=True), None
    else:
        func, before = _gemv(stages=1), None
    out = deepen_stages.apply(func, "sm_90a", {})
    assert out is func
    if before is not None:
        assert _waits(func) == before


def test_gemm_loop_only_when_asked():
    func = _gemv(gemm=True)
    out = deepen_stages.apply(func, "sm_90a", {KEY: True})
    assert out is not func
    (loop,) = [s for s in _loops(out.body)]
    # 32 + 16 KiB a stage: (227 - 8) KiB of room less one stage for the ring, three stages
    assert int(loop.annotations[STAGES_ATTR]) == 3
    assert int(loop.annotations[deepen_stages.WRITTEN_ATTR]) == 2


def _loops(body):
    from tvm import tirx

    from tilelang.tir_utils import walk_stmts
    from tilelang.transform.pipelined_loop import is_pipelined

    out = []
    walk_stmts(body, lambda s: out.append(s) if isinstance(s, tirx.For) and is_pipelined(s) else None)
    return out


def test_hover_and_checker_see_the_stages_compiled():
    from tilelang.analysis.summary import summarize

    summary = summarize(_gemv(), "sm_90a")
    (pipe,) = summary["pipelines"]
    assert pipe["stages"] == 6
    assert "num_stages=2 as written, 6 here" in pipe["mechanism"]
    assert summary["smem_total"] <= summary["smem_limit"]
    assert not [d for d in check(_gemv()) if d.severity == "error"]
    (pipe,) = summarize(_gemv(), "sm_90a", {KEY: False})["pipelines"]
    assert pipe["stages"] == 2 and "as written" not in pipe["mechanism"]
