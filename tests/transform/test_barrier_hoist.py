"""Barriers that only part of the threads would reach, split out of their `if` (barrier_hoist)."""

import re

import pytest

import tilelang
import tilelang.language as T
from tilelang.jit import nvcc


def _body(func, arch="sm_90a"):
    art = tilelang.lower(func, arch)
    assert nvcc.compile_cubin(art.source, art.arch, art.compile_flags)[:4] == b"\x7fELF"
    return art.source[art.source.index('extern "C" __global__'):]


def _exchange(threads, cond, user_sync):
    @T.prim_func
    def kernel(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=threads):
            tx = T.get_thread_binding()
            S = T.alloc_shared((128,), "float32")
            if cond(A, tx):
                S[tx] = A[tx]
                if user_sync:
                    T.sync_threads()
                B[tx] = S[47 - tx]
    return kernel


@pytest.mark.parametrize("user_sync", [False, True], ids=["ours", "users"])
@pytest.mark.parametrize("threads, cond, split", [
    (64, lambda A, tx: tx < 48, "if (((int)threadIdx.x) < 48) {"),            # part of two warps
    (128, lambda A, tx: A[tx] > 0.0, "if (cond) {"),                            # a per-thread value
])
def test_barrier_splits_the_branch(threads, cond, split, user_sync):
    body = _body(_exchange(threads, cond, user_sync))
    first = body.index(split)
    rest = body[first + len(split):]
    assert rest.index("}") < rest.index("__syncthreads();") < rest.index(split)
    assert "B[" not in rest[:rest.index("}")] and "B[" in rest[rest.index(split):]     # the store, then the read
    assert body.count("__syncthreads();") == 1


def test_condition_read_from_memory_is_evaluated_once():
    # the branch writes what the condition reads: both parts take the first evaluation
    @T.prim_func
    def kernel(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding()
            S = T.alloc_shared((64,), "float32")
            if A[tx] > 0:
                S[tx] = A[tx]
                A[tx] = 0.0
                B[tx] = S[63 - tx]

    body = _body(kernel)
    assert "bool cond = (0x0p+0f/*0.000000e+00*/ < A[((int)threadIdx.x)]);" in body
    assert body.count("if (cond) {") == 2


def test_users_barrier_over_whole_warps_is_a_named_barrier():
    # upstream: tl::__sync_thread_partial(3, 64)
    body = _body(_exchange(128, lambda A, tx: tx < 64, True))
    assert "tl::named_barrier_sync(3, 64);" in body and "__syncthreads" not in body


def test_loop_register_and_else_move_with_the_split():
    @T.prim_func
    def kernel(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32"), C: T.Tensor((128,), "int32")):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding()
            s = T.alloc_shared((128,), "float32")
            if tx < 48:
                base = C[tx] * 2
                for i in range(4):
                    s[tx] = A[tx] + i + base
                    B[tx] = B[tx] + s[47 - tx]
                B[tx + 64] = base
            else:
                B[tx] = 1.0

    body = _body(kernel)
    loop = body[body.index("for (int i = 0; i < 4; ++i) {"):]
    # the register is declared before the parts; the else stays with the first part; in the
    # loop, a barrier between the store and the read and one before the next iteration's store
    assert body.index("int base;") < body.index("if (((int)threadIdx.x) < 48)") < body.index("} else {")
    assert re.search(r"\}\s*__syncthreads\(\);\s*if \(\(\(int\)threadIdx.x\) < 48\) \{\s*B\[", loop)
    assert loop.count("__syncthreads();") == 2


def test_nested_branch_splits_through_both():
    @T.prim_func
    def kernel(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding()
            S = T.alloc_shared((64,), "float32")
            if tx < 48:
                if A[tx] > 0:
                    S[tx] = A[tx]
                    B[tx] = S[47 - tx]

    body = _body(kernel)
    # every thread meets the one barrier: it stands at the top level of the kernel body
    assert re.search(r"\n  __syncthreads\(\);\n", body)


def test_barrier_in_a_loop_of_per_thread_trips_is_not_split():
    # no barrier can be met there: an auto barrier stays left out (tilelang-check warns, TL0404),
    # a user's stays where it was written
    @T.prim_func
    def kernel(Counts: T.Tensor((64,), "int32"), A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding()
            S = T.alloc_shared((64,), "float32")
            if tx < 48:
                for k in T.serial(Counts[tx]):
                    S[tx] = A[tx] + k
                    T.sync_threads()
                    B[tx] = S[47 - tx]

    body = _body(kernel)
    branch = body[body.index("if (((int)threadIdx.x) < 48) {"):]
    assert branch.index("for (int k") < branch.index("__syncthreads();")
