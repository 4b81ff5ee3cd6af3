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


def _shape(shape):
    if isinstance(shape, (list, tuple)):
        return list(shape)
    return [shape]


def alloc_shared(shape, dtype="float16", scope=SHARED):
    """A tile in shared memory, visible to every thread of the block."""
    if scope == "shared":
        scope = SHARED
    return builder.alloc_buffer(_shape(shape), normalize_dtype(dtype), scope=scope)


def alloc_fragment(shape, dtype="float32", scope=FRAGMENT):
    """A tile held in registers, distributed over the block's threads by layout inference."""
    return builder.alloc_buffer(_shape(shape), normalize_dtype(dtype), scope=scope)


def alloc_local(shape, dtype="float32", scope=LOCAL):
    """An array private to each thread."""
    return builder.alloc_buffer(_shape(shape), normalize_dtype(dtype), scope=scope)


def alloc_var(dtype="int32", init=None, scope=LOCAL):
    """A thread-private scalar variable; assign to it with ``x = value``."""
    scalar = builder.alloc_scalar(normalize_dtype(dtype), scope=scope)
    if init is not None:
        builder.buffer_store(scalar.scalar.source, init, [0])
    return scalar


def alloc_global(shape, dtype="float32"):
    raise NotImplementedError("T.alloc_global is not supported yet: pass the buffer as a kernel argument")


def empty(shape, dtype="float32"):
    """Eager style: ``C = T.empty((M, N), dtype)`` declares an output of an ``@tilelang.jit``
    function; the decorator turns it into an output parameter."""
    raise RuntimeError("T.empty declares an output of an eager-style @tilelang.jit function "
                       "(a function taking tensors); use it there, at the top level of the body")


def const(names: str, dtype="int32"):
    """Eager style: ``M, N = T.const("M, N")`` names dimensions bound from the tensors' shapes."""
    raise RuntimeError("T.const names the dimensions of an eager-style @tilelang.jit function "
                       "(a function taking tensors); use it there, at the top level of the body")
