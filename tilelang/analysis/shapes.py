"""Tile-shape checks: ``T.copy`` extents (TL0601), ``T.Parallel`` extents against the fragments
they index (TL0603) and reduction output shapes (TL0604).

Input: a ``Kernel``. Symbolic extents (dynamic shapes) are skipped rather than guessed. A copy
between a global tensor and a tile is not checked against the tensor's bounds: the compiler
guards partial tiles itself.
"""

from __future__ import annotations

import math

from tvm import tirx

from tilelang.diagnostics import Severity, Note
from tilelang.tir_utils import const_int
from tilelang.transform.kernel import FRAGMENT_SCOPE, buffer_accesses, copy_base_extents, decode_region, parallel_nest


def check_shapes(k, rep) -> None:
    for stmt in k.tile_ops("copy"):
        rep.guard("copy check", _check_copy, k, rep, stmt)
    for stmt in k.tile_ops("reduce"):
        rep.guard("reduce check", _check_reduce, k, rep, stmt)
    for nest in k.nests:
        rep.guard("T.Parallel check", _check_parallel, k, rep, nest)


def _consts(values):
    out = [const_int(v) for v in values]
    return None if None in out else out


def _shape(buf):
    return _consts(buf.shape)


def _check_copy(k, rep, stmt) -> None:
    src, dst = decode_region(stmt.value.args[0]), decode_region(stmt.value.args[1])
    se, de = _consts(src.nonunit()[1]), _consts(dst.nonunit()[1])
    if se is None or de is None:
        return
    same = se == de or (math.prod(se) == math.prod(de) and (len(se) == 1 or len(de) == 1))
    if not same:
        tile = copy_base_extents(src, dst, se, de)
        message = (f"T.copy extent mismatch: the source '{src.buffer.name}' region is {_fmt(se)} but the "
                   f"destination '{dst.buffer.name}' region is {_fmt(de)}")
        if tile is not None:   # compiled as upstream does: the more local side's extents (the source's on a tie)
            message += (f"; {_fmt(tile)} elements are copied (the extents of the "
                        f"{'source' if tile == se else 'destination, the more local side'})")
        rep.emit("TL0601", message, rep.span(stmt), notes=_alloc_notes(rep, src, dst),
                 severity=None if tile is None else Severity.WARNING)
        return
    for index, region in ((0, src), (1, dst)):
        _check_inside(rep, stmt, index, region)


def _check_inside(rep, stmt, index, region) -> None:
    """A tile region of a shared buffer or fragment must lie inside the buffer."""
    if region.scope == "global":
        return
    starts, extents, shape = _consts(region.starts), _consts(region.extents), _shape(region.buffer)
    if starts is None or extents is None or shape is None:
        return
    for d, (s, e, n) in enumerate(zip(starts, extents, shape)):
        if s + e > n:
            rep.emit("TL0601", f"T.copy reaches past the end of '{region.buffer.name}': dimension {d} "
                     f"covers [{s}, {s + e}) but the buffer has {n} elements there",
                     rep.operand_span(stmt, index), notes=_alloc_notes(rep, region))
            return


def _fmt(ext) -> str:
    return "x".join(str(e) for e in ext) if ext else "a single element"


def _alloc_notes(rep, *regions):
    notes = []
    for r in regions:
        span = rep.alloc_span(r.buffer)
        if span is not None:
            shape = "x".join(str(const_int(s)) for s in r.buffer.shape)
            notes.append(Note(f"'{r.buffer.name}' ({shape} {r.dtype}) is allocated here", span))
    return notes


def _check_reduce(k, rep, stmt) -> None:
    args = stmt.value.args
    src, dst = decode_region(args[0]), decode_region(args[1])
    dim = const_int(args[3])
    shape, got = _shape(src.buffer), _shape(dst.buffer)
    if shape is None or got is None or dim is None:
        return
    rank = len(shape)
    if not -rank <= dim < rank:
        rep.emit("TL0604", f"reduction over dim={dim}, but '{src.buffer.name}' has {rank} dimension(s)",
                 rep.operand_span(stmt, 2, "dim"))
        return
    dim %= rank
    dropped = [n for d, n in enumerate(shape) if d != dim] or [1]
    kept = [1 if d == dim else n for d, n in enumerate(shape)]
    if got not in (dropped, kept):
        rep.emit("TL0604", f"reducing '{src.buffer.name}' {_fmt(shape)} over dim={dim} gives "
                 f"{_fmt(dropped)}, but '{dst.buffer.name}' is {_fmt(got)}",
                 rep.operand_span(stmt, 1), notes=_reduce_notes(rep, src, dst, shape, got, dim))


def _reduce_notes(rep, src, dst, shape, got, dim):
    notes = _alloc_notes(rep, src, dst)
    for other in range(len(shape)):
        if other != dim and [n for d, n in enumerate(shape) if d != other] == got:
            notes.append(Note(f"'{dst.buffer.name}' has the shape of a reduction over dim={other}"))
    return notes


def _check_parallel(k, rep, nest) -> None:
    loop_vars, extents, body = parallel_nest(nest)
    ext = _consts(extents)
    if ext is None:
        return
    reported = set()
    for buf, idx, _ in buffer_accesses(body):
        if k.scope(buf) != FRAGMENT_SCOPE or buf in reported:
            continue
        shape = _shape(buf)
        dims = _loop_dims(idx, loop_vars)
        if shape is None or dims is None:
            continue
        # A loop over part of the fragment runs on the threads holding that part (layout
        # inference pads it); a loop past its end is what upstream accepts too (the fragment
        # takes the loop's layout, storage included), so it is a warning.
        bad = [(d, v) for d, v in enumerate(dims) if v is not None and shape[d] < ext[v]]
        if bad:
            reported.add(buf)
            d, v = bad[0]
            rep.emit("TL0603", f"T.Parallel{tuple(ext)} indexes fragment '{buf.name}' (shape "
                     f"{_fmt(shape)}) with loop variable '{loop_vars[v].name}' of extent {ext[v]} "
                     f"in dimension {d}, which has {shape[d]} elements",
                     rep.header_span(nest), notes=_alloc_notes(rep, _Whole(buf)), severity=Severity.WARNING)


def _loop_dims(idx, loop_vars):
    """For each index: the position of the loop variable it is, None for a constant; None overall
    when an index is any other expression."""
    out = []
    for i in idx:
        if isinstance(i, tirx.Var):
            match = [n for n, v in enumerate(loop_vars) if v.same_as(i)]
            if not match:
                return None
            out.append(match[0])
        elif const_int(i) is not None:
            out.append(None)
        else:
            return None
    return out if any(v is not None for v in out) else None


class _Whole:
    """A region standing for a whole buffer (for allocation notes)."""

    def __init__(self, buf):
        self.buffer = buf
        self.dtype = str(buf.dtype)
