"""Buffer views: ``T.reshape(buf, shape)`` and ``T.view(buf, shape=None, dtype=None)``.

Both return a new buffer over the same storage as ``buf`` (it shares ``buf.data``, no copy), with
another shape and, for ``T.view``, another element type. The total size in bits must match; a
mismatch raises ``AssertionError`` at the call (upstream's type). The view keeps ``buf``'s
memory scope. ``strides=`` (upstream's spelling, in elements of the view's type) orders its
elements in the storage another way than row-major, e.g. a transposed view.

Views are declared inside a kernel (a ``DeclBuffer`` over ``buf``'s storage). Views of shared or
fragment buffers are resolved by the compiler (``transform.kernel.resolve_views``), so ``buf``
keeps its one layout: with the same element type, an access to the view addresses ``buf`` at the same row-major
position; a view of a shared buffer as another element type (8 to 64 bits, or float4_e2m1fn with
one of those) reads the same bytes,
each through the ``buf`` element holding it (swizzle included): a narrower view takes bits of one
element, a wider one joins several (stores only through views at least as wide as ``buf``'s type).
``T.reduce_*`` / ``T.cumsum`` of a same-type view run on a buffer of the view's shape, filled from
the view before and written back after when the op writes it.
"""

from __future__ import annotations

from tvm import DataType, sym, tirx
from tvm.script.ir_builder import IRBuilder
from tvm.tirx.script.builder import ir as builder

from .dtypes import normalize_dtype


def _bits(shape, dtype):
    width = DataType(dtype)
    size = tirx.IntImm("int64", width.bits * width.lanes)
    for extent in shape:
        size = size * (tirx.IntImm("int64", extent) if isinstance(extent, int) else tirx.Cast("int64", extent))
    return size


def _same_size(shape, dtype, src) -> bool:
    new, old = _bits(shape, dtype), _bits(src.shape, str(src.dtype))
    return sym.Analyzer().can_prove_equal(new, old)


def view(src, shape=None, dtype=None, strides=None):
    """A view of ``src`` with ``shape`` (default: ``src``'s) and element ``dtype`` (default: ``src``'s);
    ``strides`` (in elements of ``dtype``) place its elements in the storage instead of row-major
    order (``T.view(x, (N, M), strides=(1, N))``: ``x``'s transpose)."""
    shape = list(src.shape) if shape is None else (list(shape) if isinstance(shape, (list, tuple)) else [shape])
    dtype = str(src.dtype) if dtype is None else normalize_dtype(dtype)
    if strides is not None:
        strides = list(strides) if isinstance(strides, (list, tuple)) else [strides]
        if len(strides) != len(shape):
            raise ValueError(f"T.view: {len(shape)} strides expected for shape {shape}, got {len(strides)}")
        if any(isinstance(st, int) and st < 0 for st in strides):
            raise ValueError(f"T.view: strides must not be negative, got {strides}")
    if not _same_size(shape, dtype, src):
        raise AssertionError(f"T.reshape/T.view: {src.name} has shape {list(src.shape)} of {src.dtype}, which is not "
                         f"the same number of bits as shape {shape} of {dtype}")
    if not IRBuilder.is_in_scope():
        raise RuntimeError("T.reshape/T.view are used inside a kernel: there the view is declared over the "
                           f"storage of {src.name} (a DeclBuffer); a TVM 0.27 buffer object alone carries no "
                           "storage to share")
    return builder.decl_buffer(shape, dtype, data=src.data, scope=src.scope(), strides=strides)


def reshape(src, shape):
    """``src`` with a new ``shape`` of the same number of elements (a view, no copy)."""
    return view(src, shape)
