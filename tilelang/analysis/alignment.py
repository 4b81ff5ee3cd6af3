"""Alignment of copies between global memory and tiles (TL0301 on sm_90+, TL0302 elsewhere).

Input: a ``Kernel`` with concrete shapes. For each ``T.copy`` that moves a tile between a global
tensor and shared memory or a fragment, along the tensor's contiguous last dimension, the
16-byte rule must hold for the tensor's row stride, the tile's inner extent and the tile's
starting column. When it does not, TMA (sm_90 global->shared) and 16-byte ``cp.async`` /
vector accesses are impossible; the compiler silently falls back to the widest vector every
quantity allows. The diagnostic names the quantity, the vector width left and what it costs.
It points at the global operand. Copies whose shapes are symbolic are skipped.
"""

from __future__ import annotations

import math

from tvm import tirx

from tilelang import targets
from tilelang.diagnostics import Note
from tilelang.language.dtypes import nbytes
from tilelang.tir_utils import analyzer, const_int
from tilelang.transform.kernel import SHARED_SCOPES, Region, copy_base_extents, decode_region


def check_alignment(k, rep) -> None:
    for stmt in k.tile_ops("copy"):
        rep.guard("alignment check", _check_copy, k, rep, stmt)


def _check_copy(k, rep, stmt) -> None:
    src, dst = decode_region(stmt.value.args[0]), decode_region(stmt.value.args[1])
    if (src.scope == "global") == (dst.scope == "global") or src.dtype != dst.dtype:
        return
    index, glob, tile = (0, src, dst) if src.scope == "global" else (1, dst, src)
    problems = _problems(_as_copied(glob, src, dst), tile)
    if not problems:
        return
    esize = nbytes(glob.dtype)
    width = _vector_bytes(problems)
    tma = targets.has_tma(k.arch) and index == 0 and tile.scope in SHARED_SCOPES
    what, why = problems[0][1], problems[0][2]
    cost = _cost(width, esize)
    if tma:
        message = (f"T.copy from '{glob.buffer.name}' cannot use TMA or 16-byte cp.async: {what} is "
                   f"{why}, not a multiple of 16 bytes; {cost}")
        code = "TL0301"
    else:
        direction = "from" if index == 0 else "to"
        message = (f"T.copy {direction} '{glob.buffer.name}' cannot use 16-byte vectors: {what} is {why}, "
                   f"not a multiple of 16 bytes; {cost}")
        code = "TL0302"
    notes = [Note(f"{p[1]} is {p[2]}") for p in problems[1:]]
    notes.append(Note(f"pad the dimension to a multiple of {max(1, 16 // esize)} {glob.dtype} "
                      "elements (and mask the tail) to restore full-width copies"))
    rep.emit(code, message, rep.operand_span(stmt, index), notes=notes)


def _as_copied(glob, src, dst):
    """The global region as the copy moves it: where the two regions' constant extents differ
    but pair up, the tile is the more local side's (``copy_base_extents``), read or written at the
    global region's start."""
    gd = glob.nonunit()[0]
    se, de = ([const_int(e) for e in r.nonunit()[1]] for r in (src, dst))
    if None in se or None in de or se == de:
        return glob
    tile = copy_base_extents(src, dst, se, de)
    if tile is None or len(tile) != len(gd):
        return glob
    extents = list(glob.extents)
    for d, e in zip(gd, tile):
        extents[d] = tirx.const(e, "int32")
    return Region(glob.buffer, glob.starts, extents, glob.access)


def _cost(width: int, esize: int) -> str:
    if width < esize:
        width = esize
    if width >= 16:
        return "the copy still moves 16 bytes per instruction"
    share = 16 // width
    return (f"the copy falls back to {width}-byte accesses, {share}x the memory instructions "
            f"of 16-byte vectors (up to 1/{share} of the copy bandwidth)")


def _vector_bytes(problems) -> int:
    g = 16
    for value, _, _ in problems:
        g = math.gcd(g, value)
    return g


def _problems(glob, tile):
    """[(bytes, what, description)] for every quantity that breaks the 16-byte rule."""
    shape = [const_int(s) for s in glob.buffer.shape]
    dims = glob.nonunit()[0]
    if None in shape or not shape or (dims and dims[-1] != len(shape) - 1):
        return []
    esize = nbytes(glob.dtype)
    out = []
    if len(shape) >= 2 and dims:
        row = shape[-1] * esize
        if row % 16:
            out.append((row, f"a row of '{glob.buffer.name}'", f"{row} bytes ({shape[-1]} x {glob.dtype})"))
    inner = const_int(glob.extents[-1]) if glob.extents else None
    if inner is not None and dims and (inner * esize) % 16:
        out.append((inner * esize, "the tile's inner extent", f"{inner * esize} bytes ({inner} x {glob.dtype})"))
    start = _start_alignment(glob.starts[-1]) if glob.starts else None
    if start is not None and dims and (start * esize) % 16:
        out.append((start * esize, "the tile's starting column",
                     f"aligned to {start * esize} bytes only ({glob.starts[-1]})"))
    return out


def _start_alignment(expr) -> int | None:
    """The largest power-of-two element count that always divides ``expr`` (None: always 0)."""
    value = const_int(expr)
    if value is not None:
        return None if value == 0 else value & -value
    ms = analyzer().modular_set(expr)
    g = math.gcd(int(ms.coeff), int(ms.base))
    return None if g == 0 else g & -g
