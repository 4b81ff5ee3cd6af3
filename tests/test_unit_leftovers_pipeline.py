"""T.Pipelined bodies whose copy reads a value the body itself computes, and threaded copies
into shared memory with more threads than vectors:

* ``offset = idx_shared[0]; T.copy(A[offset], S)``: the copy needs this iteration's ``offset``,
  so it is not issued ahead (it runs in order, after the statements defining it);
* a boundary-guarded global->shared copy: threads past the tile store nothing (their zero fill
  would race with the thread that owns the element).
"""

from __future__ import annotations

import tilelang
import tilelang.language as T


def _body(source):
    return source[source.index('extern "C" __global__'):]


def _producer_bind():
    @T.prim_func
    def main(A: T.Tensor((64,), T.float16), B: T.Tensor((64,), T.float16)):
        with T.Kernel(1, threads=256):
            index_shared = T.alloc_shared((1,), T.int32)
            A_shared = T.alloc_shared((32,), T.float16)
            for k in T.Pipelined(2, num_stages=2):
                index_shared[0] = k * 32
                offset = index_shared[0]
                T.copy(A[offset], A_shared)
                for i in T.Parallel(32):
                    B[k * 32 + i] = A_shared[i]
    return main


def test_copy_reading_a_body_value_is_not_issued_ahead():
    body = _body(tilelang.lower(_producer_bind(), "sm_90a").source)
    define = body.index("offset = ")
    assert body.index("A[", define) > define          # the load of A comes after offset is set
    assert body.count("A[") == 1                       # no prologue copy before the loop


def test_independent_copy_is_still_a_producer():
    @T.prim_func
    def main(A: T.Tensor((64,), T.float16), B: T.Tensor((64,), T.float16)):
        with T.Kernel(1, threads=32):
            A_shared = T.alloc_shared((32,), T.float16)
            for k in T.Pipelined(2, num_stages=2):
                T.copy(A[k * 32], A_shared)
                for i in T.Parallel(32):
                    B[k * 32 + i] = A_shared[i]

    src = _body(tilelang.lower(main, "sm_90a").source)
    assert "cp_async" in src


def test_guarded_copy_threads_past_the_tile_store_nothing():
    body = _body(tilelang.lower(_producer_bind(), "sm_90a").source)
    tail = body.index("((int)threadIdx.x) < 32) {")
    zero = body.index("__float2half_rn(0x0p+0f", tail)
    assert tail < zero   # the zero fill sits inside the thread-tail guard
