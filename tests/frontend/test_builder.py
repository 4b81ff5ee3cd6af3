"""The builder front end: kernel bodies run as Python (closures, globals, macros returning values,
eager bodies with derived shapes) and keep the user's spans."""

import pytest
import torch
from tvm import tirx

import tilelang
import tilelang.language as T
from tilelang.frontend import ParseError
from tilelang.tir_utils import walk_stmts
from tilelang.transform.kernel import analyze_kernel, op_name, tile_calls

GROUP = 64  # a module global read by a kernel body


def _stmts(func, kind):
    out = []
    walk_stmts(func.body, lambda s: out.append(s) if isinstance(s, kind) else None)
    return out


def test_closure_and_module_global_are_visible():
    scale = 3.0

    @T.prim_func
    def k(A: T.Tensor((GROUP,), "float32")):
        with T.Kernel(1, threads=GROUP):
            for i in T.Parallel(GROUP):
                A[i] = A[i] * scale

    store = _stmts(k, tirx.BufferStore)[0]
    assert "3" in str(store.value) and int(k.params[0].shape[0] if hasattr(k.params[0], "shape") else GROUP) == 64


def test_macro_returns_values_buffers_and_python():
    @T.macro
    def plus_one(x):
        y = x + 1.0
        return y

    @T.macro
    def make_var(init):
        return T.alloc_var(T.float32, init=init)

    seen = []

    @T.prim_func
    def k(A: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=32):
            a = plus_one(4.0)
            b = make_var(A[0])
            seen.extend([a, b])
            A[1] = b

    assert seen[0] == 5.0
    assert isinstance(seen[1], tirx.expr.ExprOp) or "TensorLoad" in type(seen[1]).__name__


def test_python_if_and_loop_are_compile_time():
    flags = [True, False]

    @T.prim_func
    def k(A: T.Tensor((4,), "int32")):
        with T.Kernel(1, threads=1):
            for idx, flag in enumerate(flags):
                if flag:
                    A[idx] = 1
                else:
                    A[idx] = 2

    values = [int(s.value) for s in _stmts(k, tirx.BufferStore)]
    assert values == [1, 2] and not _stmts(k, tirx.IfThenElse)


def test_tir_if_while_and_swap():
    @T.prim_func
    def k(A: T.Tensor((2,), "float32")):
        with T.Kernel(1, threads=1):
            a = T.alloc_var(T.float32, A[0])
            b = T.alloc_var(T.float32, A[1])
            a, b = b, a
            if a > b:
                A[0], A[1] = a, b

    script = k.script()
    assert "if" in script
    # the swap goes through snapshots: a's new value does not feed b's
    assert script.count("tmp") >= 2


def test_stepped_serial_binds_start_plus_k_step():
    @T.prim_func
    def k(A: T.Tensor((10,), "int32")):
        with T.Kernel(1, threads=1):
            for i in T.serial(10, 0, -1):
                A[10 - i] = i

    src = tilelang.lower(k, "sm_90a").source
    assert "< 10" in src and "(10 - v)" in src
    assert not isinstance(T.serial(1, 10, 2), tirx.script.builder.frame.ForFrame) if hasattr(tirx, "script") else True


def test_undefined_name_is_located_at_the_name():
    with pytest.raises(ParseError) as info:
        @T.prim_func
        def k(A: T.Tensor((8,), "float16")):
            with T.Kernel(1, threads=32):
                T.copy(A, missing_buffer)  # noqa: F821

    err = info.value
    assert err.message == "Undefined variable: missing_buffer"
    line = test_undefined_name_is_located_at_the_name.__code__.co_firstlineno + 5
    assert (err.span.line, err.span.column) == (line, 27)
    assert err.span.end_column == 27 + len("missing_buffer")


def test_symbolic_shape_expression_as_buffer_dimension():
    rows = T.dynamic("rows")

    @T.prim_func
    def k(A: T.Tensor((rows, 32), "float32"), S: T.Tensor((T.ceildiv(rows, 32),), "float32")):
        with T.Kernel(T.ceildiv(rows, 32), threads=32) as bx:
            S[bx] = A[bx * 32, 0]

    assert "rows" in str(k.params[1]) or "rows" in k.script()


@tilelang.jit
def _eager_cast(X, blk_m: int = 8):
    M, N = T.const("M, N")
    dtype = T.float
    group_size = 32
    assert N % group_size == 0, "N must be a multiple of the group"
    X: T.Tensor((M, N), dtype)
    Y = T.empty((M, T.ceildiv(N, group_size)), dtype)
    width = group_size if N > 32 else N
    with T.Kernel(T.ceildiv(M, blk_m), threads=128) as bx:
        acc = T.alloc_fragment((blk_m, width), dtype)
        red = T.alloc_fragment((blk_m,), dtype)
        T.copy(X[bx * blk_m, 0], acc)
        T.reduce_max(acc, red, dim=1)
        for i in T.Parallel(blk_m):
            Y[bx * blk_m + i, 0] = red[i]
    return Y


def test_eager_body_with_derived_shapes_dtype_and_assert():
    f = _eager_cast.get_prim_func(torch.empty(64, 64))
    assert [str(p.name) for p in f.params] == ["X", "Y"]
    y = f.params[1]
    assert [int(d) for d in y.shape] == [64, 2] and str(y.dtype) == "float32"
    with pytest.raises(ParseError, match="multiple of the group"):
        _eager_cast.get_prim_func(torch.empty(64, 48))


def test_eager_compile_keywords_give_constants_and_dynamic_stays_symbolic():
    @tilelang.jit
    def transpose(X, Y, block: int = 32):
        M, N = T.const("M N")
        X: T.Tensor[(M, N), T.float32]
        Y: T.Tensor[(N, M), T.float32]
        with T.Kernel(T.ceildiv(M, block), T.ceildiv(N, block), threads=128) as (bx, by):
            tile = T.alloc_shared((block, block), T.float32)
            T.copy(X[bx * block, by * block], tile)
            for i, j in T.Parallel(block, block):
                Y[by * block + j, bx * block + i] = tile[i, j]

    f = transpose.get_prim_func(M=128, N=64)
    assert [int(d) for d in f.params[1].shape] == [64, 128]

    @tilelang.jit
    def copy_rows(A):
        N = T.dynamic("N")
        A: T.Tensor((N, 32), T.float32)
        B = T.empty((N, 32), T.float32)
        with T.Kernel(T.ceildiv(N, 32), threads=128) as bx:
            T.copy(A[bx * 32:bx * 32 + 32, 0:32], B[bx * 32:bx * 32 + 32, 0:32])
        return B

    f = copy_rows.get_prim_func(torch.empty(96, 32))
    assert isinstance(f.params[0].shape[0], tirx.Var)


def test_eager_kernel_keeps_user_spans():
    f = _eager_cast.get_prim_func(torch.empty(64, 64))
    red = [c for c in tile_calls(analyze_kernel(f).body) if op_name(c) == "reduce"][0]
    line = _eager_cast.__wrapped__.__code__.co_firstlineno + 13
    assert red.span.line == line and red.span.column == 9


def test_negative_range_step_counts_down():
    @T.prim_func
    def k(A: T.Tensor((10,), "int32")):
        with T.Kernel(1, threads=1):
            for i in range(10, 0, -1):
                A[10 - i] = i

    src = tilelang.lower(k, "sm_90a").source
    assert "< 10; ++" in src and "(10 - " in src  # ten iterations, i = 10 - k


def test_ref_macro_parameter_takes_a_scalar_variable():
    @T.macro
    def set_one(x: T.Ref):
        x = 1  # noqa: F841 - stores to the caller's variable

    @T.prim_func
    def ok(A: T.Tensor((1,), "int32")):
        with T.Kernel(1, threads=1):
            x = T.alloc_var(T.int32)
            set_one(x)
            A[0] = x

    assert len(_stmts(ok, tirx.BufferStore)) == 3  # x = 0 (alloc_var's default), x = 1, A[0] = x
    with pytest.raises(ParseError, match="T.Var/T.Ref"):
        @T.prim_func
        def bad(A: T.Tensor((1,), "int32")):
            with T.Kernel(1, threads=1):
                set_one(3)


def test_eager_strided_subscript_annotation_and_tuning_factory():
    @tilelang.jit
    def copy(A, B):
        N, M, sN, sM = T.const("N, M, sN, sM")
        A: T.StridedTensor[(N, M), (sN, sM), T.float32]
        B: T.Tensor[(N, M), T.float32]
        with T.Kernel(T.ceildiv(N, 32), threads=128) as bx:
            T.copy(A[bx * 32:bx * 32 + 32, 0:M], B[bx * 32:bx * 32 + 32, 0:M])

    base = torch.empty(64, 2, 32)
    f = copy.get_prim_func(base[:, 0, :], torch.empty(64, 32))
    assert [int(s) for s in f.params[0].strides] == [64, 1]
    factory = copy.tuning_factory()
    assert "consts" in str(__import__("inspect").signature(factory)) and factory.__name__ == "copy"


def test_const_outside_a_kernel_build_is_a_clear_error():
    with pytest.raises(RuntimeError, match="eager-style"):
        T.empty((4,), T.float32)


def test_prim_func_in_the_eager_style_records_out_idx():
    @T.prim_func
    def kernel(A):
        A: T.Tensor[(128, 128), T.float32]
        B = T.empty((128, 128), T.float32)
        with T.Kernel(1, threads=128):
            for i, j in T.Parallel(128, 128):
                B[i, j] = A[i, j] + 1.0
        return B

    assert [str(p.name) for p in kernel.params] == ["A", "B"]
    assert list(kernel.attrs["tilelang_out_idx"]) == [-1]


def _is_hopper():
    return True


@tilelang.jit
def _flagged_copy(A, block=64):
    N = T.const("N")
    A: T.Tensor((N,), T.float32)
    out = T.empty((N,), T.float32)
    use_shared = _is_hopper()       # a Python bool: a compile-time flag, as upstream keeps it
    scale = 2                       # a Python int before the kernel: a constant, not a local scalar
    with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
        s = T.alloc_shared((block,), T.float32)
        if use_shared:
            T.copy(A[bx * block], s)
            for i in T.Parallel(block):
                out[bx * block + i] = s[i] * scale
        else:
            for i in T.Parallel(block):
                out[bx * block + i] = A[bx * block + i] * 3
    return out


def test_python_values_bound_before_the_kernel_stay_compile_time():
    """upstream's convolution example: ``is_hopper = check_hopper()`` above ``with T.Kernel`` and
    ``if is_hopper:`` inside picks a branch at build time (it used to become a host-side local
    scalar, refused with TL0002 'written outside T.Kernel and read inside')."""
    f = _flagged_copy.get_prim_func(N=256)
    text = f.script()
    assert "if " not in text and "T.float32(3.0)" not in text and "T.float32(2.0)" in text
    assert [s.buffer.scope() for s in _stmts(f, tirx.AllocBuffer)] == ["shared.dyn"]
    tilelang.compile(f, target="cuda -arch=sm_90a").get_kernel_source()
