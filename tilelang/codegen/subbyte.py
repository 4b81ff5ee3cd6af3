"""Scalar accesses of 4-bit elements, rewritten before TVM's CUDA codegen.

Two ``float4_e2m1fn`` / ``int4`` / ``uint4`` elements share a byte (element ``2k`` in the low
nibble of byte ``k``: torch's packed storage). TVM's CUDA codegen prints a scalar store
``dst[i] = v`` of a 4-bit float as a whole-byte write of ``v`` to byte ``i / 2``, and a scalar
int4 access as the whole 32-bit word ``i / 8`` (no shift, no mask: the load reads eight
elements' bits, the store overwrites seven neighbours). A scalar store becomes
``tl::fp4_store`` / ``tl::nibble_store(base, flat index, v)`` (``src/tl/common.h``), which
changes only the element's nibble: a compare-and-swap on the aligned 32-bit word in global and
shared memory (so threads writing the other nibbles of that word at the same time keep theirs,
where a plain read-modify-write of the byte loses one of two neighbours' writes), a plain
read-modify-write of the byte in registers (``..._local``). A scalar int4 / uint4 load becomes
``tl::int4_load`` / ``tl::uint4_load`` (the nibble, int4 sign-extended).

A vector access of whole aligned 32-bit words (a unit-stride run of 8k lanes from an element
divisible by 8: tile copies) is left to TVM, which prints those right. Any other vector store
that writes or reads 4-bit elements (an explicit ``T.Ramp`` with a stride, fewer lanes, an
unaligned base) becomes a loop over its lanes first, each lane a scalar access as above.
"""

from __future__ import annotations

import re

import tvm
from tvm import ir, tirx

from tilelang.tir_utils import (ExprRewriter, any_expr, any_stmt, const_int, dtype_of, flat_index, ir_transform,
                                map_stmts, tvm_ffi_walk)


def _is_scalar_fp4(dtype) -> bool:
    return str(dtype) == "float4_e2m1fn"


def _is_scalar_int4(dtype) -> bool:
    return str(dtype) in ("int4", "uint4")


def _is_4bit(dtype) -> bool:
    return _is_scalar_fp4(dtype) or _is_scalar_int4(dtype)


def _local(buf) -> bool:
    return str(buf.scope()).startswith("local")


def _int4_load(e):
    """``tl::int4_load`` / ``tl::uint4_load`` for a scalar int4 / uint4 load (else None)."""
    if not _scalar_4bit(e) or getattr(e, "predicate", None) is not None:
        return None
    buf = e.source
    name = "tl::uint4_load" if str(buf.dtype) == "uint4" else "tl::int4_load"
    return tirx.call_extern(str(buf.dtype), name, buf.data, flat_index(buf, list(e.indices)))


def _store(st):
    """``tl::fp4_store`` / ``tl::nibble_store`` for a scalar 4-bit store (its loads already
    rewritten: ``ir_transform`` rebuilds children first); else None."""
    if not (isinstance(st, tirx.BufferStore) and _scalar_4bit(st)) or getattr(st, "predicate", None) is not None:
        return None
    buf = st.buffer
    stem = "tl::fp4_store" if _is_scalar_fp4(buf.dtype) else "tl::nibble_store"
    name = stem + "_local" if _local(buf) else stem
    call = tirx.call_extern("void", name, buf.data, flat_index(buf, list(st.indices)), st.value)
    return tirx.Evaluate(call, span=st.span)


def _scalar_4bit(node) -> bool:
    if isinstance(node, tirx.BufferStore):
        return _is_4bit(node.buffer.dtype) and str(dtype_of(node.value)) == str(node.buffer.dtype)
    if isinstance(node, tirx.BufferLoad):
        return _is_scalar_int4(node.source.dtype) and str(dtype_of(node)) == str(node.source.dtype)
    return False


class _Lane(ExprRewriter):
    """Lane ``lane`` of a vector expression (a scalar one); ``_Unsplittable`` where some part of
    it has no per-lane form here (a vector call, a shuffle, a vector variable)."""

    def __init__(self, lane):
        self.lane = lane

    def visit_Ramp(self, e):
        return self.visit(e.base) + self.lane * self.visit(e.stride)

    def visit_Broadcast(self, e):
        return self.visit(e.value)

    def visit_Cast(self, e):
        return tirx.Cast(_element(dtype_of(e)), self.visit(e.value))

    def visit_var(self, var):
        if _element(dtype_of(var)) != dtype_of(var):
            raise _Unsplittable
        return var

    def visit_Call(self, e):
        if _element(dtype_of(e)) != dtype_of(e):
            raise _Unsplittable
        return super().visit_Call(e)

    def visit_Shuffle(self, e):
        raise _Unsplittable


class _Unsplittable(Exception):
    pass


def _element(dtype: str) -> str:
    return re.sub(r"x\d+$", "", str(dtype))


def _whole_words(buf, indices, an) -> bool:
    """Whether a vector access of 4-bit ``buf`` covers whole aligned 32-bit words (what TVM's
    codegen prints right: a unit-stride run of 8k lanes from an element index divisible by 8)."""
    last = indices[-1]
    if not isinstance(last, tirx.Ramp):
        return False
    lanes = const_int(last.lanes)
    if const_int(last.stride) != 1 or lanes is None or lanes % 8:
        return False
    base = flat_index(buf, list(indices[:-1]) + [last.base])
    return an.can_prove(tirx.floormod(base, 8) == 0)


def _split_lanes(st, an):
    """A vector store that writes or reads 4-bit elements other than in whole words, as a loop of
    scalar stores over its lanes (else None)."""
    if not isinstance(st, tirx.BufferStore) or getattr(st, "predicate", None) is not None:
        return None
    value_type = dtype_of(st.value)
    if _element(value_type) == value_type:
        return None
    accesses = [(st.buffer, list(st.indices))]
    tvm_ffi_walk(st.value, lambda e: accesses.append((e.source, list(e.indices)))
                 if isinstance(e, tirx.BufferLoad) else None)
    if all(not _is_4bit(b.dtype) or _whole_words(b, idx, an) for b, idx in accesses):
        return None
    lanes = int(re.search(r"x(\d+)$", value_type).group(1))
    lane = tirx.Var("lane", "int32")
    try:
        at = _Lane(lane)
        body = tirx.BufferStore(st.buffer, at.visit(st.value), [at.visit(i) for i in st.indices], span=st.span)
    except _Unsplittable:
        return None
    return tirx.For(lane, tirx.IntImm("int32", 0), tirx.IntImm("int32", lanes), tirx.ForKind.SERIAL, body,
                    span=st.span)


def legalize_subbyte_accesses(func):
    """``func`` with every scalar 4-bit store, and every scalar int4 / uint4 load, written
    through the nibble helpers of ``src/tl/common.h``."""
    an = tvm.sym.Analyzer()
    body = map_stmts(func.body, pre=lambda st: _split_lanes(st, an))
    if not (any_stmt(body, _scalar_4bit) or any_expr(body, _scalar_4bit)):
        return func

    def keep_addresses(n):   # the element a pointer is taken of (cp.async, vector copies) stays a load
        return n if isinstance(n, ir.Call) and getattr(n.op, "name", "") == "tirx.address_of" else None

    body = ir_transform(body, keep_addresses, lambda n: _int4_load(n) if isinstance(n, tirx.BufferLoad)
                        else _store(n), only_enable=["tir.Call", "tir.BufferLoad", "tir.BufferStore"])
    return func if body.same_as(func.body) else func.with_body(body)


__all__ = ["legalize_subbyte_accesses"]
