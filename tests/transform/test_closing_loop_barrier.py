"""A loop whose every iteration ends with its loop-back barrier leaves nothing pending behind it
(``thread_sync.closes_with_barrier``): the statement after the loop gets no barrier of its own for
what the loop touched (upstream's gdn chunk_scaled_dot_kkt: the loop over K ends with one, then
the gates are written into bytes the loop read). What was pending before the loop still is. A TMA store that waits for its own reads of shared
memory before the barrier (a tile copied out through shared memory), and cp.async groups the body
retires with ``cp_async_wait<0>`` before it, leave nothing in flight.
CPU only: the generated CUDA is inspected."""

import importlib.util
import sys
from pathlib import Path

import pytest

import tilelang
import tilelang.language as T
from tilelang.tir_utils import evaluate_extern, i32, seq
from tilelang.transform import thread_sync
from tvm import tirx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from upstream_paths import examples  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_loop_back_barrier import braced  # noqa: E402

GDN = examples("gdn")
TARGET = "cuda -arch=sm_90a"
CONFIGS = {"tl.disable_tma_lower": True}


def after_loop(n=256, threads=128, trips=2, early=False):
    """S is written and read by other threads in every iteration (a loop-back barrier ends the
    body); after the loop, R (sharing no bytes with S) or S itself is written and read back.
    ``early``: E is written before the loop, untouched by it, and read by other threads after it."""

    @T.prim_func
    def main(A: T.Tensor((4, n), "float32"), B: T.Tensor((4, n), "float32"), C: T.Tensor((4, n), "float32"),
             m: T.int32):
        with T.Kernel(4, threads=threads) as bx:
            S = T.alloc_shared((1, n), "float32")
            E = T.alloc_shared((1, n), "float32")
            F = T.alloc_fragment((1, n), "float32")
            G = T.alloc_fragment((1, n), "float32")
            T.clear(F)
            if early:
                T.copy(C[bx, 0], E)
            for k in range(trips if trips else m):
                T.copy(A[bx, 0], S)
                for i, j in T.Parallel(1, n):
                    F[i, j] += S[i, (j + 4) % n]
            T.copy(C[bx, 0], S)
            for i, j in T.Parallel(1, n):
                G[i, j] = F[i, j] + S[i, (j + 8) % n]
            if early:
                for i, j in T.Parallel(1, n):
                    G[i, j] += E[i, (j + 16) % n]
            T.copy(G, B[bx, 0])

    return main


def _source(**kw):
    return tilelang.compile(after_loop(**kw), target=TARGET, pass_configs=CONFIGS).get_kernel_source()


def _after(src):
    """The kernel's loop over k and the text after it."""
    start, end = braced(src, "for (int k = 0;")
    return src[start:end], src[end:]


def test_the_statement_after_a_loop_closed_by_its_barrier_needs_none():
    loop, rest = _after(_source())
    assert loop.rstrip("} \n").endswith("__syncthreads();")    # the loop-back barrier
    into_s = rest.index("(&(C[")
    # the copy into S right after the loop: no barrier before it; one after it (S read by others)
    assert "__syncthreads" not in rest[:into_s]
    assert rest[into_s:].count("__syncthreads();") == 1


def test_a_loop_of_run_time_trips_closes_as_well():
    loop, rest = _after(_source(trips=0))
    assert "__syncthreads" not in rest[:rest.index("(&(C[")]


def test_what_was_pending_before_the_loop_stays_pending():
    """E is written before the loop and not touched in it: the loop's own barrier orders it only
    if the loop runs, so the reader of E after the loop keeps a barrier (here the one that S's
    copy needs anyway) and the copy into S none of its own."""
    src = _source(trips=0, early=True)
    loop, rest = _after(src)
    head = src[:src.index("for (int k = 0;")]
    into_e, into_s = head.index("(&(C["), rest.index("(&(C[")
    assert "__syncthreads" not in head[into_e:]     # nothing in the loop touches E: no barrier before it
    assert "__syncthreads" not in rest[:into_s]
    reads_e = rest.index("+ 256)]")                 # (E's bytes follow S's)
    assert rest[into_s:reads_e].count("__syncthreads();") == 1


def test_with_the_loop_head_barrier_the_statement_after_the_loop_keeps_its_own():
    configs = dict(CONFIGS, **{"tl.enable_loop_head_barrier": True})
    src = tilelang.compile(after_loop(), target=TARGET, pass_configs=configs).get_kernel_source()
    loop, rest = _after(src)
    assert not loop.rstrip("} \n").endswith("__syncthreads();")
    assert "__syncthreads" in rest[:rest.index("(&(C[")]


def _loop(*body):
    k = tirx.Var("k", "int32")
    return tirx.For(k, i32(0), i32(4), tirx.ForKind.SERIAL, seq(list(body)))


def _thread0(*calls):
    tx = tirx.Var("tx", "int32")
    return tirx.IfThenElse(tirx.EQ(tx, i32(0)), seq([evaluate_extern(c) for c in calls]), None)


def test_a_tma_store_that_waits_for_its_reads_is_not_in_flight():
    sync = evaluate_extern("__syncthreads")
    settled = _thread0("tl::tma_store_arrive", "tl::tma_store_wait<0, true>")
    assert not thread_sync._leaves_in_flight(_loop(settled, sync))
    assert not thread_sync._leaves_in_flight(_loop(_thread0("tl::tma_store_arrive", "tl::tma_store_wait<0>"), sync))
    # still in flight: a store group left unwaited, one waited down to one group, a TMA load
    assert thread_sync._leaves_in_flight(_loop(_thread0("tl::tma_store_arrive"), sync))
    assert thread_sync._leaves_in_flight(_loop(_thread0("tl::tma_store_arrive", "tl::tma_store_wait<1>"), sync))
    assert thread_sync._leaves_in_flight(_loop(settled, _thread0("tl::tma_load_2d"), sync))
    assert thread_sync._leaves_in_flight(_loop(_thread0("tl::tma_store_wait<0>", "tl::tma_store_arrive"), sync))


def test_cp_async_groups_retired_in_the_body_are_not_in_flight():
    sync = evaluate_extern("__syncthreads")
    copy, commit = evaluate_extern("tl::cp_async_gs<16>"), evaluate_extern("tl::cp_async_commit")
    assert not thread_sync._leaves_in_flight(_loop(copy, commit, evaluate_extern("tl::cp_async_wait<0>"), sync))
    assert thread_sync._leaves_in_flight(_loop(copy, commit, evaluate_extern("tl::cp_async_wait<1>"), sync))
    assert thread_sync._leaves_in_flight(_loop(evaluate_extern("tl::cp_async_wait<0>"), copy, commit, sync))
    # the wait retires cp.async only: a TMA load before it stays in flight
    assert thread_sync._leaves_in_flight(_loop(_thread0("tl::tma_load_2d"), copy, commit,
                                               evaluate_extern("tl::cp_async_wait<0>"), sync))


def _upstream(folder, name, tag):
    path = examples(folder) / name
    sys.path.insert(0, str(path.parent))
    try:
        spec = importlib.util.spec_from_file_location(tag, path)
        m = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(m)
    finally:
        sys.path.pop(0)
    return m


@pytest.mark.skipif(GDN is None, reason="upstream's examples are not beside the checkout")
def test_upstream_wy_fast_loop_storing_u_closes(monkeypatch):
    """gdn wy_fast's loop over V ends each iteration with U's TMA store (waited for by thread 0)
    and the loop-back barrier: the loop over K right after it gets no barrier (or fence) first.
    (The loop as written: the one-gemm zero-stage promotion, on by default, gives it a ring.)"""
    monkeypatch.setenv("TILELANG_PASS_CONFIGS", '{"tl.enable_zero_stage_promotion_any": false}')
    m = _upstream("gdn", "example_wy_fast.py", "wy_fast_s44")
    k = m.tilelang_recompute_w_u_fwd(1, 1024, 4, 128, 128, T.bfloat16, T.bfloat16, T.float32, T.float32, 64,
                                     block_S=64, block_DK=64, block_DV=32, threads=128, num_stages=0)
    src = k.get_kernel_source()
    loop, rest = braced(src, "for (int i_v = 0;")
    assert src[loop:rest].rstrip("} \n").endswith("__syncthreads();")
    between = src[rest:src.index("for (int i_k = 0;")]
    assert "__syncthreads" not in between and "fence_proxy_async" not in between


@pytest.mark.skipif(GDN is None, reason="upstream's examples are not beside the checkout")
def test_upstream_kkt_loses_the_barrier_after_its_loop_over_k():
    """gdn chunk_scaled_dot_kkt's shape: Beta staged, the loop over K (copy, scale, wgmma), then the
    gates written over Beta's bytes: one barrier after the loop, the loop's own."""
    path = GDN / "example_chunk_scaled_dot_kkt.py"
    sys.path.insert(0, str(GDN))
    try:
        spec = importlib.util.spec_from_file_location("kkt_s43", path)
        m = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(m)
    finally:
        sys.path.pop(0)
    k = m.tilelang_chunk_scaled_dot_kkt_fwd(1, 1024, 4, 128, 64, T.bfloat16, T.bfloat16, T.float32, True, 64, 64,
                                            128, 0)
    src = k.get_kernel_source()
    body = src[src.index("for (int i_k = 0;"):]
    rest = body[body.index("wgmma_gemm_rs"):]
    rest = rest[rest.index("}") + 1:]           # after the loop over K
    assert "__syncthreads" not in rest[:rest.index("G[")]
