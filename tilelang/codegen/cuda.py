"""Turn a lowered PrimFunc into CUDA source with TVM's codegen and read back the entry signature.

TVM's ``tirx`` pipeline splits host and device code; we keep only the device module's source,
prepend ``#include "tl.h"`` (our device library in ``src/``) and parse the ``extern "C"
__global__`` declaration to learn the kernel name and the order of its arguments. The host side
is ours (``tilelang.jit``), so the LLVM host module TVM also builds is discarded.

TVM's CUDA codegen calls an extern function of vector result once per lane (``v.x = f(a);
v.y = f(a); ...``). The explicit-width loads of ``src/tl/ldst.h`` return the whole vector, so
those per-lane runs are folded back into one call (``v = f(a);``).

A user's ``T.vectorized(n)`` loop wider than 16 bytes (``float32x128``: no CUDA type) is split
into a serial loop over vectors of the widest width every access allows: contiguous accesses
(unit step, start provably a multiple of the width) or lane-invariant loads, the width dividing
``n``; otherwise the loop runs serially. Narrower vectorized loops are left to TVM, except
that a loop updating an element every lane writes (``B[r] = B[r] + A[r, k]``) or broadcasting a
non-constant byte to 4 lanes runs serially, and fp8-converting loops convert integers through
float32, 4 lanes at a time (``_legalize_fp8_vector_casts``).

The source is then brought to the form upstream TileLang prints (its tests match it):
- a vector cast (TVM: one C cast per lane, or a C-style cast of a whole fp8 vector) converts a
  pair of lanes per intrinsic (``__float22half2_rn``, ``__nv_cvt_float2_to_fp8x2``, the
  ``__tl_cvt_*`` of ``src/tl/fp8.h``); pairs without such an intrinsic keep TVM's form;
- lanes of fp8 vectors (``v.x``, which CUDA's fp8x2/fp8x4 types lack) are reached through the
  scalar fp8 type;
- a buffer's storage is named after the buffer (``A``, not TVM's ``A_ptr``) where that name is
  free, and a one-element register array only ever reached as ``x[0]`` is the scalar ``x``.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

import tvm

from tilelang.codegen.packed_arith import pack_vector_arith
from tilelang.codegen.subbyte import legalize_subbyte_accesses

from tilelang.instrumentation import (create_pass_instruments, current_compile_pass_instrumentation,
                                      run_codegen_with_instrumentation)

_SIG = re.compile(r'extern "C" __global__ void (?:__launch_bounds__\(\d+\) )?(\w+)\(([^)]*)\)\s*\{')


# extern functions returning a whole vector (one call per vector, not per lane)
_WHOLE_VECTOR_CALL = r"tl::load_(?:global|shared)_\d+(?:_conditional)?\(.*\)"
_LANE_STORE = re.compile(r"^(\s*)(?:(\w+)\.[xyzw]|\(\(uint2\*\)\(&\((\w+)\.[xyzw]\)\)\)->[xy]) = "
                         r"(" + _WHOLE_VECTOR_CALL + r");$")


_CSE_DECL = re.compile(r"^[ \t]*[A-Za-z_][\w:<> ]*?\b(cse_v\d+) = [^;\n]*;\n", re.M)


def _drop_unused_cse(source: str) -> str:
    """Without the one-line ``T cse_vN = ...;`` declarations whose name nothing else reads: TVM's
    common-subexpression elimination binds a value whose uses later simplification folds back
    into their expressions (dead code that ptxas drops anyway, but clutter to a reader)."""
    while True:
        uses = Counter(re.findall(r"\bcse_v\d+\b", source))
        dead = [m for m in _CSE_DECL.finditer(source) if uses[m.group(1)] == 1]
        if not dead:
            return source
        for m in reversed(dead):
            source = source[:m.start()] + source[m.end():]


def _fold_lane_calls(source: str) -> str:
    """``v.x = f(a); v.y = f(a); ...`` (TVM's per-lane form of a vector-valued extern call) ->
    ``v = f(a);`` for the whole-vector functions of ``_WHOLE_VECTOR_CALL``."""
    if "tl::load_" not in source:
        return source
    out, lines, i = [], source.split("\n"), 0
    while i < len(lines):
        m = _LANE_STORE.match(lines[i])
        if m is None:
            out.append(lines[i])
            i += 1
            continue
        var, call = m.group(2) or m.group(3), m.group(4)
        j = i + 1
        while j < len(lines):
            n = _LANE_STORE.match(lines[j])
            if n is None or (n.group(2) or n.group(3)) != var or n.group(4) != call:
                break
            j += 1
        out.append(f"{m.group(1)}{var} = {call};")
        i = j
    return "\n".join(out)


# Paired vector casts. TVM prints a vector cast lane by lane (``__1.x = (half)(v_.x); ...``) or,
# for fp8, as a C-style cast of the whole vector. Both are rewritten into one conversion
# intrinsic per pair of lanes (CUDA's ``__float22half2_rn`` etc., ``__tl_cvt_*`` of
# ``src/tl/fp8.h``), pairs split and joined by ``tl::vpart`` / ``tl::vjoin`` (``src/tl/packed.h``).
# Vector types printed by TVM -> (element kind, lanes); element kind -> the pair's C type.
_VEC_TYPES = {
    "float2": ("f32", 2), "float4": ("f32", 4), "double2": ("f64", 2),
    "half2": ("f16", 2), "half4": ("f16", 4),
    "nv_bfloat162": ("bf16", 2), "__nv_bfloat162": ("bf16", 2), "nv_bfloat164": ("bf16", 4),
    "__nv_fp8x2_e4m3": ("e4m3", 2), "__nv_fp8x4_e4m3": ("e4m3", 4),
    "__nv_fp8x2_e5m2": ("e5m2", 2), "__nv_fp8x4_e5m2": ("e5m2", 4),
    "__nv_fp8x2_e8m0": ("e8m0", 2), "__nv_fp8x4_e8m0": ("e8m0", 4),
}
_PAIR_TYPE = {"f32": "float2", "f64": "double2", "f16": "half2", "bf16": "__nv_bfloat162",
              "e4m3": "__nv_fp8x2_storage_t", "e5m2": "__nv_fp8x2_storage_t", "e8m0": "__nv_fp8x2_storage_t"}
# (source kind, destination kind) -> (pair conversion, arguments after the pair)
_PAIR_CASTS = {
    ("f32", "f16"): ("__float22half2_rn", ""),
    ("f16", "f32"): ("__half22float2", ""),
    ("f32", "bf16"): ("__float22bfloat162_rn", ""),
    ("bf16", "f32"): ("__bfloat1622float2", ""),
    ("f32", "e4m3"): ("__nv_cvt_float2_to_fp8x2", ", __NV_SATFINITE, __NV_E4M3"),
    ("f32", "e5m2"): ("__nv_cvt_float2_to_fp8x2", ", __NV_SATFINITE, __NV_E5M2"),
    ("e4m3", "f32"): ("__tl_cvt_fp8x2_to_float2", ", __NV_E4M3"),
    ("e5m2", "f32"): ("__tl_cvt_fp8x2_to_float2", ", __NV_E5M2"),
    ("e4m3", "f16"): ("__tl_cvt_fp8x2_to_half2", ", __NV_E4M3"),
    ("e5m2", "f16"): ("__tl_cvt_fp8x2_to_half2", ", __NV_E5M2"),
    ("f16", "e4m3"): ("__tl_cvt_half2_to_fp8x2", ", __NV_E4M3"),
    ("f16", "e5m2"): ("__tl_cvt_half2_to_fp8x2", ", __NV_E5M2"),
    ("e8m0", "bf16"): ("__tl_cvt_e8m0x2_to_bfloat162", ""),
    ("bf16", "e8m0"): ("__tl_cvt_bfloat162_to_e8m0x2", ""),
    ("f32", "e8m0"): ("__tl_cvt_float2_to_e8m0x2", ""),
    ("f64", "e8m0"): ("__tl_cvt_double2_to_e8m0x2", ""),
}
_LANE_CAST = re.compile(r"^(\s*)(\w+)\.([xyzw]) = \((\w+)\)\((\w+)\.\3\);$")
_INLINE_CAST = re.compile(r"(?:\((" + "|".join(_VEC_TYPES) + r")\)|cast_to_(nv_bfloat162))\(")


def _paired_cast(src_type, dst_type, operand):
    """The expression converting ``operand`` (of vector type ``src_type``) to ``dst_type`` one
    pair of lanes at a time, or None where no paired conversion exists."""
    src, dst = _VEC_TYPES.get(src_type), _VEC_TYPES.get(dst_type)
    if src is None or dst is None or src[1] != dst[1]:
        return None
    conv = _PAIR_CASTS.get((src[0], dst[0]))
    if conv is None:
        return None
    fn, extra = conv
    pair = _PAIR_TYPE[src[0]]
    if src[1] == 2:
        return f"tl::vbits<{dst_type}>({fn}(tl::vbits<{pair}>({operand}){extra}))"
    return (f"tl::vjoin<{dst_type}>({fn}(tl::vpart<{pair}, 0>({operand}){extra}), "
            f"{fn}(tl::vpart<{pair}, 1>({operand}){extra}))")


def _declared_type(text, name):
    """C type of the last declaration of the local ``name`` in ``text``, or None."""
    found = re.findall(r"(?m)^\s*(\w+) " + re.escape(name) + r"(?: =|;)", text)
    return found[-1] if found else None


def _pair_vector_casts(source: str) -> str:
    """Rewrite TVM's vector casts in the kernel (not the prelude) into paired conversions (see
    ``_PAIR_CASTS``)."""
    at = source.find('extern "C" __global__')
    if at > 0:
        return source[:at] + _pair_vector_casts(source[at:])
    lines, out, i = source.split("\n"), [], 0
    while i < len(lines):
        m = _LANE_CAST.match(lines[i])
        if m is None or m.group(3) != "x":
            out.append(lines[i])
            i += 1
            continue
        indent, var, operand = m.group(1), m.group(2), m.group(5)
        j = i + 1
        for lane in "yzw":
            n = _LANE_CAST.match(lines[j]) if j < len(lines) else None
            if n is None or n.group(2) != var or n.group(3) != lane or n.group(5) != operand:
                break
            j += 1
        before = "\n".join(out[-16:])
        dst_type, src_type = _declared_type(before, var), _declared_type(before, operand)
        expr = _paired_cast(src_type, dst_type, operand) if dst_type and src_type else None
        if expr is None or _VEC_TYPES[dst_type][1] != j - i:
            out.extend(lines[i:j])
        else:
            out.append(f"{indent}{var} = {expr};")
        i = j
    source = "\n".join(out)
    pos = 0
    while True:
        m = _INLINE_CAST.search(source, pos)
        if m is None:
            return source
        dst_type = m.group(1) or "__nv_bfloat162"
        start, depth, k = m.end(), 1, m.end()
        while k < len(source) and depth:
            depth += {"(": 1, ")": -1}.get(source[k], 0)
            k += 1
        operand = source[start:k - 1]
        load = re.match(r"\*\((\w+)\*\)\(", operand)
        if load is not None:
            src_type = load.group(1)
        elif re.fullmatch(r"\w+", operand):
            src_type = _declared_type(source[:m.start()], operand)
        else:
            src_type = None
        expr = _paired_cast(src_type, dst_type, operand) if src_type else None
        if expr is None or (m.group(2) and _VEC_TYPES[src_type][0] != "e8m0"):
            pos = m.end()
            continue
        source = source[:m.start()] + expr + source[k:]
        pos = m.start() + len(expr)


_FP8_VEC_DECL = re.compile(r"(?m)^\s*(__nv_fp8x[24]_(e4m3|e5m2|e8m0)) (\w+)(?: =|;)")


def _fp8_lane_access(source: str) -> str:
    """TVM reaches lane i of an fp8 vector as ``v.x`` / ``v.y`` / ...; CUDA's ``__nv_fp8x2_*`` /
    ``__nv_fp8x4_*`` have no such members, so those become ``((__nv_fp8_e4m3*)(&v))[i]``."""
    if "__nv_fp8x" not in source:
        return source
    at = source.find('extern "C" __global__')
    if at > 0:
        return source[:at] + _fp8_lane_access(source[at:])
    kinds = {}
    for m in _FP8_VEC_DECL.finditer(source):
        kinds.setdefault(m.group(3), set()).add(m.group(2))
    for name, kind in kinds.items():
        if len(kind) != 1 or not re.search(r"\b" + re.escape(name) + r"\.[xyzw]\b", source):
            continue
        elem = f"__nv_fp8_{next(iter(kind))}"
        source = re.sub(r"(?<![\w.>])" + re.escape(name) + r"\.([xyzw])\b",
                        lambda m: f"(({elem}*)(&{name}))[{'xyzw'.index(m.group(1))}]", source)
    return source


_HALF_PAIR_ELEMENT = {"half2": "half_t", "__half2": "half_t", "nv_bfloat162": "bfloat16_t",
                      "__nv_bfloat162": "bfloat16_t"}
_LANE_READ = re.compile(r"= \((\w+)\)\.([xy]);")


def _half_lane_reads(source: str) -> str:
    """``T.extract_lane`` of a ``half2`` / ``nv_bfloat162`` local assigned as a whole value
    (``B[0] = (packed).x;``) is spelt as a conversion to its element type, ``half_t(...)`` /
    ``bfloat16_t(...)``, so the value keeps its scalar type whatever the left side is."""
    if "2 " not in source:
        return source

    def fix(m):
        elem = _HALF_PAIR_ELEMENT.get(_declared_type(source, m.group(1)) or "")
        return f"= {elem}(({m.group(1)}).{m.group(2)});" if elem else m.group(0)

    return _LANE_READ.sub(fix, source)


_VECTOR_BYTES = 16


def _flat_index(buf, indices):
    if len(indices) == 1:
        return indices[0]
    if buf.strides:
        strides = list(buf.strides)
    else:
        strides, acc = [], tvm.tirx.IntImm("int32", 1)
        for extent in reversed(list(buf.shape)):
            strides.append(acc)
            acc = acc * extent
        strides.reverse()
    out = indices[0] * strides[0]
    for i, st in zip(indices[1:], strides[1:]):
        out = out + i * st
    return out


def _broadcast_values(loop) -> list:
    """Element bytes of the loads a vectorized ``loop`` uses as values (not inside an index) that
    do not depend on its variable: each is broadcast to every lane."""
    from tvm import ir, tirx

    from tilelang.tir_utils import tvm_ffi_walk, uses_vars, walk_stmts

    values = []

    def on_stmt(st):
        if isinstance(st, tirx.BufferStore):
            loads, inner = [], []

            def on_expr(e):
                if isinstance(e, ir.TensorLoad):
                    loads.append(e)
                    for i in e.indices:
                        tvm_ffi_walk(i, lambda x: inner.append(x) if isinstance(x, ir.TensorLoad) else None)

            tvm_ffi_walk(st.value, on_expr)
            values.extend(e for e in loads if not any(e.same_as(x) for x in inner))

    walk_stmts(loop.body, on_stmt)
    return [e.source.dtype.bits * e.source.dtype.lanes // 8 for e in values if not uses_vars(e, [loop.loop_var])]


def _loop_accesses(body):
    """[(flat index, element bytes, is_store)] of every buffer access in ``body``."""
    from tvm import ir, tirx

    from tilelang.tir_utils import tvm_ffi_walk, walk_stmts

    out = []

    def on_expr(e):
        if isinstance(e, ir.TensorLoad):
            d = e.source.dtype
            out.append((_flat_index(e.source, list(e.indices)), d.bits * d.lanes // 8, False))

    def on_stmt(st):
        if isinstance(st, tirx.BufferStore):
            d = st.buffer.dtype
            out.append((_flat_index(st.buffer, list(st.indices)), d.bits * d.lanes // 8, True))

    walk_stmts(body, on_stmt)
    tvm_ffi_walk(body, on_expr)
    return out


def _vector_width(loop, accesses, an) -> int:
    from tvm import tirx

    from tilelang.tir_utils import const_int, substitute

    extent = const_int(loop.extent)
    widest = max([b for _, b, _ in accesses] or [1])
    vo = tirx.Var("vo", "int32")
    w = 1
    while w * 2 * widest <= _VECTOR_BYTES and extent % (w * 2) == 0:
        w *= 2
    while w > 1:
        ok = True
        for index, _, is_store in accesses:
            base = an.simplify(substitute(index, {loop.loop_var: loop.min + vo * w}))
            diffs = [an.simplify(substitute(index, {loop.loop_var: loop.min + vo * w + i}) - base) for i in range(1, w)]
            if all(const_int(d) == 0 for d in diffs):
                ok = not is_store     # one element written by every lane: a reduction
            elif all(const_int(d) == i for i, d in zip(range(1, w), diffs)):
                ok = an.can_prove(tirx.FloorMod(base, w) == 0)
            else:
                ok = False
            if not ok:
                break
        if ok:
            return w
        w //= 2
    return 1


def _lane_invariant_update(loop) -> bool:
    """Whether the vectorized ``loop`` stores to an element every lane writes (its index does not
    depend on the loop variable) while also reading that buffer: ``B[r] = B[r] + A[r, k]`` is
    carried from lane to lane, which a vector (all lanes read, the last lane's store kept) gets
    wrong, so such a loop runs serially."""
    from tvm import ir, tirx

    from tilelang.tir_utils import tvm_ffi_walk, uses_vars, walk_stmts

    stored = []
    walk_stmts(loop.body, lambda st: stored.append(st.buffer) if isinstance(st, tirx.BufferStore)
               and not any(uses_vars(i, [loop.loop_var]) for i in st.indices) else None)
    if not stored:
        return False
    read = []
    tvm_ffi_walk(loop.body, lambda e: read.append(e.source) if isinstance(e, ir.TensorLoad) else None)
    return any(r.same_as(b) for r in read for b in stored)   # (0.27: both are the data Var)


def _byte_broadcast_x4(loop) -> bool:
    """Whether the 4-lane vectorized ``loop`` would broadcast a non-constant 8-bit integer (a
    load or variable not depending on the loop variable): TVM's CUDA codegen packs an int8x4
    broadcast only from a constant (and fails otherwise), so such a loop runs serially."""
    from tvm import ir

    from tilelang.tir_utils import any_expr, const_int, dtype_of, uses_vars

    if const_int(loop.extent) != 4:
        return False

    def byte_invariant(e):
        if not isinstance(e, (ir.Var, ir.TensorLoad)) or e.same_as(loop.loop_var):
            return False
        if isinstance(e, ir.Var) and any(e.same_as(s) for s in sources):
            return False    # a buffer's data Var (0.27 types it with the element dtype), not a value
        try:
            d = tvm.DataType(dtype_of(e))
        except Exception:  # noqa: BLE001 - a handle or buffer variable: not a byte
            return False
        return (d.bits == 8 and d.lanes == 1 and d.type_code in (tvm.DataTypeCode.INT, tvm.DataTypeCode.UINT)
                and not uses_vars(e, [loop.loop_var]))

    from tvm import tirx

    from tilelang.tir_utils import walk_stmts

    from tilelang.tir_utils import tvm_ffi_walk

    values, sources = [], []
    walk_stmts(loop.body, lambda st: values.append(st.value) if isinstance(st, tirx.BufferStore) else None)
    tvm_ffi_walk(loop.body, lambda e: sources.append(e.source) if isinstance(e, ir.TensorLoad) else None)
    return any(tvm.DataType(dtype_of(v)).bits == 8 and any_expr(v, byte_invariant) for v in values)


def _legalize_vector_loops(func):
    """Split user vectorized loops wider than a CUDA vector type (see the module docstring)."""
    from tvm import tirx

    from tilelang.tir_utils import const_int, map_loops, substitute_stmt

    an = tvm.sym.Analyzer()

    def post(node):
        if not isinstance(node, tirx.For) or node.kind != tirx.ForKind.VECTORIZED:
            return None
        if _lane_invariant_update(node) or _byte_broadcast_x4(node):
            return tirx.For(node.loop_var, node.min, node.extent, tirx.ForKind.SERIAL, node.body,
                            annotations=node.annotations, span=node.span)
        extent = const_int(node.extent)
        if extent is None:
            return None
        accesses = _loop_accesses(node.body)
        narrowest = min([b for _, b, _ in accesses] or [1])
        # (a value every lane reads, wider than a CUDA vector once broadcast: TVM prints
        # ``make_ulonglong4(s, s, s, s, s, s, s, s)`` for a float32x8 one; loads that only
        # compute an address, such as a row offset, are no such value)
        wide_broadcast = any(extent * b > _VECTOR_BYTES for b in _broadcast_values(node))
        if extent * narrowest <= _VECTOR_BYTES and not wide_broadcast:
            return None
        w = _vector_width(node, accesses, an)
        if w == 1:
            return tirx.For(node.loop_var, node.min, node.extent, tirx.ForKind.SERIAL, node.body,
                            annotations=node.annotations, span=node.span)
        vo = tirx.Var(node.loop_var.name + "_o", "int32")
        vi = tirx.Var(node.loop_var.name, "int32")
        body = substitute_stmt(node.body, {node.loop_var: node.min + vo * w + vi})
        inner = tirx.For(vi, tirx.IntImm("int32", 0), tirx.IntImm("int32", w), tirx.ForKind.VECTORIZED, body)
        return tirx.For(vo, tirx.IntImm("int32", 0), tirx.IntImm("int32", extent // w), tirx.ForKind.SERIAL,
                        inner, annotations=node.annotations, span=node.span)

    has_vector = []
    from tilelang.tir_utils import walk_stmts

    walk_stmts(func.body, lambda st: has_vector.append(1) if isinstance(st, tirx.For)
               and st.kind == tirx.ForKind.VECTORIZED else None)
    if not has_vector:
        return func
    body = map_loops(func.body, lambda loop: post(loop) or loop)
    return func if body.same_as(func.body) else func.with_body(body)


def _is_fp8(dtype) -> bool:
    return str(dtype).startswith("float8")


class _Fp8CastViaFloat:
    """Expression rewriter (built lazily on ``ExprRewriter``): ``Cast(fp8, x)`` of an integer or
    boolean ``x`` -> ``Cast(fp8, Cast(float32, x))``."""

    _cls = None

    @classmethod
    def make(cls):
        if cls._cls is None:
            from tvm import tirx

            from tilelang.tir_utils import ExprRewriter, dtype_of

            class Rewriter(ExprRewriter):
                found = False

                def visit_Cast(self, e):
                    v = self.visit(e.value)
                    if _is_fp8(dtype_of(e)):
                        self.found = True
                        src = tvm.DataType(dtype_of(v))
                        if src.type_code in (tvm.DataTypeCode.INT, tvm.DataTypeCode.UINT) or src.bits == 1:
                            v = tirx.Cast("float32", v)
                    elif _is_fp8(dtype_of(v)):
                        self.found = True
                    return e if v.same_as(e.value) else tirx.Cast(dtype_of(e), v)

            cls._cls = Rewriter
        return cls._cls()


def _fp8_broadcast(loop) -> bool:
    """Whether the vectorized ``loop`` stores one lane-invariant fp8 value to every lane (TVM's
    CUDA codegen broadcasts fp8 to at most 4 lanes)."""
    from tvm import tirx

    from tilelang.tir_utils import dtype_of, uses_vars, walk_stmts

    found = []
    walk_stmts(loop.body, lambda st: found.append(st) if isinstance(st, tirx.BufferStore)
               and _is_fp8(dtype_of(st.value)) and not uses_vars(st.value, [loop.loop_var]) else None)
    return bool(found)


def _legalize_fp8_vector_casts(func):
    """Vectorized loops converting to or from fp8: TVM prints an integer -> fp8 vector cast as a
    C cast CUDA has no conversion for, and an 8-lane fp8 vector as ``uint2`` with no conversion
    from the 8-lane source. Integer sources go through float32 (which ``_pair_vector_casts``
    converts a pair of lanes at a time), and such loops wider than 4 lanes run as a serial loop
    over 4-lane vectors (or serially where 4 does not divide the extent)."""
    from tvm import tirx

    from tilelang.tir_utils import any_expr, const_int, dtype_of, map_loops, seq, substitute_stmt, walk_stmts

    def rewrite(st, rw):
        if isinstance(st, tirx.SeqStmt):
            return seq([rewrite(x, rw) for x in st.seq])
        if isinstance(st, tirx.BufferStore):
            return tirx.BufferStore(st.buffer, rw.visit(st.value), [rw.visit(i) for i in st.indices], span=st.span)
        if isinstance(st, tirx.IfThenElse):
            other = None if st.else_case is None else rewrite(st.else_case, rw)
            return tirx.IfThenElse(rw.visit(st.condition), rewrite(st.then_case, rw), other, span=st.span)
        if isinstance(st, tirx.Bind):
            return tirx.Bind(st.var, rw.visit(st.value), span=st.span)
        if isinstance(st, tirx.Evaluate):
            return tirx.Evaluate(rw.visit(st.value), span=st.span)
        if isinstance(st, tirx.For):
            return tirx.For(st.loop_var, st.min, st.extent, st.kind, rewrite(st.body, rw),
                            annotations=st.annotations, span=st.span)
        return st

    def fix(loop):
        if loop.kind != tirx.ForKind.VECTORIZED:
            return loop
        extent = const_int(loop.extent)
        if extent is None or extent <= 1:
            return loop
        rw = _Fp8CastViaFloat.make()
        body = rewrite(loop.body, rw)
        if not rw.found and not (extent > 4 and _fp8_broadcast(loop)):
            return loop
        if extent <= 4:
            return tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind, body,
                            annotations=loop.annotations, span=loop.span)
        if extent % 4:
            return tirx.For(loop.loop_var, loop.min, loop.extent, tirx.ForKind.SERIAL, body,
                            annotations=loop.annotations, span=loop.span)
        vo = tirx.Var(loop.loop_var.name + "_o", "int32")
        vi = tirx.Var(loop.loop_var.name, "int32")
        body = substitute_stmt(body, {loop.loop_var: loop.min + vo * 4 + vi})
        inner = tirx.For(vi, tirx.IntImm("int32", 0), tirx.IntImm("int32", 4), tirx.ForKind.VECTORIZED, body)
        return tirx.For(vo, tirx.IntImm("int32", 0), tirx.IntImm("int32", extent // 4), tirx.ForKind.SERIAL,
                        inner, annotations=loop.annotations, span=loop.span)

    def fp8_store(st):
        if isinstance(st, tirx.BufferStore) and _is_fp8(dtype_of(st.value)):
            stores.append(st)

    stores = []
    walk_stmts(func.body, fp8_store)
    if not stores and not any_expr(func.body, lambda e: isinstance(e, tirx.Cast)
                                   and (_is_fp8(dtype_of(e)) or _is_fp8(dtype_of(e.value)))):
        return func
    body = map_loops(func.body, fix)
    return func if body.same_as(func.body) else func.with_body(body)


def _take_markers(func):
    """(func without its marker statements, imported source texts in first-use order, names of
    tensors that may alias). The markers: ``T.import_source`` (``__tl_import_source(text)``) and
    ``T.annotate_restrict_buffers`` (``__tl_non_restrict(name, ...)``)."""
    from tvm import ir, tirx

    from tilelang.tir_utils import any_expr

    markers = ("__tl_import_source", "__tl_non_restrict")

    def marker_of(call):
        if isinstance(call, ir.Call) and call.args and getattr(call.args[0], "value", None) in markers:
            return call.args[0].value
        return None

    if not any_expr(func.body, lambda e: marker_of(e) is not None):
        return func, [], []
    sources, non_restrict = [], []

    def strip(st):
        call = st.value if isinstance(st, tirx.Evaluate) else None
        kind = marker_of(call)
        if kind is None:
            return None
        texts = [str(a.value) for a in call.args[1:]]
        into = sources if kind == "__tl_import_source" else non_restrict
        into.extend(t for t in texts if t not in into)
        return tirx.Evaluate(tirx.IntImm("int32", 0))

    from tilelang.tir_utils import map_stmts

    return func.with_body(map_stmts(func.body, pre=strip)), sources, non_restrict


# extern calls whose argument at this position only reads the global memory it points to
_READ_ONLY_ADDRESS_ARGS = {name: 1 for name in (
    "tl::cp_async_gs", "tl::cp_async_gs_conditional", "tl::sync_copy_gs", "tl::copy_vec",
    "tl::tma_load_bulk", "tl::tma_load_multicast_bulk")}
# scalar loads of packed 4-bit elements (codegen/subbyte.py): the tensor is their second argument
_NIBBLE_LOADS = ("tl::int4_load", "tl::uint4_load")


def read_only_params(func) -> set[str]:
    """Names of ``func``'s tensor parameters that the kernel only loads from: no store, and no
    address taken other than as the source of a ``cp.async``. Their kernel parameters are declared
    ``const T* __restrict__`` (as upstream does): nvcc may then move their loads across barriers
    and other memory operations. Any other use of the pointer (an atomic, an extern call, a
    reinterpretation) keeps it mutable; so does a store or an address taken through a view
    declared over its storage."""
    import tvm_ffi
    from tvm import ir, tirx

    # apache-tvm 0.27: a tensor parameter is the Var that loads (TensorLoad.source) and stores
    # (BufferStore.buffer) name directly
    params = {p: p.name for p in func.params}
    if not params:
        return set()
    address_of = ir.Op.get("tirx.address_of")
    mutable, exempt = set(), []
    views = []      # (view, parameter): a DeclBuffer over a parameter's storage (T.view, a laid-out tensor)

    def find_views(node):
        if isinstance(node, tirx.DeclBuffer) and isinstance(node.data, ir.Call) and node.data.args:
            owner = next((d for d in params if node.data.args[0].same_as(d)), None)
            if owner is not None:
                views.append((node.buffer, owner))
        return None

    tvm_ffi.structural_walk(func.body, find_views, order="pre")

    def mark(var):
        if var is None:
            return
        var = next((d for v, d in views if var.same_as(v)), var)
        for d in params:
            if var.same_as(d):
                mutable.add(d)

    def walk(node):
        tvm_ffi.structural_walk(node, visit, order="pre")

    def visit(node):
        if isinstance(node, tirx.DeclBuffer) and any(node.buffer.same_as(v) for v, _ in views):
            return tvm_ffi.WalkResult.SKIP         # the view's declaration: its uses decide
        if isinstance(node, ir.TensorLoad):          # a read: only its indices may use pointers
            for i in node.indices:
                walk(i)
            return tvm_ffi.WalkResult.SKIP
        if isinstance(node, tirx.BufferStore):
            mark(node.buffer)
            for e in list(node.indices) + [node.value]:
                walk(e)
            return tvm_ffi.WalkResult.SKIP
        if isinstance(node, ir.Call):
            if node.op.same_as(address_of):
                target = node.args[0] if node.args else None
                if isinstance(target, ir.TensorLoad) and not any(node.same_as(e) for e in exempt):
                    mark(target.source)
            elif node.args and isinstance(node.args[0], ir.StringImm) and node.args[0].value in _NIBBLE_LOADS:
                for e in node.args[2:]:        # (args[1]: the packed tensor, only read)
                    walk(e)
                return tvm_ffi.WalkResult.SKIP
            elif node.args and isinstance(node.args[0], ir.StringImm):
                at = _READ_ONLY_ADDRESS_ARGS.get(node.args[0].value.split("<")[0])
                if at is not None and len(node.args) > at + 1:
                    exempt.append(node.args[at + 1])
        elif isinstance(node, tirx.Var):
            mark(node)                         # the bare pointer, passed on or reinterpreted
        return None

    walk(func.body)
    return {name for d, name in params.items() if d not in mutable}


def _const_read_only(source: str, kernel: str, names: set[str]) -> str:
    """``T* __restrict__ name`` -> ``const T* __restrict__ name`` in ``kernel``'s declaration and
    definition, for the parameters ``names``."""
    if not names:
        return source
    sig = re.compile(r'(__global__ void (?:__launch_bounds__\([^)]*\) )?' + re.escape(kernel) + r'\()([^)]*)\)')

    def fix(m):
        parts = []
        for part in m.group(2).split(","):
            tokens = part.strip().replace("*", " * ").split()
            name = tokens[-1] if tokens else ""
            base = name[:-4] if name.endswith("_ptr") and name[:-4] in names else name
            if base in names and "*" in tokens and tokens[0] != "const" and "__grid_constant__" not in tokens:
                part = re.sub(r"^(\s*)", r"\1const ", part, count=1)
            parts.append(part)
        return m.group(1) + ",".join(parts) + ")"

    return sig.sub(fix, source)


# TVM's prelude tests CUDA versions with `#if ((...`; written `#if 0 || ((...` (same meaning), the
# text `if (` in a kernel's source means one of its branches only.
_PRELUDE_IF = re.compile(r"(?m)^(\s*#\s*(?:el)?if) \(")


def _unwrap_ldg_address(source: str) -> str:
    """``__ldg((&(x[i])))`` (TVM's parentheses around an address) -> ``__ldg(&(x[i]))``."""
    marker = "__ldg((&("
    start = source.find(marker)
    while start != -1:
        open_at = start + len("__ldg(")          # the redundant '(' around the address
        depth, k = 0, open_at
        while k < len(source):
            depth += {"(": 1, ")": -1}.get(source[k], 0)
            if depth == 0:
                break
            k += 1
        if k == len(source):
            break
        source = source[:open_at] + source[open_at + 1:k] + source[k + 1:]
        start = source.find(marker, open_at)
    return source


# Names. TVM prints the storage of a buffer ``X`` as ``X_ptr`` (kernel parameters, register and
# shared arrays); the source names it ``X``, as the kernel's author did, wherever ``X`` is free:
# the kernel uses no other name ``X``, no macro (of the source, imported code included, or of our
# device library) and no C++/CUDA keyword is called ``X``, and no other rename targets it.
_CXX_WORDS = frozenset("""
alignas alignof asm auto bool break case catch char char16_t char32_t class const constexpr const_cast
continue decltype default delete do double dynamic_cast else enum explicit export extern false float for
friend goto if inline int long mutable namespace new noexcept nullptr operator private protected public
register reinterpret_cast return short signed sizeof static static_assert static_cast struct switch
template this thread_local throw true try typedef typeid typename union unsigned using virtual void
volatile wchar_t while and or not xor bitand bitor compl and_eq or_eq not_eq xor_eq
threadIdx blockIdx blockDim gridDim warpSize half uint uchar ushort std tl cute main
""".split())
_ARRAY_DECL = re.compile(r"\b(\w+)_ptr\[[^\]]*\](?:\s*=\s*\{[^;]*\})?;")
_macro_names = None


def _header_macros() -> frozenset:
    """Object- and function-like macro names defined by our device library (``src/``)."""
    global _macro_names
    if _macro_names is None:
        names = set()
        try:
            from tilelang import knobs

            root = knobs.src_dir()
            for path in [root / "tl.h", *sorted((root / "tl").glob("*.h"))]:
                names.update(re.findall(r"(?m)^\s*#\s*define\s+(\w+)", path.read_text(errors="replace")))
        except Exception:   # no source tree: only the names printed in the kernel are avoided
            pass
        _macro_names = frozenset(names)
    return _macro_names


def _bare_names(source: str, params: list) -> dict:
    """{``X_ptr``: ``X``} for the kernel parameters ``params`` and the arrays declared in
    ``source`` whose bare name is free (see above)."""
    at = source.find('extern "C" __global__')
    candidates = {p for p in params if p.endswith("_ptr")}
    candidates.update(m.group(1) + "_ptr" for m in _ARRAY_DECL.finditer(source[max(at, 0):]))
    # A local name can only clash with names the kernel itself uses (a global one it does not use
    # is merely shadowed) and with object-like macros, which know no scope. Member names after
    # '.' or '->' (threadIdx.x) clash with nothing; string literals (extern "C") name nothing.
    kernel = re.sub(r'"(?:[^"\\\n]|\\.)*"', '""', source[at:] if at >= 0 else source)
    taken = set(re.findall(r"(?<![\w.])(?<!->)[A-Za-z_]\w*", kernel))
    taken |= set(re.findall(r"(?m)^\s*#\s*define\s+(\w+)", source)) | _CXX_WORDS | _header_macros()
    renames, targets = {}, set()
    for name in sorted(candidates):
        bare = name[:-4]
        if not bare or bare in taken or bare in targets or bare.startswith("__"):
            continue
        renames[name] = bare
        targets.add(bare)
    return renames


def _rename(source: str, renames: dict) -> str:
    """``source`` with the names of ``renames`` replaced in the kernel (not in the prelude)."""
    if not renames:
        return source
    at = max(source.find('extern "C" __global__'), 0)
    pattern = re.compile(r"\b(" + "|".join(re.escape(n) for n in sorted(renames, key=len, reverse=True)) + r")\b")
    return source[:at] + pattern.sub(lambda m: renames[m.group(1)], source[at:])


_ONE_ELEMENT = re.compile(r"(?m)^(\s*)(?:alignas\(\d+\) )?(\w+) (\w+)\[1\];$")


def _scalar_locals(source: str) -> str:
    """A register array of one element that the kernel only reaches as ``x[0]`` (T.alloc_var,
    T.alloc_local((1,), ...)) is declared and used as the scalar ``x``, as upstream prints it."""
    at = source.find('extern "C" __global__')
    if at < 0:
        return source
    head, kernel = source[:at], source[at:]
    for m in list(_ONE_ELEMENT.finditer(kernel)):
        name = m.group(3)
        uses = [u for u in re.finditer(r"(?<![\w.])(?<!->)" + re.escape(name) + r"\b", kernel)
                if u.start() != m.start(3)]
        if not uses or any(not kernel.startswith("[0]", u.end()) for u in uses):
            continue
        decl = f"{m.group(1)}{m.group(2)} {name};"
        kernel = kernel.replace(m.group(0), decl, 1)
        kernel = re.sub(r"(?<![\w.])(?<!->)" + re.escape(name) + r"\[0\]", name, kernel)
    return head + kernel


@dataclass
class CudaKernelSource:
    name: str
    source: str
    args: list          # [(c_type, name)] in kernel parameter order


_STUB_PTX = b".version 8.0\n.target sm_80\n.address_size 64\n"


def _skip_tvm_device_compile() -> None:
    """On a machine with CUDA, TVM compiles the device module while building it (NVRTC, without
    our headers). We only want the source, so its compile callback returns an empty module."""
    import tvm.support.nvcc  # noqa: F401 - registers TVM's callback first, so ours overrides it
    import tvm_ffi

    tvm_ffi.register_global_func("tvm_callback_cuda_compile", lambda *args: _STUB_PTX, override=True)


def _tirx_pipeline_without_cse():
    """apache-tvm's "tirx" pipeline without common-subexpression elimination (its switch,
    ``tir.disable_cse_tir``, is read but not registered in 0.27, so it cannot be set): the same
    passes in the same order, finalised the same way."""
    from tvm.s_tir import transform as s_tir_transform
    from tvm.tirx import compilation_pipeline as pipelines
    from tvm.tirx import transform as T

    _, finalize_host, finalize_device = pipelines.tirx_pipeline()

    @tvm.transform.module_pass(opt_level=0)
    def _pipeline(mod, _ctx):
        passes = [T.LowerTIRx(), s_tir_transform.UnifyThreadBinding(), T.StmtSimplify(), T.LowerTIRxOpaque(),
                  T.FlattenBuffer(), T.BF16ComputeLegalize(), T.NarrowDataType(32), T.VectorizeLoop(True),
                  T.UnrollLoop(), T.StmtSimplify(), T.FP8ComputeLegalize(), T.VerifyMemory(),
                  T.AnnotateEntryFunc(), T.SplitHostDevice(), pipelines.cuda_transforms.LowerIket(),
                  T.MakePackedAPI(), T.FP8StorageLegalize(), T.BF16StorageLegalize()]
        return tvm.ir.transform.Sequential(passes)(mod)

    return _pipeline, finalize_host, finalize_device


def _register_pipelines() -> None:
    from tvm.tirx import compilation_pipeline as pipelines

    if "tilelang_no_cse" not in pipelines.PIPELINE_MAP:
        pipelines.register_tir_pipeline("tilelang_no_cse", _tirx_pipeline_without_cse)


def _tvm_device_source(mod, target, pipeline: str) -> str:
    """TVM's CUDA source of ``mod``. Inside an instrumentation session
    (``tilelang.instrumentation``) the steps of ``tvm.compile`` that reach the device code run one
    by one, so that the device code generation (``target.build.cuda``) is a ``CodegenEvent`` its
    tools can watch or replace (``tools.lower_trace``: edit-and-recompile of the source); the
    host-side build, whose output we never read, is skipped. The device source is the same."""
    if current_compile_pass_instrumentation() is None:
        return tvm.compile(mod, target=target, tir_pipeline=pipeline).mod.imports[0].inspect_source()
    from tvm.tirx.build import codegen_build, split_host_device_mods   # (the module, not tirx.build)

    host = tvm.target.Target("llvm" if tvm.runtime.enabled("llvm") else "c")
    mod = tvm.tirx.transform.BindTarget(target.with_host(host))(mod)
    passes, _, finalize_device = tvm.tirx.get_tir_pipeline(pipeline)
    _, devices = split_host_device_mods(passes(mod))
    device_target, device_mod = next((t, m) for t, m in devices.items() if t.kind.name == "cuda")
    device_mod = finalize_device()(device_mod)
    built = run_codegen_with_instrumentation("target.build.cuda", device_mod, device_target,
                                             lambda: codegen_build(device_mod, device_target))
    return built.inspect_source()


def emit_cuda(func, arch: str, name: str = "main", tensormaps=(), cluster_dims=None, cse=True) -> CudaKernelSource:
    """CUDA source of ``func``; ``tensormaps`` names extra ``const __grid_constant__ CUtensorMap``
    parameters appended to the kernel (TVM has no type for them), which the device code reaches
    as ``TL_TMAP(j)`` == ``&tl_tmap_j``. ``cse=False`` builds without common-subexpression
    elimination, which otherwise may compute a loop bound on the host and pass it as an extra
    kernel argument our launcher does not know (``cse_v1``)."""
    _skip_tvm_device_compile()
    target = tvm.target.Target({"kind": "cuda", "arch": arch})
    func, imported, non_restrict = _take_markers(func)
    func = _legalize_fp8_vector_casts(_legalize_vector_loops(func))
    func = legalize_subbyte_accesses(func).with_attr("global_symbol", name)
    mod = tvm.IRModule({name: func})
    instruments = create_pass_instruments(context=f"stage=codegen, kernel={name}")   # [] unless instrumented
    with tvm.transform.PassContext(config={"tirx.disable_assert": True, "tirx.disable_cse_tir": True},
                                   instruments=instruments):
        if not cse:
            _register_pipelines()
        source = _tvm_device_source(mod, target, "tirx" if cse else "tilelang_no_cse")
    source = _unwrap_ldg_address(_fold_lane_calls(source))
    source = _fp8_lane_access(_pair_vector_casts(source))
    source = pack_vector_arith(source, arch)
    source = _PRELUDE_IF.sub(r"\1 0 || (", source)
    match = _SIG.search(source)
    if match is None:
        raise RuntimeError("could not find the kernel entry in TVM's CUDA output")
    args = []
    for part in match.group(2).split(","):
        part = part.strip()
        if not part:
            continue
        tokens = part.replace("*", " * ").split()
        args.append((" ".join(tokens[:-1]), tokens[-1]))
    if tensormaps:
        extra = ", ".join(f"const __grid_constant__ CUtensorMap {t}" for t in tensormaps)
        decl = re.compile(r'(__global__ void (?:__launch_bounds__\(\d+\) )?' + re.escape(match.group(1)) +
                          r'\(([^)]*))\)')
        # (a kernel whose only pointer is written through TMA stores has no other parameter)
        source = decl.sub(lambda m: m.group(1) + (", " if m.group(2).strip() else "") + extra + ")", source)
        args += [("CUtensorMap", t) for t in tensormaps]
        source = "#define TL_TMAP(j) (&tl_tmap_##j)\n" + source
    if cluster_dims:   # thread block clusters, fixed at compile time (a plain launch honours them)
        dims = ", ".join(str(int(d)) for d in cluster_dims)
        source = source.replace(f'__global__ void ', f'__global__ void __cluster_dims__({dims}) ')
    if "cudaGridDependencySynchronize" in source:
        # T.pdl_sync: the previous grid may still be writing what this kernel reads before the
        # sync, so no load may be assumed free of aliasing (and hoisted above the wait)
        source = source.replace(" __restrict__", "")
    if non_restrict:   # T.annotate_restrict_buffers: these tensors may alias
        for param in non_restrict:
            source = re.sub(r"__restrict__ (" + re.escape(str(param)) + r"(?:_ptr)?)\b", r"\1", source)
    source = _const_read_only(source, match.group(1), read_only_params(func))
    if "cooperative_groups::" in source:   # T.sync_grid (before TVM's prelude macros)
        source = "#include <cooperative_groups.h>\n" + source
    # bare names (the user's imported code is left as written, its names avoided)
    renames = _bare_names(source + "\n" + "\n".join(imported), [a for _, a in args])
    source = _drop_unused_cse(_half_lane_reads(_scalar_locals(_rename(source, renames))))
    args = [(ctype, renames.get(a, a)) for ctype, a in args]
    if imported:   # T.import_source: the user's device functions, after TVM's prelude
        text = "".join(t.rstrip() + "\n" for t in imported)
        at = source.find('extern "C" __global__')
        source = source[:at] + text + source[at:] if at >= 0 else text + source
    source = '#include "tl.h"\n' + source
    return CudaKernelSource(match.group(1), source, args)

