"""Scalar stores of 4-bit floats, rewritten before TVM's CUDA codegen.

Two ``float4_e2m1fn`` elements share a byte (element ``2k`` in the low nibble of byte ``k``).
TVM's CUDA codegen prints a scalar store ``dst[i] = v`` as a whole-byte write of ``v`` to byte
``i / 2``: the neighbouring element is lost and an odd element lands in the wrong nibble. Such a
store becomes ``tl::fp4_store(base, flat index, v)`` (``src/tl/fp8.h``), which changes only the
element's nibble: a compare-and-swap on the aligned 32-bit word in global and shared memory (so
threads writing the other nibbles of that word at the same time keep theirs), a plain
read-modify-write of the byte in registers (``tl::fp4_store_local``).

Vector stores (whole bytes) are left to TVM.
"""

from __future__ import annotations

from tvm import tirx

from tilelang.tir_utils import dtype_of, map_stmts, walk_stmts


def _is_scalar_fp4(dtype) -> bool:
    return str(dtype) == "float4_e2m1fn"


def _flat(buf, indices):
    if len(indices) == 1 and not buf.strides:
        flat = indices[0]
    else:
        strides = list(buf.strides)
        if not strides:
            acc = tirx.IntImm(dtype_of(buf.shape[-1]) if buf.shape else "int32", 1)
            for extent in reversed(list(buf.shape)):
                strides.append(acc)
                acc = acc * extent
            strides.reverse()
        flat = indices[0] * strides[0]
        for i, st in zip(indices[1:], strides[1:]):
            flat = flat + i * st
    offset = buf.elem_offset
    if not (isinstance(offset, tirx.IntImm) and offset.value == 0):
        flat = offset + flat
    return flat


def _rewrite(st):
    if not isinstance(st, tirx.BufferStore):
        return None
    buf = st.buffer
    if not _is_scalar_fp4(buf.dtype) or not _is_scalar_fp4(dtype_of(st.value)):
        return None
    if getattr(st, "predicate", None) is not None:
        return None
    scope = str(buf.scope())
    name = "tl::fp4_store_local" if scope.startswith("local") else "tl::fp4_store"
    call = tirx.call_extern("void", name, buf.data, _flat(buf, list(st.indices)), st.value)
    return tirx.Evaluate(call, span=st.span)


def legalize_fp4_scalar_stores(func):
    """``func`` with every scalar ``float4_e2m1fn`` store written through ``tl::fp4_store``."""
    found = []
    walk_stmts(func.body, lambda st: found.append(st) if isinstance(st, tirx.BufferStore)
               and _is_scalar_fp4(st.buffer.dtype) and _is_scalar_fp4(dtype_of(st.value)) else None)
    if not found:
        return func
    body = map_stmts(func.body, pre=_rewrite)
    return func if body.same_as(func.body) else func.with_body(body)


__all__ = ["legalize_fp4_scalar_stores"]
