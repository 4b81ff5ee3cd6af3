"""Checks of ``T.gemm``: operand shapes (TL0101), dtypes (TL0102), warp partition (TL0103).

Input: a ``Kernel`` (analysis/kernel.py). For every ``tl.gemm`` statement, with the transpose
flags applied, A must be an M x K tile, B a K x N tile and C an M x N fragment; K must be a
multiple of the mma instruction's K; the operand and accumulator dtypes must have a tensor-core
instruction on the target; and the gemm warp policy must split M x N over the block's warps.
Shape problems point at the operand that disagrees (B for K, C for M x N). ``tl.tcgen05_gemm``
(``T.tcgen05_gemm`` as the checker builds it) gets the shape checks only.
"""

from __future__ import annotations

from tilelang import targets
from tilelang.diagnostics import Fix, Note, TextEdit
from tilelang.tir_utils import const_int
from tilelang.transform.kernel import FRAGMENT_SCOPE, SHARED_SCOPES, LoweringError, decode_region
from tilelang.transform.layout_inference import warp_partition

A, B, C = 0, 1, 2
_POLICY = {0: "Square", 1: "FullRow", 2: "FullCol"}


def check_gemms(k, rep) -> None:
    for stmt in k.tile_ops("gemm"):
        rep.guard("gemm check", _check_one, k, rep, stmt)
    for stmt in k.tile_ops("tcgen05_gemm"):   # built only by the checker (language/tmem.py): shapes only
        rep.guard("gemm check", _check_tcgen05, k, rep, stmt)


def _flags(stmt):
    args = stmt.value.args
    return bool(const_int(args[3])), bool(const_int(args[4])), const_int(args[5])


def _tile(region):
    """Constant extents of the non-unit dimensions, or None when one is symbolic."""
    ext = [const_int(e) for e in region.nonunit()[1]]
    return None if None in ext else ext


def _describe(region) -> str:
    shape = "x".join(str(const_int(e)) for e in region.extents)
    return f"'{region.buffer.name}' ({shape} {region.dtype})"


def _check_one(k, rep, stmt) -> None:
    a, b, c = (decode_region(x) for x in stmt.value.args[:3])
    if not _check_scopes(rep, stmt, a, b, c):
        return
    fma = targets.gemm_uses_fma(a.dtype, b.dtype, c.dtype, k.arch)   # CUDA-core fallback: any K, no warps
    dims = _check_shapes(k, rep, stmt, a, b, c, fma)
    problem = None if fma else targets.mma_problem(a.dtype, b.dtype, c.dtype, k.arch)
    if problem is not None:
        which, reason = problem
        index = {"A": A, "B": B, "C": C}[which]
        rep.emit("TL0102", f"T.gemm has no tensor-core instruction for these types: {reason}",
                 rep.operand_span(stmt, index),
                 notes=[Note(f"{_describe(r)} is allocated here", rep.alloc_span(r.buffer))
                        for r in (a, b, c) if rep.alloc_span(r.buffer) is not None])
    if dims is not None and not fma:
        _check_partition(k, rep, stmt, *dims)


def _check_tcgen05(k, rep, stmt) -> None:
    """``T.tcgen05_gemm``: the operand shapes (TL0101); its instruction shapes, types and issue
    (one thread, tensor memory) belong to an sm_100 lowering this TileLang does not have."""
    a, b, c = (decode_region(x) for x in stmt.value.args[:3])
    args = stmt.value.args
    if len(args) > 9 and const_int(args[9]):   # use_2cta: each CTA of the pair holds half of B's N
        tiles = [_tile(r) for r in (a, b, c)]
        if None in tiles or any(len(t) != 2 for t in tiles):
            return
        ta, tb, _ = _flags(stmt)
        M, K = (tiles[A][1], tiles[A][0]) if ta else tuple(tiles[A])
        Kb, N = (tiles[B][1], tiles[B][0]) if tb else tuple(tiles[B])
        if K != Kb:
            _report_k_mismatch(rep, stmt, a, b, (M, K, Kb, N), ta, tb)
        elif tiles[C] != [M, 2 * N]:
            rep.emit("TL0101", f"T.tcgen05_gemm(use_2cta=True) C must be {M}x{2 * N} for A {_describe(a)} and "
                     f"B {_describe(b)} (each CTA of the pair holds half of N), but {_describe(c)} is "
                     f"{tiles[C][0]}x{tiles[C][1]}", rep.operand_span(stmt, C), notes=_alloc_notes(rep, c))
        return
    _check_shapes(k, rep, stmt, a, b, c)


def _check_scopes(rep, stmt, a, b, c) -> bool:
    ok = True
    if c.scope != FRAGMENT_SCOPE:
        rep.emit("TL0002", f"T.gemm accumulates into a register fragment, but '{c.buffer.name}' is "
                 f"in {c.scope} memory: allocate it with T.alloc_fragment", rep.operand_span(stmt, C))
        ok = False
    if b.scope not in SHARED_SCOPES:     # (a whole fragment B is staged: transform/stage_operands.py)
        what = f"part of the fragment '{b.buffer.name}'" if b.scope == FRAGMENT_SCOPE else \
            f"'{b.buffer.name}' is in {b.scope} memory"
        rep.emit("TL0002", f"T.gemm reads B from shared memory (a whole fragment is copied there for it), but "
                 f"{'B is ' if b.scope == FRAGMENT_SCOPE else ''}{what}: copy it into a T.alloc_shared buffer first",
                 rep.operand_span(stmt, B))
        ok = False
    if a.scope not in SHARED_SCOPES and a.scope != FRAGMENT_SCOPE:
        rep.emit("TL0002", f"T.gemm reads A from shared memory or a fragment, but '{a.buffer.name}' "
                 f"is in {a.scope} memory", rep.operand_span(stmt, A))
        ok = False
    return ok


def _check_shapes(k, rep, stmt, a, b, c, fma=False):
    """Report TL0101 problems; (M, N, K) when the shapes are consistent, else None."""
    ta, tb, _ = _flags(stmt)
    tiles = [_tile(r) for r in (a, b, c)]
    if None in tiles:
        return None
    for index, (name, tile, region) in enumerate(zip("ABC", tiles, (a, b, c))):
        if len(tile) != 2:
            rep.emit("TL0101", f"T.gemm operand {name} must be a 2-D tile, but {_describe(region)} has "
                     f"{len(tile)} dimension(s) larger than 1", rep.operand_span(stmt, index))
            return None
    M, K = (tiles[A][1], tiles[A][0]) if ta else tuple(tiles[A])
    Kb, N = (tiles[B][1], tiles[B][0]) if tb else tuple(tiles[B])
    if K != Kb:
        _report_k_mismatch(rep, stmt, a, b, (M, K, Kb, N), ta, tb)
        return None
    if tiles[C] != [M, N]:
        rep.emit("TL0101", f"T.gemm C must be {M}x{N} for A {_describe(a)} and B {_describe(b)}, but "
                 f"{_describe(c)} is {tiles[C][0]}x{tiles[C][1]}", rep.operand_span(stmt, C),
                 notes=_alloc_notes(rep, c))
        return None
    step = max(16, targets.mma_k_granularity(a.dtype))
    if K % step and not fma:
        rep.emit("TL0101", f"T.gemm K={K} must be a multiple of {step}: one {a.dtype} mma instruction "
                 f"consumes K={targets.mma_k_granularity(a.dtype)} and the tile is split in steps of {step}",
                 rep.operand_span(stmt, A), notes=_alloc_notes(rep, a))
        return None
    return M, N, K


def _report_k_mismatch(rep, stmt, a, b, dims, ta, tb) -> None:
    M, K, Kb, N = dims
    how_a = "K x M (transpose_A=True)" if ta else "M x K"
    how_b = "N x K (transpose_B=True)" if tb else "K x N"
    message = (f"T.gemm K mismatch: A {_describe(a)} read as {how_a} gives K={K}, but B {_describe(b)} "
               f"read as {how_b} gives K={Kb}")
    fix = None
    rows, cols = _tile(b)
    if (rows if tb else cols) == K and "transpose_B" not in _keywords(rep, stmt):
        fix = _append_keyword(rep, stmt, f"transpose_B={not tb}")
    rep.emit("TL0101", message, rep.operand_span(stmt, B), notes=_alloc_notes(rep, a, b), fix=fix)


def _keywords(rep, stmt) -> set:
    call = rep.call_node(stmt)
    return {kw.arg for kw in call.keywords} if call is not None else set()


def _append_keyword(rep, stmt, text: str) -> Fix | None:
    """A fix adding ``, text`` before the closing parenthesis of the call."""
    call = rep.call_node(stmt)
    if call is None:
        return None
    end = rep.ast_span(stmt, call)
    at = type(end)(end.file, end.end_line, end.end_column - 1, end.end_line, end.end_column - 1)
    layout = "N x K" if text.endswith("True") else "K x N"
    return Fix(f"if B is stored {layout}, add `{text}`", [TextEdit(at, f", {text}")])


def _alloc_notes(rep, *regions):
    notes = []
    for r in regions:
        span = rep.alloc_span(r.buffer)
        if span is not None:
            notes.append(Note(f"{_describe(r)} is allocated here", span))
    return notes


def _check_partition(k, rep, stmt, M, N, K) -> None:
    from tilelang.transform.thread_regions import regions

    region = regions(k.info).get(stmt)     # a gemm under `if tx < n:` runs on that range's warps
    threads = region.count if region is not None else k.info.num_threads
    policy = _flags(stmt)[2]
    span = rep.operand_span(stmt, 5, "policy")
    if threads % 32:
        rep.emit("TL0103", f"T.gemm needs whole warps, but the block has {threads} threads: use a "
                 f"multiple of 32 in T.Kernel(threads=...)", rep.kernel_span())
        return
    try:
        warp_partition(M, N, threads // 32, policy, None)
    except LoweringError:
        name = _POLICY.get(policy, str(policy))
        rep.emit("TL0103", f"No valid warp partition: T.gemm cannot split its {M}x{N} tile over "
                 f"{threads // 32} warps (policy {name}): every warp needs a multiple of 16 rows and 8 columns",
                 span, notes=[Note(f"the block has {threads} threads", rep.kernel_span())])

