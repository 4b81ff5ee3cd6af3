"""Buffer allocation: shared memory, register fragments, thread-local arrays and scalars.

Scopes: ``shared.dyn`` for ``T.alloc_shared`` (the compiler packs every shared buffer into one
dynamic allocation), ``local.fragment`` for ``T.alloc_fragment`` (a block-wide tile distributed
over the threads by layout inference), ``local`` for ``T.alloc_local`` (private to each thread).
"""

from __future__ import annotations

from tvm.tirx.script.builder import ir as builder

from .dtypes import normalize_dtype

SHARED = "shared.dyn"
FRAGMENT = "local.fragment"
LOCAL = "local"
TFLOAT32 = "tl.tfloat32"   # AllocBuffer annotation of a tile declared T.tfloat32


def _shape(shape):
    if isinstance(shape, (list, tuple)):
        return list(shape)
    return [shape]


def _alloc(shape, dtype, scope):
    """The buffer. ``T.tfloat32`` is stored as float32; its allocation keeps the annotation
    ``TFLOAT32`` (the values are tf32: a gemm gives them to the tensor cores as they are)."""
    ann = {TFLOAT32: 1} if _is_tfloat32(dtype) else None
    return builder.alloc_buffer(_shape(shape), normalize_dtype(dtype), scope=scope, annotations=ann)


def _is_tfloat32(dtype) -> bool:
    from .dtypes import dtype as as_dtype

    try:
        return as_dtype(dtype).is_tfloat32()
    except (TypeError, ValueError):
        return False


def alloc_shared(shape, dtype="float16", scope=SHARED):
    """A tile in shared memory, visible to every thread of the block."""
    if scope == "shared":
        scope = SHARED
    return _alloc(shape, dtype, scope)


def alloc_fragment(shape, dtype="float32", scope=FRAGMENT):
    """A tile held in registers, distributed over the block's threads by layout inference."""
    return _alloc(shape, dtype, scope)


def alloc_local(shape, dtype="float32", scope=LOCAL):
    """An array private to each thread."""
    return builder.alloc_buffer(_shape(shape), normalize_dtype(dtype), scope=scope)


def alloc_var(dtype="int32", init=None, scope=LOCAL):
    """A thread-private scalar variable; assign to it with ``x = value``.

    Without ``init`` it starts at zero (upstream's default). A string second argument is the
    scope (upstream's ``T.alloc_var(dtype, "local.var")`` form).
    """
    from tvm import tirx

    if isinstance(init, str):
        init, scope = None, init
    dtype = normalize_dtype(dtype)
    scalar = builder.alloc_scalar(dtype, scope=scope)
    if init is None:
        init = tirx.const(0, dtype)
    elif isinstance(init, (int, float)) and not isinstance(init, bool):
        init = tirx.const(init, dtype)  # a float64 initializer stays float64
    builder.buffer_store(scalar.scalar.source, init, [0])
    return scalar


def alloc_buffer(shape, dtype="float32", scope=SHARED, annotations=None):
    """A buffer in ``scope`` (upstream's general form; ``"shared"`` means dynamic shared memory).
    ``annotations`` (upstream's allocation hints) have no meaning here."""
    if scope == "shared":
        scope = SHARED
    return _alloc(shape, dtype, scope)


class Ref:
    """``@T.macro def m(x: T.Ref)``: ``x`` must be a scalar variable (``T.alloc_var``) of the
    caller, and ``x = v`` in the macro stores to it (``T.Var`` annotates the same)."""

    tl_scalar_ref = True


def alloc_global(shape, dtype="float32", scope="global"):
    """A scratch buffer in global memory, written before (or between) the ``T.Kernel`` blocks of a
    prim_func: the launcher allocates it (uninitialised) at each call and passes it to every
    kernel that uses it, so kernels launched in order can hand partial results to each other."""
    if scope != "global":
        raise ValueError(f"T.alloc_global allocates in scope 'global', not {scope!r}")
    return builder.alloc_buffer(_shape(shape), normalize_dtype(dtype), scope="global")


class _EagerRequest:
    """What ``T.const``/``T.empty`` return while a kernel is being built: the front end resolves
    it at the call (``tl_eager_request``: ``resolve(state)`` with the eager run's state), so this
    layer needs nothing of the front end."""

    tl_eager_request = True

    def __init__(self, kind, args):
        self.kind, self.args = kind, args

    def resolve(self, state):
        if state is None:
            raise RuntimeError(_OUTSIDE[self.kind])
        return getattr(state, self.kind)(*self.args)


_OUTSIDE = {
    "const": "T.const names the dimensions of an eager-style @tilelang.jit function (a function taking "
             "tensors); use it there",
    "empty": "T.empty declares an output of an eager-style @tilelang.jit function (a function taking "
             "tensors); use it there",
}


def _request(kind, args):
    from tvm.script.ir_builder import IRBuilder

    if not IRBuilder.is_in_scope():
        raise RuntimeError(_OUTSIDE[kind])
    return _EagerRequest(kind, args)


def empty(*shape, dtype=None):
    """Eager style: ``C = T.empty((M, N), dtype)`` (or ``T.empty(M, N, dtype=...)``) declares an
    output of an ``@tilelang.jit`` function; it becomes an output parameter of the kernel."""
    if len(shape) >= 1 and isinstance(shape[0], (list, tuple)):
        if len(shape) > 1 and dtype is None:
            dtype = shape[1]
        shape = tuple(shape[0])
    elif shape and dtype is None and not _is_extent(shape[-1]):
        shape, dtype = shape[:-1], shape[-1]
    return _request("empty", (tuple(shape), normalize_dtype(dtype if dtype is not None else "float32")))


def _is_extent(value) -> bool:
    from tvm import ir

    return isinstance(value, int) or ir.is_prim_expr(value)


def const(names: str, dtype="int32"):
    """Eager style: ``M, N = T.const("M, N")`` names dimensions bound from the tensors' shapes
    (or from ``compile(M=...)`` keywords)."""
    return _request("const", (names, normalize_dtype(dtype)))
