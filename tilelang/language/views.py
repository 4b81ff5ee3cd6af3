"""Buffer views: ``T.reshape(buf, shape)`` and ``T.view(buf, shape=None, dtype=None)``.

Both return a new buffer over the same storage as ``buf`` (it shares ``buf.data``, no copy), with
another shape and, for ``T.view``, another element type. The total size in bits must match; a
mismatch raises ``ValueError`` at the call. The view keeps ``buf``'s memory scope.

Views are declared inside a kernel (a ``DeclBuffer`` over ``buf``'s storage) and only of global
tensors: the compiler gives each shared or fragment buffer its own layout (swizzle, distribution
over threads), which a second shape over the same bytes would bypass, so a view of one is a
located error naming the buffer.
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


def view(src, shape=None, dtype=None):
    """A view of ``src`` with ``shape`` (default: ``src``'s) and element ``dtype`` (default: ``src``'s)."""
    if src.scope() != "global":
        raise NotImplementedError(
            f"T.reshape/T.view of {src.name} (scope {src.scope()!r}): only views of global tensors are supported; "
            "the compiler gives each shared or fragment buffer its own layout (swizzle, thread distribution), "
            "which a second shape over the same storage would bypass. Allocate the buffer in the shape you need")
    shape = list(src.shape) if shape is None else (list(shape) if isinstance(shape, (list, tuple)) else [shape])
    dtype = str(src.dtype) if dtype is None else normalize_dtype(dtype)
    if not _same_size(shape, dtype, src):
        raise ValueError(f"T.reshape/T.view: {src.name} has shape {list(src.shape)} of {src.dtype}, which is not "
                         f"the same number of bits as shape {shape} of {dtype}")
    if not IRBuilder.is_in_scope():
        raise RuntimeError("T.reshape/T.view are used inside a kernel: there the view is declared over the "
                           f"storage of {src.name} (a DeclBuffer); a TVM 0.27 buffer object alone carries no "
                           "storage to share")
    return builder.decl_buffer(shape, dtype, data=src.data, scope=src.scope())


def reshape(src, shape):
    """``src`` with a new ``shape`` of the same number of elements (a view, no copy)."""
    return view(src, shape)
