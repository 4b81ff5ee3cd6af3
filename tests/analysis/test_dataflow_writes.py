"""The checker on kernels the compiler accepts: writes through extern calls, access pointers and
``T.tvm_thread_allreduce`` outputs count (TL0401); an input skipped for the bound values is no
unwritten output (TL0402); prim_funcs the compiler cuts into kernels (host-level bindings before
``with T.Kernel``, two kernels) are checked part by part, as the compiler compiles them."""

from __future__ import annotations

import tilelang
import tilelang.language as T
from tilelang.analysis import CheckContext, check


def _codes(func, out_idx=None):
    return [d.code for d in check(func, "sm_90a", CheckContext(out_idx=out_idx))]


def gemv_allreduce(N=1024, K=1024):
    @T.prim_func
    def kernel(A: T.Tensor((K,), "float16"), B: T.Tensor((N, K), "float16"), C: T.Tensor((N,), "float16")):
        with T.Kernel(N, threads=128) as bn:
            tk = T.get_thread_binding(0)
            acc = T.alloc_local((1,), "float32")
            reduced = T.alloc_local((1,), "float32")
            acc[0] = 0.0
            for k in T.serial(K // 128):
                acc[0] += A[k * 128 + tk].astype("float32") * B[bn, k * 128 + tk].astype("float32")
            with T.attr(T.comm_reducer(lambda x, y: x + y, [T.cast(0, "float32")]), "reduce_scope",
                        T.reinterpret(T.uint64(0), dtype="handle")):
                T.evaluate(T.tvm_thread_allreduce(T.uint32(1), acc[0], True, reduced[0], tk, dtype="handle"))
            C[bn] = reduced[0]

    return kernel


def extern_dequant(N=1024):
    @T.prim_func
    def kernel(Q: T.Tensor((N,), "int8"), Y: T.Tensor((N,), "float16")):
        with T.Kernel(N // 128, threads=128) as bx:
            tx = T.get_thread_binding(0)
            packed = T.alloc_local((4,), "int8")
            out = T.alloc_local((4,), "float16")
            for v in T.vectorized(4):
                packed[v] = Q[bx * 128 + tx * 0 + v]
            T.call_extern("handle", "decode_i8x4", T.access_ptr(packed, "r"), T.access_ptr(out, "w"))
            Y[bx * 128 + tx] = out[0]

    return kernel


def optional_bias(N=1024, with_bias=False):
    @T.prim_func
    def kernel(X: T.Tensor((N,), "float32"), Bias: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(N // 128, threads=128) as bx:
            x = T.alloc_fragment((128,), "float32")
            T.copy(X[bx * 128], x)
            if with_bias:
                for i in T.Parallel(128):
                    x[i] += Bias[bx * 128 + i]
            T.copy(x, Y[bx * 128])

    return kernel


@tilelang.jit
def eager_dynamic(A, block=64):
    M = T.dynamic("m")
    A_shape = (M, 64)            # host-level bindings before the kernel (A_shape_0 = m)
    A: T.Tensor(A_shape, "float32")
    B = T.empty((M, 64), "float32")
    with T.Kernel(T.ceildiv(M, block), threads=128) as bx:
        x = T.alloc_fragment((block, 64), "float32")
        T.copy(A[bx * block, 0], x)
        T.copy(x, B[bx * block, 0])
    return B


def two_kernels(N=1024):
    @T.prim_func
    def kernel(X: T.Tensor((N,), "float32"), Tmp: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(N // 128, threads=128) as bx:
            x = T.alloc_fragment((128,), "float32")
            T.copy(X[bx * 128], x)
            T.copy(x, Tmp[bx * 128])
        with T.Kernel(N // 128, threads=128) as bx:
            y = T.alloc_fragment((128,), "float32")
            T.copy(Tmp[bx * 128], y)
            T.copy(y, Y[bx * 128])

    return kernel


def test_thread_allreduce_output_is_a_write():
    assert "TL0401" not in _codes(gemv_allreduce())


def test_extern_call_writes_through_a_write_access_pointer():
    assert "TL0401" not in _codes(extern_dequant())


def test_an_input_skipped_for_the_bound_values_is_no_unwritten_output():
    assert "TL0402" not in _codes(optional_bias(with_bias=False))
    assert "TL0402" not in _codes(optional_bias(with_bias=True))
    assert "TL0402" in _codes(optional_bias(), out_idx=[1])      # declared an output: still reported


def test_host_level_bindings_before_the_kernel_are_accepted():
    from tilelang.transform.kernel import analyze_kernel, split_kernels

    func = eager_dynamic.get_prim_func(block=64)
    assert split_kernels(func) is not None       # the compiler cuts the bindings off first
    assert _codes(func) == []


def test_two_kernels_are_checked_part_by_part():
    # Y is written by the second kernel only: no TL0402 for the first part
    assert _codes(two_kernels(), out_idx=[2]) == []


def flagged_metadata(else_zeroes=True):
    """TileOPs' persistent grouped GEMM: a tile's metadata is written where ``i < total`` (which
    sets ``v[0] = 1``, else 0) and read only under ``if v[0] != 0``."""
    @T.prim_func
    def kernel(A: T.Tensor((1024,), "float32"), total: T.int32, B: T.Tensor((1024,), "float32")):
        with T.Kernel(4, threads=32) as bx:
            ms = T.alloc_local((1,), "int32")
            v = T.alloc_local((1,), "int32")
            v[0] = 0
            for w in T.serial(4):
                i = bx * 4 + w
                if i < total:
                    ms[0] = i * 64
                    v[0] = 1
                else:
                    if else_zeroes:
                        v[0] = 0
                if v[0] != 0:
                    B[ms[0] + T.get_thread_binding()] = A[ms[0] + T.get_thread_binding()]
    return kernel


def test_a_read_under_the_flag_its_write_set_is_initialised():
    assert "TL0401" not in _codes(flagged_metadata())
    # without the else's reset the flag may still be set from an earlier iteration's write: no proof
    assert "TL0401" in _codes(flagged_metadata(else_zeroes=False))


def running_min(first_writes=True):
    """dlss5's history clamp: ``if j == 0: lo[0] = x`` else ``lo[0] = min(lo[0], x)`` over an unrolled
    loop; the else-branch runs only in later iterations, after the first one wrote ``lo``."""
    @T.prim_func
    def kernel(A: T.Tensor((1024, 9), "float32"), B: T.Tensor((1024,), "float32")):
        with T.Kernel(8, threads=128) as bx:
            lo = T.alloc_local((1,), "float32")
            i = bx * 128 + T.get_thread_binding(0)
            for j in T.unroll(9):
                if j == (0 if first_writes else 1):
                    lo[0] = A[i, j]
                else:
                    lo[0] = T.min(lo[0], A[i, j])
            B[i] = lo[0]
    return kernel


def test_the_else_of_a_first_iteration_branch_sees_its_writes():
    assert "TL0401" not in _codes(running_min())
    # ``if j == 1:``: the else-branch runs first, reading lo before anything wrote it
    assert "TL0401" in _codes(running_min(first_writes=False))
