"""A serial loop (or sequence, or branch) of tile statements has known per-thread shared elements when
each statement in it does (``thread_sync.compound_elements``: the union over its iterations), so
the statement after it needs no barrier where every element both touch belongs to one thread:
upstream's rms_norm_splitk stages each chunk of a row through A_shared thread by thread in both
passes, and its second pass needs no barrier after the first. Where the statement after the loop
reads elements another thread wrote in it, or the loop addresses shared memory through its own
loop variable, the barrier stays. CPU only: the generated CUDA is inspected."""

import importlib.util
import sys
from pathlib import Path

import pytest

import tilelang
import tilelang.language as T
from tilelang.transform import thread_sync
from tvm import tirx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from upstream_paths import examples  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_loop_back_barrier import braced  # noqa: E402

NORM = examples("norm")
TARGET = "cuda -arch=sm_90a"
CONFIGS = {"tl.disable_tma_lower": True}


def two_passes(n=512, trips=4, reduce=False):
    """Pass 1 copies chunks of a row into S and accumulates S into F (each thread its own elements);
    pass 2 writes F (times the row's sum with ``reduce``) into S and copies S out."""

    @T.prim_func
    def main(A: T.Tensor((8, n * trips), "float32"), B: T.Tensor((8, n * trips), "float32")):
        with T.Kernel(8, threads=128) as bx:
            S = T.alloc_shared((1, n), "float32")
            F = T.alloc_fragment((1, n), "float32")
            R = T.alloc_fragment((1,), "float32")
            T.clear(F)
            for k in T.Serial(trips):
                T.copy(A[bx, k * n], S)
                for i, j in T.Parallel(1, n):
                    F[i, j] += S[i, j]
            T.clear(R)
            if reduce:
                T.reduce_sum(F, R, dim=1, clear=False)
            for k in T.Serial(trips):
                for i, j in T.Parallel(1, n):
                    S[i, j] = F[i, j] * R[0]
                T.copy(S, B[bx, k * n])

    return main


def _between(src):
    """The text between the kernel's two loops over k."""
    first = braced(src, "for (int k = 0;")
    return src[first[1]:src.index("for (int k_1 = 0;")]


def _source(**kw):
    return tilelang.compile(two_passes(**kw), target=TARGET, pass_configs=CONFIGS).get_kernel_source()


def test_second_pass_over_the_same_elements_needs_no_barrier():
    src = _source()
    assert "__syncthreads" not in _between(src)
    assert "__syncthreads" not in src      # (each thread touches only its own elements of S)


def test_a_reduction_between_the_passes_keeps_only_its_own_barriers():
    src = _source(reduce=True)
    between = _between(src)
    assert "AllReduce" in between and "__syncthreads" not in between


def read_elsewhere(n=512, trips=4):
    """Pass 1 only copies into S (no reader in the loop: no barrier closes it); after it, every
    thread reads elements another thread's copy wrote."""

    @T.prim_func
    def main(A: T.Tensor((8, n * trips), "float32"), B: T.Tensor((8, n), "float32")):
        with T.Kernel(8, threads=128) as bx:
            S = T.alloc_shared((1, n), "float32")
            F = T.alloc_fragment((1, n), "float32")
            for k in T.Serial(trips):
                T.copy(A[bx, k * n], S)
            for i, j in T.Parallel(1, n):
                F[i, j] = S[i, (j + 4) % n]
            T.copy(F, B[bx, 0])

    return main


def test_a_reader_of_other_threads_elements_after_the_loop_waits():
    src = tilelang.compile(read_elsewhere(), target=TARGET, pass_configs=CONFIGS).get_kernel_source()
    start, end = braced(src, "for (int k = 0;")
    assert "__syncthreads();" in src[end:]


def test_shared_index_vars_names_the_variables_of_shared_addresses():
    @T.prim_func
    def main(A: T.Tensor((4, 64), "float32")):
        with T.Kernel(1, threads=64):
            S = T.alloc_shared((2, 64), "float32")
            for k in T.Serial(4):
                T.copy(A[k, 0], S[k % 2, :])

    loops = []
    tirx.stmt_functor.post_order_visit(main.body, lambda s: loops.append(s) if isinstance(s, tirx.For) else None)
    copy = loops[0].body
    names = {v.name for v in thread_sync._shared_index_vars(copy)}
    assert names == {"k"}      # (A's index k too, but only S's start counts)


@pytest.mark.skipif(NORM is None, reason="upstream's examples are not beside the checkout")
def test_upstream_rms_norm_splitk_has_no_barrier_between_its_passes():
    path = NORM / "rms_norm.py"
    spec = importlib.util.spec_from_file_location("rms_norm_s47", path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    src = m.rms_norm_splitk.compile(M=1024, N=4096, blk_m=1, blk_k=512).get_kernel_source()
    assert "AllReduce" in src and "__syncthreads" not in src
