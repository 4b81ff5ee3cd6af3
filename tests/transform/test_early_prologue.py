"""Early pipeline prologues (opt-in ``tl.enable_early_prologue``, transform/early_prologue.py): a
cp.async pipeline's first-tile loads move in front of the kernel's earlier statements they do not
depend on (the synchronous copy of Q, the clears, the barrier publishing Q), so the first K / V
loads overlap Q's. Nothing that commits or waits is passed (the loop's wait counts stay valid),
nor a statement before which the prologue's tiles were already touched; without the key the
CUDA is unchanged."""

from __future__ import annotations

import re

import tilelang
import tilelang.language as T
from test_one_stage_refill import _attention

KEY = "tl.enable_early_prologue"
REFILL = {"tl.enable_one_stage_refill": True}


def source(func, arch="sm_90a", **configs):
    return tilelang.lower(func, target=arch, pass_configs=configs).source


def _head(src):
    """The kernel body up to its main loop."""
    body = src[src.index("extern __shared__"):]
    return body[:body.index("for (int kb = 0;")]


def test_the_first_tiles_load_before_q():
    src = source(_attention(), **REFILL, **{KEY: True})
    head = _head(src)
    k0, v0 = head.index("(&(K["), head.index("(&(V["),
    q = head.index("(&(Q[")
    assert k0 < v0 < q                                  # K(0), V(0) in flight before Q's copy starts
    assert head.count("tl::cp_async_commit();") == 2 and head.index("__syncthreads") > q
    # the loop and everything after the prologue are as without the key
    plain = source(_attention(), **REFILL)
    assert src[src.index("for (int kb = 0;"):] == plain[plain.index("for (int kb = 0;"):]
    assert sorted(_lines(_head(plain))) == sorted(_lines(head))


def _lines(text):
    """The lines, with loop and common-subexpression names numbered away (they follow the order)."""
    return [re.sub(r"\b(it|cse_v)(_?\d+)?\b", r"\1", ln) for ln in text.split("\n")]


def test_without_the_key_the_cuda_is_unchanged():
    assert source(_attention(), **REFILL) == source(_attention(), **REFILL, **{KEY: False})
    plain = _head(source(_attention(), **REFILL))
    assert plain.index("(&(Q[") < plain.index("(&(K[")


def test_a_multi_stage_prologue_moves_too():
    # (two stages on sm_90a are warp-specialised: a TMA producer, no prologue; sm_80 keeps cp.async)
    head = _head(source(_attention(stages=2), arch="sm_80", **{KEY: True}))
    assert head.index("(&(K[") < head.index("(&(Q[")
    assert source(_attention(stages=2), arch="sm_90a", **{KEY: True}) == source(_attention(stages=2), arch="sm_90a")


def _touched_first():
    """The K tile cleared before the loop: the prologue may not pass that."""
    shape = [2, 4, 512, 64]

    @T.prim_func
    def main(Q: T.Tensor(shape, "float16"), K: T.Tensor(shape, "float16"), O: T.Tensor(shape, "float16")):
        with T.Kernel(8, 4, 2, threads=128) as (bx, by, bz):
            q = T.alloc_shared([64, 64], "float16")
            k = T.alloc_shared([64, 64], "float16")
            s = T.alloc_fragment([64, 64], "float32")
            acc = T.alloc_fragment([64, 64], "float32")
            T.copy(Q[bz, by, bx * 64:(bx + 1) * 64, :], q)
            T.clear(k)
            T.clear(acc)
            for kb in T.Pipelined(8, num_stages=2):
                T.copy(K[bz, by, kb * 64:(kb + 1) * 64, :], k)
                T.clear(s)
                T.gemm(q, k, s, transpose_B=True)
                for i, j in T.Parallel(64, 64):
                    acc[i, j] += s[i, j]
            T.copy(acc, O[bz, by, bx * 64:(bx + 1) * 64, :])

    return main


def test_a_prologue_whose_tile_was_touched_stays():
    src = source(_touched_first(), arch="sm_80", **{KEY: True})
    assert src == source(_touched_first(), arch="sm_80")
    head = _head(src)
    assert head.index("(&(Q[") < head.index("(&(K[")


def _written_first():
    """The loop loads tiles of X, which the kernel itself writes before the loop."""
    @T.prim_func
    def main(A: T.Tensor((256, 64), "float16"), X: T.Tensor((256, 64), "float16"), O: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128) as bx:
            a = T.alloc_shared([64, 64], "float16")
            x = T.alloc_shared([64, 64], "float16")
            acc = T.alloc_fragment([64, 64], "float32")
            T.copy(A[0:64, :], a)
            T.copy(a, X[0:64, :])
            T.clear(acc)
            for kb in T.Pipelined(4, num_stages=2):
                T.copy(X[kb * 64:(kb + 1) * 64, :], x)
                T.gemm(a, x, acc)
            T.copy(acc, O)

    return main


def test_a_prologue_reading_what_the_kernel_wrote_stays():
    src = source(_written_first(), arch="sm_80", **{KEY: True})
    assert src == source(_written_first(), arch="sm_80")
