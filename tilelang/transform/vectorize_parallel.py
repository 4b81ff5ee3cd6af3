"""Wide memory accesses for the per-thread loop of a lowered ``T.Parallel`` nest.

The tile lowering turns a ``T.Parallel`` nest into ``for v in range(n)`` over the registers the
loop layout gives each thread (the default layout: 16 bytes of consecutive elements per thread).
Where that loop is an element-wise store that reads or writes global or shared memory, its
accesses are contiguous in ``v`` and provably aligned, it runs ``w`` lanes at a time (``w * element
bytes <= 16``): ``for i in range(n // w): for vi in T.vectorized(w)``, which TVM prints as one
``float4`` (``uint4``, ...) load or store per access instead of ``w`` scalar ones. The outer loop
takes the name of the nest's first loop variable, as upstream prints it.

Conditions, all checked on the lowered body (anything else keeps the serial loop):
- one ``BufferStore`` of an 8- to 64-bit element type, possibly under nested guards (``if``
  without ``else``): the outermost guards that do not depend on ``v`` (a replica guard) are
  hoisted around the loop; from the first one that does (which must be the same in the ``w`` lanes
  of every vector: the row bound of a varlen output, ``if bx * M + i < seqlen: O[.., i, d] = ...``
  vectorised along ``d``) they are tested once per vector, in their order, around the lanes; no
  guard may read the stored buffer;
- its value is built from loads, variables, immediates, ``+ - * min max``, casts between
  float32 and float16 / bfloat16; or the whole value is ``T.if_then_else(c, load, load or
  constant)`` with ``c`` the same in every lane of a vector (the bounds guard of a gathered load:
  one test per vector; no other calls, lets or casts: what TVM prints lane by lane stays serial); loads inside an access's indices (a gather's
  ``Indices[i]``) are part of that access's address; each operation in its operands' type;
  arithmetic only on 16-, 32- and
  64-bit floats and 32-/64-bit integers, 8- and 16-bit integers only copied (one load),
  ``min`` / ``max`` and casts at most 4 lanes (TVM's printer breaks past that for ``min`` /
  ``max``; the CUDA printer pairs a cast's lanes two by two, ``__half22float2``); with a cast the
  accesses may differ in element width, the widest one at most 16 bytes;
- every access (flattened, the buffer's element offset included) is either ``base + lane`` with
  ``base`` a provable multiple of ``w`` or, for a load, the same element in every lane (a
  broadcast); a store's element depends on ``v``;
- at least one access is to global or shared memory (register-only loops are left to nvcc);
- the stored buffer is read, if at all, only at the stored element.
"""

from __future__ import annotations

import tvm
from tvm import ir, tirx

from tilelang.tir_utils import (const_int, dtype_of, flat_index, i32, substitute, substitute_stmt, tensor_loads,
                                tvm_ffi_walk, uses_vars)
from tilelang.transform.kernel import bits_as

_VECTOR_BYTES = 16
_ARITH = (tirx.Add, tirx.Sub, tirx.Mul, tirx.Min, tirx.Max)


def _elem_bits(dtype) -> int:
    d = tvm.DataType(str(dtype))
    return d.bits if d.lanes == 1 else 0


def _scope(buf) -> str:
    return str(buf.scope())


# conversions the CUDA printer emits two lanes at a time (tilelang.codegen.cuda._PAIR_CASTS)
_VECTOR_CASTS = frozenset([("float16", "float32"), ("float32", "float16"),
                           ("bfloat16", "float32"), ("float32", "bfloat16")])


def _value_ok(value, dtype) -> bool:
    """Whether ``value`` (of the store's ``dtype``) is built only from what the module docstring
    allows, every operation in its operands' type (a cast changes the type below it)."""
    def walk(e, want):
        if dtype_of(e) != want:
            return False
        if isinstance(e, ir.TensorLoad):
            return True          # (its indices are checked as accesses)
        if isinstance(e, _ARITH):
            return walk(e.a, want) and walk(e.b, want)
        if isinstance(e, tirx.Cast):
            inner = dtype_of(e.value)
            return (inner, want) in _VECTOR_CASTS and walk(e.value, inner)
        return isinstance(e, (tirx.Var, tirx.IntImm, tirx.FloatImm))

    if _guarded_copy(value):    # (its condition is checked to be the same in every lane: _uniform)
        return dtype_of(value) == dtype and walk(value.args[1], dtype) and walk(value.args[2], dtype)
    return walk(value, dtype)


def _guarded_copy(value) -> bool:
    """Whether the stored value is ``T.if_then_else(c, load, load or constant)``: the guard the
    lowering puts around a load that may fall outside its tensor (``c ? KV[...] : 0``)."""
    return (isinstance(value, ir.Call) and getattr(value.op, "name", "") == "prim.if_then_else"
            and len(value.args) == 3 and isinstance(value.args[1], ir.TensorLoad)
            and isinstance(value.args[2], (ir.TensorLoad, tirx.IntImm, tirx.FloatImm)))


def _uniform(cond, v, w, an) -> bool:
    """Whether ``cond`` is the same in the ``w`` lanes of every vector of the loop over ``v``."""
    vo = tirx.Var("vo", "int32")
    first = an.simplify(substitute(cond, {v: vo * w}))
    return all(tvm.ir.structural_equal(an.simplify(substitute(cond, {v: vo * w + k})), first) for k in range(1, w))


def _has_cast(value) -> bool:
    found = []
    tvm_ffi_walk(value, lambda e: found.append(e) if isinstance(e, tirx.Cast) else None)
    return bool(found)


def _access_ok(index, v, w, an, is_store) -> bool:
    vo = tirx.Var("vo", "int32")
    base = an.simplify(substitute(index, {v: vo * w}))
    diffs = [an.simplify(substitute(index, {v: vo * w + k}) - base) for k in range(1, w)]
    if all(const_int(d) == 0 for d in diffs):
        return not is_store
    if not all(const_int(d) == k for k, d in zip(range(1, w), diffs)):
        return False
    # (in the index's own type: an int64 index, e.g. of a tensor with more than 2**31 elements)
    return an.can_prove(tirx.FloorMod(base, tirx.const(w, dtype_of(base))) == 0)


# element types whose vector arithmetic TVM prints correctly (``+ - *`` up to 16 bytes; ``min`` /
# ``max`` up to 4 lanes: wider, TVM names lanes past ``w`` with a NUL character)
_ARITH_TYPES = ("float16", "bfloat16", "float32", "float64", "int32", "uint32", "int64", "uint64")
_COPY_TYPES = _ARITH_TYPES + ("int8", "uint8", "int16", "uint16")


def _max_lanes(value, dtype) -> int:
    """How many lanes the store's value allows: a plain copy (one load) of any type in
    ``_COPY_TYPES``, arithmetic (a broadcast constant included) only in ``_ARITH_TYPES``."""
    if isinstance(value, ir.TensorLoad):
        return 64 if dtype in _COPY_TYPES else 1
    if _guarded_copy(value):    # (the types whose vector constants TVM prints)
        return 64 if dtype in _ARITH_TYPES else 1
    if dtype not in _ARITH_TYPES:
        return 1
    found = []
    tvm_ffi_walk(value, lambda e: found.append(e) if isinstance(e, (tirx.Min, tirx.Max, tirx.Cast)) else None)
    return 4 if found else 64


def _data_loads(value) -> list:
    """The loads ``value`` computes with: every ``TensorLoad`` outside another one's indices (a
    gather's row index ``Indices[i]`` inside ``KV[Indices[i], d]`` is part of that access's index,
    the same in every lane where the access is contiguous: ``_access_ok`` checks the index whole)
    and outside a guarded copy's condition (``_uniform`` checks that)."""
    out = []

    def walk(e):
        if isinstance(e, ir.TensorLoad):
            out.append(e)
        elif isinstance(e, _ARITH):
            walk(e.a)
            walk(e.b)
        elif isinstance(e, tirx.Cast):
            walk(e.value)

    for e in value.args[1:] if _guarded_copy(value) else [value]:
        walk(e)
    return out


def _width(store, v, n, an, conds=()) -> int:
    """The lanes of the widest vector the loop over ``v`` may run ``store`` with; ``conds``: the
    guards around it that depend on ``v`` and must be the same in a vector's lanes."""
    dtype = str(store.buffer.dtype)
    bits = _elem_bits(dtype)
    if bits not in (8, 16, 32, 64) or dtype_of(store.value) != dtype:
        return 1
    if not _value_ok(store.value, dtype):
        return 1
    lanes = _max_lanes(store.value, dtype)
    if lanes == 1:
        return 1
    loads = _data_loads(store.value)
    accesses = [(store.buffer, list(store.indices), True)] + [(ld.source, list(ld.indices), False) for ld in loads]
    nested = [ld for ld in tensor_loads(store.value) if not any(ld.same_as(d) for d in loads)]
    if any(ld.source.same_as(store.buffer) for ld in nested) or any(
            ld.source.same_as(store.buffer) for i in store.indices for ld in tensor_loads(i)):
        return 1    # (the stored buffer read inside an index or a guard: its lanes' order would matter)
    if not any(_scope(b) == "global" or _scope(b).startswith("shared") for b, _, _ in accesses):
        return 1
    widest = max(_elem_bits(b.dtype) for b, _, _ in accesses)
    if any(_elem_bits(b.dtype) != bits for b, _, _ in accesses) and not _has_cast(store.value):
        return 1
    if any(_elem_bits(b.dtype) not in (8, 16, 32, 64) for b, _, _ in accesses):
        return 1
    flats = []
    for buf, indices, is_store in accesses:
        if any(tvm.DataType(dtype_of(i)).lanes != 1 for i in indices):
            return 1
        flat = flat_index(buf, indices)
        if flat is None:
            return 1
        flats.append((flat, is_store))
    if not uses_vars(flats[0][0], [v]):
        return 1
    for (buf, _, _), (flat, _) in zip(accesses[1:], flats[1:]):
        # a load of the stored buffer at another element: lane k may need lane j's store (j < k)
        if buf.same_as(store.buffer) and not an.can_prove(flat == flats[0][0]):
            return 1
    w = min(_VECTOR_BYTES * 8 // widest, lanes)
    while w > 1 and n % w:
        w //= 2
    uniform = list(conds) + ([store.value.args[0]] if _guarded_copy(store.value) else [])
    while w > 1:
        if all(_access_ok(flat, v, w, an, is_store) for flat, is_store in flats) and \
                all(_uniform(c, v, w, an) for c in uniform):
            return w
        w //= 2
    return 1


def _unsigned_alias(buf):
    """``buf``'s storage seen as unsigned integers of its element's width (same shape and offset)."""
    bits = _elem_bits(buf.dtype)
    return tirx.decl_buffer(list(buf.shape), f"uint{bits}", f"{buf.name}_bits", data=buf.data,
                            strides=list(buf.strides), elem_offset=buf.elem_offset, scope=_scope(buf))


def _as_bit_copy(store):
    """A store that copies bits (``dst[i] = src[j]`` or ``dst[i] = reinterpret(src[j])``, one
    element width of 8 to 64 bits; an element type that TVM prints no vectors of, fp8 in a staged
    view, only in shared memory) as the same copy between unsigned integers of that width, which
    vectorise; other stores as they are. Returns the store and the unsigned views it introduces."""
    value, dtype = store.value, str(store.buffer.dtype)
    if isinstance(value, ir.Call) and getattr(value.op, "name", "") == "tirx.reinterpret" and len(value.args) == 1:
        value = value.args[0]
    bits = _elem_bits(dtype)
    if (not isinstance(value, ir.TensorLoad) or bits not in (8, 16, 32, 64) or _elem_bits(value.dtype) != bits
            or (dtype in _COPY_TYPES and str(value.dtype) in _COPY_TYPES)
            or any(str(b.dtype) not in _COPY_TYPES and not _scope(b).startswith("shared")
                   for b in (store.buffer, value.source))):
        return store, []
    dst = store.buffer if dtype in _COPY_TYPES else _unsigned_alias(store.buffer)
    src = value.source if str(value.dtype) in _COPY_TYPES else _unsigned_alias(value.source)
    load = bits_as(tirx.BufferLoad(src, list(value.indices)), str(dst.dtype))
    aliases = [b for b in (dst, src) if not any(b.same_as(x) for x in (store.buffer, value.source))]
    return tirx.BufferStore(dst, load, list(store.indices), span=store.span), aliases


def vectorize_register_loop(body, v, n, an, name, span=None, annotations=None, declare=None):
    """``for v in range(n): body`` with its accesses ``w`` lanes wide (see the module docstring),
    or None where that does not apply. ``declare(buffer)``: declares a shared-memory view the
    vectorised loop uses (an unsigned view of a bit copy, ``_as_bit_copy``); None: no such views."""
    guards = []     # the nested ``if``s around the store, outermost first
    store = body
    while isinstance(store, tirx.IfThenElse) and store.else_case is None:
        guards.append(store)
        store = store.then_case
    if not isinstance(store, tirx.BufferStore) or getattr(store, "predicate", None) is not None:
        return None
    if any(ld.source.same_as(store.buffer) for g in guards for ld in tensor_loads(g.condition)):
        return None     # (tested once per vector, a guard must not read what the lanes store)
    # the outermost guards up to the first that depends on v go around the loop; that one and
    # every guard inside it stay in their order around the vector (a condition the outer ones
    # make safe to evaluate is never moved above them)
    hoist = 0
    while hoist < len(guards) and not uses_vars(guards[hoist].condition, [v]):
        hoist += 1
    store, aliases = _as_bit_copy(store) if declare is not None else (store, [])
    w = _width(store, v, n, an, [g.condition for g in guards[hoist:] if uses_vars(g.condition, [v])])
    if w <= 1:
        return None
    vo, vi = tirx.Var(name, "int32"), tirx.Var("vec", "int32")
    inner = tirx.For(vi, i32(0), i32(w), tirx.ForKind.VECTORIZED, substitute_stmt(store, {v: vo * w + vi}))
    for g in reversed(guards[hoist:]):  # (at lane 0: the same in every lane)
        inner = tirx.IfThenElse(substitute(g.condition, {v: vo * w}), inner, None, span=g.span)
    if n == w:
        loop = substitute_stmt(inner, {vo: i32(0)})
    else:
        loop = tirx.For(vo, i32(0), i32(n // w), tirx.ForKind.SERIAL, inner, annotations=annotations or {}, span=span)
    for g in reversed(guards[:hoist]):
        loop = tirx.IfThenElse(g.condition, loop, None, span=g.span)
    for a in aliases:
        declare(a)
    return loop


__all__ = ["vectorize_register_loop"]
