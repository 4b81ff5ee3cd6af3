"""Vector arithmetic one pair of lanes per instruction (a rewrite of TVM's CUDA text).

TVM prints the arithmetic of a vectorized loop lane by lane: ``__1.x = (v_.x+v__1.x);`` for a
``float4`` / ``half4`` / ``nv_bfloat164`` value, ``((half2*)(&(__1.x)))->x = (...)`` for eight
16-bit lanes held in a ``uint4``. A run of such lines over a pair of lanes becomes one packed call
of ``src/tl/packed.h`` on the pair reinterpreted as its native pair type:

    *(float2*)(&(__1.x)) = tl::add2(*(float2*)(&(v_.x)), *(float2*)(&(v__1.x)));

(``+ - *`` -> ``tl::add2 / sub2 / mul2``). A product used only as one operand of a sum becomes
``tl::fma2`` and is not computed on its own (nvcc contracts the lane-wise form the same way).

Which pairs: 16-bit floats on every target (``__half2``; ``__nv_bfloat162`` from sm_80, where the
bf16x2 instructions exist), 32-bit floats on sm_100 and later only (``float2``: the ``.f32x2``
instructions; elsewhere the lane-wise form is the same code).
"""

from __future__ import annotations

import re

_OPS = {"+": "add2", "-": "sub2", "*": "mul2"}
# struct lanes (``v.x``): declared vector type -> element kind
_STRUCT_KIND = {"float2": "f32", "float4": "f32", "half2": "f16", "half4": "f16",
                "nv_bfloat162": "bf16", "nv_bfloat164": "bf16"}
_PACKED_KIND = {"half2": "f16", "nv_bfloat162": "bf16"}
_PAIR = {"f32": "float2", "f16": "__half2", "bf16": "__nv_bfloat162"}

_STRUCT_LANE = re.compile(r"^(\s*)(\w+)\.([xyzw]) = \((\w+)\.\3([+\-*])(\w+)\.\3\);$")
_PACKED_LANE = re.compile(r"^(\s*)\(\((half2|nv_bfloat162)\*\)\(&\((\w+)\.([xyzw])\)\)\)->([xy]) = "
                          r"\(\(\(\2\*\)\(&\((\w+)\.\4\)\)\)->\5([+\-*])\(\(\2\*\)\(&\((\w+)\.\4\)\)\)->\5\);$")
_NEXT = {"x": "y", "z": "w"}


def _arch_number(arch: str) -> int:
    m = re.match(r"sm_(\d+)", arch or "")
    return int(m.group(1)) if m else 0


def _kinds(arch: str) -> set:
    n = _arch_number(arch)
    kinds = {"f16"}
    if n >= 80:
        kinds.add("bf16")
    if n >= 100:
        kinds.add("f32")
    return kinds


def _declared(lines, upto, name):
    pattern = re.compile(r"^\s*(\w+) " + re.escape(name) + r"(?: =|;)")
    for k in range(upto, -1, -1):
        m = pattern.match(lines[k])
        if m:
            return m.group(1)
    return None


def _ref(pair, name, field):
    return f"*({pair}*)(&({name}.{field}))"


def _pair_lines(lines, kinds):
    """Lines with every lane pair replaced by one packed call, and the packed calls found:
    [(line number, pair type, op name, destination, field, operand a, operand b)]."""
    out, calls, i = [], [], 0
    while i < len(lines):
        line = lines[i]
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        m, n = _STRUCT_LANE.match(line), _STRUCT_LANE.match(nxt)
        if m and n and _NEXT.get(m.group(3)) == n.group(3) and m.group(1) == n.group(1) and \
                (m.group(2), m.group(4), m.group(5), m.group(6)) == (n.group(2), n.group(4), n.group(5), n.group(6)):
            kind = _STRUCT_KIND.get(_declared(lines, i, m.group(2)) or "")
            if kind in kinds:
                indent, dst, field, a, op, b = m.group(1), m.group(2), m.group(3), m.group(4), m.group(5), m.group(6)
                calls.append((len(out), _PAIR[kind], _OPS[op], dst, field, a, b, indent))
                out.append(None)
                i += 2
                continue
        m, n = _PACKED_LANE.match(line), _PACKED_LANE.match(nxt)
        if m and n and m.group(5) == "x" and n.group(5) == "y" and m.group(1) == n.group(1) and \
                (m.group(2), m.group(3), m.group(4), m.group(6), m.group(7), m.group(8)) == \
                (n.group(2), n.group(3), n.group(4), n.group(6), n.group(7), n.group(8)):
            kind = _PACKED_KIND[m.group(2)]
            if kind in kinds:
                indent, dst, field, a, op, b = m.group(1), m.group(3), m.group(4), m.group(6), m.group(7), m.group(8)
                calls.append((len(out), _PAIR[kind], _OPS[op], dst, field, a, b, indent))
                out.append(None)
                i += 2
                continue
        out.append(line)
        i += 1
    return out, calls


def _uses(text, name) -> int:
    return len(re.findall(r"(?<![\w.])" + re.escape(name) + r"\b", text))


def pack_vector_arith(source: str, arch: str) -> str:
    """``source`` with TVM's lane-wise vector ``+ - *`` written one pair of lanes per packed call
    (see the module docstring)."""
    kinds = _kinds(arch)
    if not (re.search(_STRUCT_LANE.pattern, source, re.M) or "->x = (((" in source):
        return source
    lines = source.split("\n")
    out, calls = _pair_lines(lines, kinds)
    if not calls:
        return source
    text = {}
    for at, pair, op, dst, field, a, b, indent in calls:
        text[at] = [indent, pair, op, dst, field, [_ref(pair, a, field), _ref(pair, b, field)]]
    # fma: a product vector whose every pair is a mul2, declared and otherwise only read as one
    # operand of add2 pairs of the same fields (each field once)
    products = {}
    for at, pair, op, dst, field, a, b, indent in calls:
        products.setdefault(dst, []).append((at, op, field))
    whole = "\n".join(line for line in out if line is not None)
    fused = set()
    for name, defs in products.items():
        if not all(op == "mul2" for _, op, _ in defs):
            continue
        if _uses(whole, name) != 1 or not re.search(r"(?m)^\s*\w+ " + re.escape(name) + r";$", whole):
            continue
        fields = {f: at for at, _, f in defs}
        readers = {}
        ok = True
        for at, t in text.items():
            if t is None:
                continue
            n_uses = sum(_uses(arg, name) for arg in t[5])
            if n_uses == 0:
                continue
            own = _ref(t[1], name, t[4])
            if t[2] != "add2" or n_uses != 1 or own not in t[5] or t[4] not in fields or t[4] in readers:
                ok = False
                break
            readers[t[4]] = at
        if not ok or set(readers) != set(fields):
            continue
        for field, at in readers.items():
            t = text[at]
            addend = [arg for arg in t[5] if arg != _ref(t[1], name, field)]
            t[2], t[5] = "fma2", text[fields[field]][5] + addend
        for at in fields.values():
            text[at] = None
        fused.add(name)
    result = []
    for k, line in enumerate(out):
        if line is None:
            t = text[k]
            if t is not None:
                indent, pair, op, dst, field, args = t
                result.append(f"{indent}{_ref(pair, dst, field)} = tl::{op}({', '.join(args)});")
            continue
        if fused and re.match(r"^\s*\w+ (" + "|".join(re.escape(n) for n in fused) + r");$", line):
            continue
        result.append(line)
    return "\n".join(result)


__all__ = ["pack_vector_arith"]
