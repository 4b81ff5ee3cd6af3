"""Barriers between hand-written shared-memory accesses under a condition on the thread index
(``thread_sync.indexed_elements``): the points where the enclosing conditions are false are not
enumerated, so an exchange the condition makes disjoint needs no barrier (upstream's issue 1026:
under ``tx % 2 == 0`` a thread reads ``s[tx]`` and writes ``s[tx ^ 1]``, the odd elements no
thread of the branch reads), and one it does not keeps its barrier. CPU: generated source."""

import pytest

import tilelang
import tilelang.language as T

# kind -> (the branch's two statements, barriers inside the branch's `if`, expected s after it)
KINDS = {
    "xor1": (0, lambda s: [s[i] if i % 2 == 0 else s[i - 1] for i in range(32)]),
    "xor2": (1, lambda s: [s[i ^ 2] if i % 2 == 0 else s[i] for i in range(32)]),
    "half": (0, lambda s: [s[i] if i < 16 else s[i - 16] for i in range(32)]),
    "shift": (1, lambda s: [s[i + 1] if i < 16 else s[i] for i in range(32)]),
}


def exchange(kind):
    @T.prim_func
    def k(X: T.Tensor((32,), T.float32), O: T.Tensor((32,), T.float32)):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding()
            s = T.alloc_shared((32,), T.float32)
            s[tx] = X[tx]
            if kind == "xor1":
                if tx % 2 == 0:
                    a = s[tx]
                    s[tx ^ 1] = a
            elif kind == "xor2":
                if tx % 2 == 0:
                    a = s[tx]
                    s[tx ^ 2] = a
            elif kind == "half":
                if tx < 16:
                    a = s[tx]
                    s[tx + 16] = a
            else:
                if tx < 16:
                    a = s[tx + 1]
                    s[tx] = a
            O[tx] = s[tx]
    return k


@pytest.mark.parametrize("kind", list(KINDS))
def test_barrier_inside_a_guarded_exchange_only_where_threads_meet(kind):
    src = tilelang.compile(exchange(kind), target="sm_90a").get_kernel_source()
    body = src[src.index('extern "C" __global__'):]
    branch = body[body.index("a = ((float*)smem)"):body.index("] = a;")]   # the read, up to the write
    syncs = branch.count("__syncthreads") + branch.count("__syncwarp")
    assert syncs == KINDS[kind][0], branch
    # before the branch (s written by every thread) and after it (read back): always ordered
    assert body.count("__syncthreads") >= 2
