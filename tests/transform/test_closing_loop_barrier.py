"""A loop whose every iteration ends with its loop-back barrier leaves nothing pending behind it
(``thread_sync.closes_with_barrier``): the statement after the loop gets no barrier of its own for
what the loop touched (upstream's gdn chunk_scaled_dot_kkt: the loop over K ends with one, then
the gates are written into bytes the loop read). What was pending before the loop still is.
CPU only: the generated CUDA is inspected."""

import importlib.util
import sys
from pathlib import Path

import pytest

import tilelang
import tilelang.language as T

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
