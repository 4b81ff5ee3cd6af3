"""Thread widening (``tl.enable_thread_widening``, on by default; transform/widen_threads.py): upstream's
one-stage 128x128 attention written for 128 threads, whose S, P and O need 320 registers a thread,
runs on 256 (two warpgroups, m64 wgmma each, 160 registers, no spills); kernels whose meaning
depends on the thread count, that fit anyway, or that a second warpgroup cannot split keep 128."""

import sys
from pathlib import Path

import pytest

import tilelang
import tilelang.language as T
from tilelang.transform import widen_threads

sys.path.insert(0, str(Path(__file__).resolve().parent / "transform"))
from test_lowering import _one_stage_attention  # noqa: E402  (upstream's one-stage attention body)

KEY = widen_threads.KEY


def source(func, arch="sm_90a", **configs):
    return tilelang.compile(func, target=f"cuda -arch={arch}", pass_configs=configs).get_kernel_source()


def test_a_loop_that_would_spill_runs_on_two_warpgroups():
    src = source(_one_stage_attention(128, 128))     # on by default
    assert src == source(_one_stage_attention(128, 128), **{KEY: True})
    assert "__launch_bounds__(256" in src
    assert "tl::wgmma_gemm_ss<128, 128, 128, 2," in src and "tl::wgmma_gemm_rs<128, 128, 128, 2," in src
    assert "float s[64];" in src and "float o[64];" in src        # half the rows per thread
    # (the loop's fragments now fit: the attention schedule issues K and V together at the top)
    assert "tl::cp_async_wait<1>();" in src


def test_switched_off_the_kernel_keeps_its_threads():
    src = source(_one_stage_attention(128, 128), **{KEY: False})
    assert "__launch_bounds__(128" in src and "float s[128];" in src


@pytest.mark.parametrize("case", ["fits", "rows64", "thread_index", "scalar_atomic", "sm80", "ws_single_stage"])
def test_kernels_that_must_keep_their_thread_count(case):
    arch = "sm_80" if case == "sm80" else "sm_90a"
    if case == "fits":
        func = _one_stage_attention(128, 64, block_N=64)      # S, P, O: 64 + 32 + 64 words a thread: fit
    elif case == "rows64":
        func = _one_stage_attention(64, 512)                  # 64-row gemms (O: 256 words): no m64 per warpgroup
    else:
        func = _attention_with(case) if case in ("thread_index", "scalar_atomic") else _one_stage_attention(128, 128)
    configs = {KEY: True, "tl.enable_ws_single_stage": case == "ws_single_stage"}
    out = widen_threads.widen(func, arch, configs)
    assert out.same_as(func)


def _attention_with(extra):
    """The one-stage attention on 128 threads (S, P, O: 320 words a thread) plus, after its loop,
    ``extra``: a store at the thread's own index, or a scalar atomic (once per thread)."""
    S, dim = 1024, 128

    @T.prim_func
    def kernel(Q: T.Tensor((S, dim), "float16"), K: T.Tensor((S, dim), "float16"),
               V: T.Tensor((S, dim), "float16"), O: T.Tensor((S, dim), "float16"), X: T.Tensor((S,), "int32")):
        with T.Kernel(S // 128, threads=128) as bx:
            tx = T.get_thread_binding()
            Q_s = T.alloc_shared((128, dim), "float16")
            K_s = T.alloc_shared((128, dim), "float16")
            V_s = T.alloc_shared((128, dim), "float16")
            s = T.alloc_fragment((128, 128), "float32")
            p = T.alloc_fragment((128, 128), "float16")
            o = T.alloc_fragment((128, dim), "float32")
            T.copy(Q[bx * 128, 0], Q_s)
            T.fill(o, 0)
            for k in T.Pipelined(S // 128, num_stages=1):
                T.copy(K[k * 128, 0], K_s)
                T.gemm(Q_s, K_s, s, transpose_B=True, clear_accum=True)
                T.copy(s, p)
                T.copy(V[k * 128, 0], V_s)
                T.gemm(p, V_s, o)
            if extra == "thread_index":
                X[bx * 128 + tx] = tx
            else:
                T.atomic_add(X[0], 1)       # once per thread: the count would double
            T.copy(o, O[bx * 128, 0])
    return kernel


def test_the_widened_function_differs_only_in_its_thread_extent():
    func = _one_stage_attention(128, 128)
    out = widen_threads.widen(func, "sm_90a", {KEY: True})
    assert not out.same_as(func)
    text, wide = func.script(), out.script()
    assert text.replace("threads=128", "threads=256") == wide or \
        text.replace('"threadIdx.x", 128', '"threadIdx.x", 256') == wide


def test_the_checker_and_the_hover_describe_the_widened_launch():
    from tilelang.analysis.summary import summarize
    from tilelang_lsp import hover

    func = _one_stage_attention(128, 128)
    launch = summarize(func, "sm_90a")["launch"]
    assert launch["num_threads"] == 256 and launch["written_threads"] == 128
    text = hover.kernel_markdown(summarize(func, "sm_90a"), "f()", None)
    assert "**256 threads**" in text and "written for 128 threads, launched with 256" in text
    off = summarize(func, "sm_90a", {KEY: False})["launch"]
    assert off["num_threads"] == 128 and "written_threads" not in off
    assert "thread widening" not in hover.kernel_markdown(summarize(func, "sm_90a", {KEY: False}), "f()", None)
