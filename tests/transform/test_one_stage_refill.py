"""One-stage attention loops refill each tile for the next iteration right after its last use
(session 25, opt-in: ``tl.enable_one_stage_refill``; transform/attention_schedule.py marks the loop,
pipeline._lower_split_groups lowers it).

bench_launch.py's attention (B2 H4 S512 D64, 64x64 tiles, 128 threads, num_stages=1) loaded K and
V at the top of every iteration, so each iteration waited out K's full latency before S = Q K^T;
upstream's TMA producer loads K(k+1) as soon as S = Q K^T of k is done (H200: 8.81 against 6.89 us
kernel time). Now K(k+1) is issued after the first gemm and V(k+1) after the second, each its own
cp.async group; without the key (or with ``tl.enable_pipeline_split_groups`` False) the loads stay
at the top.
"""

from __future__ import annotations

import pytest

import tilelang
import tilelang.language as T
from tilelang.tir_utils import walk_stmts
from tilelang.transform import attention_schedule
from tilelang.transform.pipelined_loop import REFILL_ATTR, is_pipelined

REFILL = {"tl.enable_one_stage_refill": True}
NO_REFILL = {"tl.enable_ws_single_stage": False}   # (64 blocks: one wave, a TMA producer by default on sm_90a)


def _attention(stages=1, guarded=False, raw_call=False):
    shape = [2, 4, 512, 64]
    scale = 0.18

    @T.prim_func
    def main(Q: T.Tensor(shape, "float16"), K: T.Tensor(shape, "float16"), V: T.Tensor(shape, "float16"),
             O: T.Tensor(shape, "float16")):
        with T.Kernel(8, 4, 2, threads=128) as (bx, by, bz):
            q = T.alloc_shared([64, 64], "float16")
            k = T.alloc_shared([64, 64], "float16")
            v = T.alloc_shared([64, 64], "float16")
            s = T.alloc_fragment([64, 64], "float32")
            p = T.alloc_fragment([64, 64], "float16")
            acc = T.alloc_fragment([64, 64], "float32")
            m = T.alloc_fragment([64], "float32")
            T.copy(Q[bz, by, bx * 64:(bx + 1) * 64, :], q)
            T.fill(acc, 0)
            T.fill(m, -T.infinity("float32"))
            if guarded:
                if bz < 2:
                    for kb in T.Pipelined(8, num_stages=stages):
                        T.copy(K[bz, by, kb * 64:(kb + 1) * 64, :], k)
                        T.clear(s)
                        T.gemm(q, k, s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                        T.copy(s, p)
                        T.copy(V[bz, by, kb * 64:(kb + 1) * 64, :], v)
                        T.gemm(p, v, acc, policy=T.GemmWarpPolicy.FullRow)
            else:
                for kb in T.Pipelined(8, num_stages=stages):
                    T.copy(K[bz, by, kb * 64:(kb + 1) * 64, :], k)
                    T.clear(s)
                    T.gemm(q, k, s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                    if raw_call:
                        T.call_extern("handle", "__nanosleep", 1)
                    T.reduce_max(s, m, dim=1, clear=False)
                    for i, j in T.Parallel(64, 64):
                        s[i, j] = T.exp2(s[i, j] * scale - m[i] * scale)
                    T.copy(s, p)
                    T.copy(V[bz, by, kb * 64:(kb + 1) * 64, :], v)
                    T.gemm(p, v, acc, policy=T.GemmWarpPolicy.FullRow)
            T.copy(acc, O[bz, by, bx * 64:(bx + 1) * 64, :])

    return main


def _marked(func, configs=None):
    """Whether ``attention_schedule.schedule`` marks the kernel's pipelined loop for the refill
    (else: whether it rewrote it with the loads at the top, None when it left it alone)."""
    new = attention_schedule.schedule(func, "sm_90a", {**REFILL, **(configs or {})})
    loops = []
    walk_stmts(new.body, lambda s: loops.append(s) if is_pipelined(s) else None)
    if REFILL_ATTR in loops[0].annotations:
        return True
    return None if new.same_as(func) else False


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_one_stage_attention_refills_k_after_the_first_gemm(arch):
    src = tilelang.lower(_attention(), target=arch, pass_configs=REFILL).source
    head, loop = src.split("for (int kb = 0; kb < 8; ++kb)", 1)
    # K(0) and V(0) in flight before the loop, each its own group
    assert head.count("tl::cp_async_commit();") == 2
    assert head.index("K[") < head.index("V[")
    first, second = loop.index("gemm_ss"), loop.index("gemm_", loop.index("gemm_ss") + 1)
    k_next, v_next = loop.index("if (kb < 7)"), loop.rindex("if (kb < 7)")
    # K(k+1) right after S = Q K^T (behind a barrier: every thread is done reading K(k)), V(k+1)
    # after O += P V; each waited for with the other tile's group left in flight
    assert first < k_next < second < v_next
    assert "__syncthreads" in loop[first:k_next] and "__syncthreads" in loop[second:v_next]
    assert "K[" in loop[k_next:second] and "V[" in loop[v_next:]
    assert loop[:first].count("tl::cp_async_wait<1>();") == 1
    assert loop[k_next:second].count("tl::cp_async_wait<1>();") == 1
    assert "tl::cp_async_wait<0>();" in loop[v_next:]       # after the loop
    # without the key: both tiles loaded at the top of each iteration
    before = tilelang.lower(_attention(), target=arch, pass_configs=NO_REFILL).source
    top = before.split("for (int kb = 0; kb < 8; ++kb)", 1)[1]
    assert "if (kb < 7)" not in top and top.index("V[") < top.index("gemm_ss")


def test_the_loop_is_marked_not_rewritten():
    func = _attention()
    new = attention_schedule.schedule(func, "sm_90a", REFILL)
    loops = []
    walk_stmts(new.body, lambda s: loops.append(s) if is_pipelined(s) else None)
    assert REFILL_ATTR in loops[0].annotations and "tl_copy(" in str(loops[0].body)
    assert ", 0, 3)" not in str(loops[0].body)           # no T.async_copy: the pipeliner issues them
    plan = attention_schedule.planned_loads(func, "sm_90a", REFILL)
    assert [(moved, refill) for _, moved, _, refill in plan] == [(["k", "v"], True)]


def test_what_keeps_the_loads_at_the_top():
    assert _marked(_attention()) is True
    assert _marked(_attention(), {"tl.enable_one_stage_refill": False}) is False
    assert _marked(_attention(), {"tl.enable_pipeline_split_groups": False}) is False
    # one-stage warp specialisation asked for (sm_90a): left alone, its TMA producer loads the tiles
    assert _marked(_attention(), {"tl.enable_ws_single_stage": True}) is None
    # zero stages: each step keeps its own loads
    assert _marked(_attention(stages=0)) is False
    # a raw call in the body: the pipeliner cannot see what it touches
    assert _marked(_attention(raw_call=True)) is False
    # the loop under an if: only plainly lowered loops are refilled
    assert _marked(_attention(guarded=True)) is False
