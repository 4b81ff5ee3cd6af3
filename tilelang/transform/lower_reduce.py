"""Lowering of ``T.reduce_*`` and ``T.cumsum``.

A reduction of fragment ``src`` over ``dim`` runs in three steps: each thread folds the registers
it holds along ``dim`` (from 8 registers on, into ``FOLD_LANES`` independent partial results
combined as a tree, so the dependency chain is a quarter as long); threads of the same warp that
hold other parts of the row combine through
an XOR-shuffle butterfly (``tl::warp_allreduce``); threads in other warps combine through a
shared-memory workspace. Every replica of the result ends up with the full value, which is what
the replicated output layout (``drop_dim``) promises.
"""

from __future__ import annotations

import math

from tvm import tirx

from tilelang.layout.fragment import LOCAL, THREAD
from tilelang.tir_utils import const_int, evaluate_extern, i32, seq, simplify, substitute, substitute_stmt
from tilelang.transform import thread_sync
from tilelang.transform.kernel import FRAGMENT_SCOPE, SHARED_SCOPES, LoweringError, decode_region, scope_of

_OPS = {
    "sum": ("tl::SumOp", lambda a, b: a + b),
    "abssum": ("tl::SumOp", lambda a, b: a + b),
    "max": ("tl::MaxOp", tirx.max),
    "absmax": ("tl::MaxOp", tirx.max),
    "min": ("tl::MinOp", tirx.min),
    "bitand": ("tl::BitAndOp", tirx.bitwise_and),
    "bitor": ("tl::BitOrOp", tirx.bitwise_or),
    "bitxor": ("tl::BitXorOp", tirx.bitwise_xor),
}


def _nan_combine(intrin):
    return lambda a, b: tirx.call_extern(a.dtype, intrin, a, b)


# ``nan_propagate`` on 16-bit floats: a NaN operand wins (CUDA's ``__hmax_nan``/``__hmin_nan``).
_NAN_OPS = {
    "max": ("tl::MaxOpNan", _nan_combine("__hmax_nan")),
    "absmax": ("tl::MaxOpNan", _nan_combine("__hmax_nan")),
    "min": ("tl::MinOpNan", _nan_combine("__hmin_nan")),
}

# Independent partial results per output register in a thread's fold (a power of two).
FOLD_LANES = 4


def _init(kind, dtype):
    if kind in ("sum", "abssum", "absmax", "bitor", "bitxor"):
        return tirx.const(0, dtype)
    if kind == "bitand":  # all bits set
        return tirx.max_value(dtype) if dtype.startswith("uint") else tirx.const(-1, dtype)
    if kind == "max":
        return tirx.min_value(dtype) if not dtype.startswith(("float", "bfloat")) else -tirx.infinity(dtype)
    return tirx.max_value(dtype) if not dtype.startswith(("float", "bfloat")) else tirx.infinity(dtype)


def _digit(x, stride, extent):
    return tirx.floormod(tirx.floordiv(x, i32(stride)), i32(extent))


def lower_reduce(lw, stmt):
    args = stmt.value.args
    src, dst = decode_region(args[0]), decode_region(args[1])
    kind, dim, clear = str(args[2].value), int(args[3].value), bool(int(args[4].value))
    batch, nan = (int(args[5].value), bool(int(args[6].value))) if len(args) > 6 else (1, False)
    if kind not in _OPS:
        raise LoweringError("TL0002", f"unknown reduction '{kind}'", stmt.span)
    dtype = str(dst.buffer.dtype)
    functor, combine = _OPS[kind]
    if nan and kind in ("max", "min", "absmax") and dtype in ("float16", "bfloat16"):
        functor, combine = _NAN_OPS[kind]
    if FRAGMENT_SCOPE != scope_of(src.buffer) or FRAGMENT_SCOPE != scope_of(dst.buffer):
        return _reduce_rows(lw, stmt, src, dst, kind, dim, clear, combine)
    F = lw.layouts.fragments[src.buffer]
    G = lw.layouts.fragments[dst.buffer]
    if dim < 0:
        dim += len(F.shape)
    kept = sorted((a for a in F.local_axes if a.dim != dim), key=lambda a: a.stride)
    red = sorted((a for a in F.local_axes if a.dim == dim), key=lambda a: a.stride)
    n_out = math.prod(a.extent for a in kept) or 1
    n_red = math.prod(a.extent for a in red) or 1
    if batch > n_out or n_out % batch:
        what = "exceeds total output elements" if batch > n_out else "must evenly divide"
        raise LoweringError("TL0002", f"reduce batch={batch} {what}: each thread holds {n_out} "
                            f"output element(s) of '{dst.buffer.name}'", stmt.span)
    acc = tirx.decl_buffer((n_out,), dtype, f"{dst.buffer.name}_red", scope="local")
    src_local, dst_local = lw.frag[src.buffer], lw.frag[dst.buffer]

    def src_index(u, w):
        e, gs = i32(0), 1
        for a in kept:
            e = e + _digit(u, gs, a.extent) * a.stride
            gs *= a.extent
        rs = 1
        for a in red:
            e = e + _digit(w, rs, a.extent) * a.stride
            rs *= a.extent
        return simplify(e)

    u, w = tirx.Var("u", "int32"), tirx.Var("w", "int32")
    value = tirx.BufferLoad(src_local, [src_index(u, w)])
    if value.ty.dtype != dtype if hasattr(value.ty, "dtype") else False:
        value = tirx.Cast(dtype, value)
    if str(src.buffer.dtype) != dtype:
        value = tirx.Cast(dtype, value)
    if kind in ("abssum", "absmax"):
        value = tirx.abs(value)
    stmts = [tirx.AllocBuffer(acc)]
    if n_red >= 2 * FOLD_LANES:
        # FOLD_LANES independent partial results, combined as a tree at the end: dependency
        # chains of n_red / FOLD_LANES instead of n_red (a softmax row of 32 registers: 10 dependent
        # FMNMX instead of 32)
        part = tirx.decl_buffer((FOLD_LANES,), dtype, f"{dst.buffer.name}_part", scope="local")
        lane = tirx.floormod(w, i32(FOLD_LANES))
        w0 = tirx.Var("w0", "int32")
        first = tirx.For(w0, i32(0), i32(FOLD_LANES), tirx.ForKind.SERIAL,
                         tirx.BufferStore(part, substitute(value, {w: w0}), [w0]),
                         annotations={"pragma_unroll": True})
        rest = tirx.For(w, i32(FOLD_LANES), i32(n_red - FOLD_LANES), tirx.ForKind.SERIAL,
                        tirx.BufferStore(part, combine(tirx.BufferLoad(part, [lane]), value), [lane]),
                        annotations={"pragma_unroll": True})
        level = [tirx.BufferLoad(part, [i32(i)]) for i in range(FOLD_LANES)]
        while len(level) > 1:
            level = [combine(level[i], level[i + 1]) for i in range(0, len(level), 2)]
        stmts.append(_for(u, n_out, seq([tirx.AllocBuffer(part), first, rest,
                                         tirx.BufferStore(acc, level[0], [u])])))
    else:
        fold = tirx.For(w, i32(0), i32(n_red), tirx.ForKind.SERIAL,
                        tirx.BufferStore(acc, combine(tirx.BufferLoad(acc, [u]), value), [u]),
                        annotations={"pragma_unroll": True})
        stmts.append(_for(u, n_out, seq([tirx.BufferStore(acc, _init(kind, dtype), [u]), fold])))
    in_warp, cross = _split_thread_axes([a for a in F.thread_axes if a.dim == dim and a.extent > 1])
    # A block smaller than a warp shuffles among its own lanes only (a mask over the live lanes).
    mask = f", {hex((1 << lw.T) - 1)}u" if lw.T < 32 else ""
    for stride, extent in in_warp:
        shuffled = tirx.call_extern(dtype, f"tl::warp_allreduce<{functor}, {stride}, {stride * extent}{mask}>",
                                    tirx.BufferLoad(acc, [u]))
        stmts.append(_for(u, n_out, tirx.BufferStore(acc, shuffled, [u])))
    if cross:
        stmts.extend(_cross_warp(lw, acc, n_out, cross, combine, dtype, dst.buffer.name))
    # Write the result: the output fragment's registers follow the kept axes' order.
    result = tirx.BufferLoad(acc, [u])
    if not clear:
        result = combine(tirx.BufferLoad(dst_local, [u]), result)
    stmts.append(_for(u, n_out, tirx.BufferStore(dst_local, result, [u], span=stmt.span)))
    if n_out != max(G.local_size, 1):
        raise LoweringError("TL0201", f"reduction output '{dst.buffer.name}' holds {G.local_size} registers "
                            f"per thread, the reduction produces {n_out}", stmt.span)
    return seq(stmts)


def _reduce_rows(lw, stmt, src, dst, kind, dim, clear, combine):
    """A reduction with a shared-memory operand: every thread folds whole rows serially, reading
    shared memory (a fragment operand is staged through a shared scratch, as for ``T.cumsum``)."""
    for r in (src, dst):
        if not r.is_whole():
            raise LoweringError("TL0002", "T.reduce_* with a shared operand works on whole buffers", stmt.span)
    shape = [const_int(x) for x in src.buffer.shape]
    dshape = [const_int(x) for x in dst.buffer.shape]
    if dim < 0:
        dim += len(shape)
    keep = len(dshape) == len(shape)
    sync = thread_sync.sync_stmt(lw)
    stmts = [sync]
    s_at = _scan_operand(lw, src, shape, "src", stmts)
    d_at = _scan_operand(lw, dst, dshape, "src" if not clear else "dst", stmts)
    dtype = str(dst.buffer.dtype)
    other = [d for d in range(len(shape)) if d != dim]
    rows, T = math.prod(shape[d] for d in other) if other else 1, lw.T
    rounds = -(-rows // T)
    r0, k = tirx.Var("r0", "int32"), tirx.Var("k", "int32")
    row = r0 * T + lw.tid if rounds > 1 else lw.tid
    idx, rest = [i32(0)] * len(shape), row
    for d in reversed(other):
        idx[d], rest = tirx.floormod(rest, i32(shape[d])), tirx.floordiv(rest, i32(shape[d]))
    didx = [i32(0) if d == dim else idx[d] for d in range(len(shape))] if keep else [idx[d] for d in other]
    acc = tirx.decl_buffer((1,), dtype, "reduce_acc", scope="local")
    s_buf, s_idx = s_at([k if d == dim else idx[d] for d in range(len(shape))])
    d_buf, d_idx = d_at(didx or [i32(0)])
    val = tirx.BufferLoad(s_buf, s_idx)
    val = tirx.Cast(dtype, val) if str(src.buffer.dtype) != dtype else val
    val = tirx.abs(val) if kind in ("abssum", "absmax") else val
    a0 = tirx.BufferLoad(acc, [i32(0)])
    result = a0 if clear else combine(tirx.BufferLoad(d_buf, d_idx), a0)
    # start from the row's first element: no identity needed (bfloat16 has no TIR infinity)
    body = seq([tirx.AllocBuffer(acc), tirx.BufferStore(acc, substitute(val, {k: i32(0)}), [i32(0)]),
                tirx.For(k, i32(1), i32(shape[dim] - 1), tirx.ForKind.SERIAL,
                         tirx.BufferStore(acc, combine(a0, val), [i32(0)])) if shape[dim] > 1 else None,
                tirx.BufferStore(d_buf, result, d_idx)])
    body = tirx.IfThenElse(tirx.LT(row, i32(rows)), body, None) if rows % T else body
    stmts += [sync, body if rounds == 1 else tirx.For(r0, i32(0), i32(rounds), tirx.ForKind.SERIAL, body), sync]
    if scope_of(dst.buffer) == FRAGMENT_SCOPE:
        stmts.append(_fragment_io(lw, dst.buffer, dshape, d_at, load=True))
    return seq(stmts)


def _split_thread_axes(axes):
    """Split reduced thread axes into the part inside a warp (XOR butterfly) and the part across
    warps (shared memory). Returns ([(stride, extent)], [(stride, extent)])."""
    in_warp, cross = [], []
    for a in axes:
        s, e = a.stride, a.extent
        inner = min(e, max(32 // s, 1)) if s < 32 else 1
        if inner > 1 and (inner & (inner - 1)) == 0 and e % inner == 0:
            in_warp.append((s, inner))
            if e // inner > 1:
                cross.append((s * inner, e // inner))
        else:
            cross.append((s, e))
    return in_warp, cross


def _for(var, n, body):
    """``for var in range(n): body`` with a fresh loop variable (TIR loop variables are unique)."""
    if n == 1:
        return substitute_stmt(body, {var: i32(0)})
    fresh = tirx.Var(var.name, "int32")
    return tirx.For(fresh, i32(0), i32(n), tirx.ForKind.SERIAL, substitute_stmt(body, {var: fresh}),
                    annotations={"pragma_unroll": True})


def _cross_warp(lw, acc, n_out, axes, combine, dtype, name):
    """Combine partial results across warps through a shared-memory workspace."""
    T = lw.T
    scratch = lw.scratch(f"{name}_red_ws", T * n_out, dtype)
    u = tirx.Var("u", "int32")
    sync = thread_sync.sync_stmt(lw)
    out = [sync, _for(u, n_out, tirx.BufferStore(scratch, tirx.BufferLoad(acc, [u]), [u * T + lw.tid])), sync]
    # For every combination of the cross-warp digits, read the partner's partial.
    combos = math.prod(e for _, e in axes)
    c = tirx.Var("c", "int32")
    base = lw.tid
    for stride, extent in axes:
        base = base - _digit(lw.tid, stride, extent) * stride
    partner, rs = base, 1
    for stride, extent in axes:
        partner = partner + _digit(c, rs, extent) * stride
        rs *= extent
    total = tirx.decl_buffer((n_out,), dtype, f"{name}_red_all", scope="local")
    first = tirx.BufferLoad(scratch, [u * T + simplify(_subst(partner, c, 0))])
    body = seq([
        tirx.BufferStore(total, first, [u]),
        tirx.For(c, i32(1), i32(combos - 1), tirx.ForKind.SERIAL,
                 tirx.BufferStore(total, combine(tirx.BufferLoad(total, [u]),
                                                 tirx.BufferLoad(scratch, [u * T + simplify(partner)])), [u]),
                 annotations={"pragma_unroll": True}) if combos > 1 else None,
        tirx.BufferStore(acc, tirx.BufferLoad(total, [u]), [u]),
    ])
    out += [tirx.AllocBuffer(total), _for(u, n_out, body)]
    return out


def _subst(expr, var, value):
    return substitute(expr, {var: i32(value)})


def lower_cumsum(lw, stmt):
    """Inclusive scan along ``dim``: rows spread over threads, each row scanned serially in
    shared memory. Fragment operands are staged through a shared workspace (each thread writes
    the elements it holds, then reads back the ones it holds)."""
    args = stmt.value.args
    src, dst = decode_region(args[0]), decode_region(args[1])
    dim, reverse = int(args[2].value), bool(int(args[3].value))
    kind = str(args[4].value) if len(args) > 4 else "sum"   # T.cummax passes "max"
    for r in (src, dst):
        if scope_of(r.buffer) not in SHARED_SCOPES + (FRAGMENT_SCOPE,) or not r.is_whole():
            raise LoweringError("TL0002", "T.cumsum works on whole shared-memory buffers or fragments", stmt.span)
    shape = [const_int(x) for x in src.buffer.shape]
    if dim < 0:
        dim += len(shape)
    sync = thread_sync.sync_stmt(lw)
    stmts = [sync]
    s_at = _scan_operand(lw, src, shape, "src", stmts)
    d_at = _scan_operand(lw, dst, shape, "dst", [])
    stmts += [sync, _scan(lw, shape, dim, reverse, s_at, d_at, str(src.buffer.dtype), str(dst.buffer.dtype), kind),
              sync]
    if scope_of(dst.buffer) == FRAGMENT_SCOPE:
        stmts.append(_fragment_io(lw, dst.buffer, shape, d_at, load=True))
    return seq(stmts)


def _scan_operand(lw, region, shape, role, stmts):
    """An accessor ``at(indices) -> (buffer, [flat index])`` over shared memory for one operand;
    a fragment gets a scratch buffer (filled by ``stmts`` for the source)."""
    buf = region.buffer
    if scope_of(buf) in SHARED_SCOPES:
        return lambda idx: (lw.smem_views[buf], [lw.shared_offset(buf, idx)])
    scratch = lw.scratch(f"{buf.name}_scan_{role}", math.prod(shape), str(buf.dtype))
    at = lambda idx: (scratch, [sum((e * math.prod(shape[d + 1:]) for d, e in enumerate(idx)), i32(0))])  # noqa: E731
    if role == "src":
        stmts.append(_fragment_io(lw, buf, shape, at, load=False))
    return at


def _fragment_io(lw, buf, shape, at, load):
    layout = lw.layouts.fragments[buf]
    v = tirx.Var("v", "int32")
    target, idx = at(layout.index(lw.tid, v))
    if load:
        body = tirx.BufferStore(lw.frag[buf], tirx.BufferLoad(target, idx), [v])
    else:
        body = tirx.BufferStore(target, tirx.BufferLoad(lw.frag[buf], [v]), idx)
    return tirx.For(v, i32(0), i32(max(layout.local_size, 1)), tirx.ForKind.SERIAL, body,
                    annotations={"pragma_unroll": True})


def _scan(lw, shape, dim, reverse, s_at, d_at, s_dtype, d_dtype, kind="sum"):
    other = [d for d in range(len(shape)) if d != dim]
    rows = math.prod(shape[d] for d in other) if other else 1
    n = shape[dim]
    rounds = -(-rows // lw.T)
    r0, k = tirx.Var("r0", "int32"), tirx.Var("k", "int32")
    row = r0 * lw.T + lw.tid if rounds > 1 else lw.tid
    acc = tirx.decl_buffer((1,), d_dtype, "cumsum_acc", scope="local")
    idx, rest = [i32(0)] * len(shape), row
    for d in reversed(other):
        idx[d] = tirx.floormod(rest, i32(shape[d]))
        rest = tirx.floordiv(rest, i32(shape[d]))
    idx[dim] = (n - 1 - k) if reverse else k
    s_buf, s_idx = s_at(idx)
    d_buf, d_idx = d_at(idx)
    val = tirx.BufferLoad(s_buf, s_idx)
    if s_dtype != d_dtype:
        val = tirx.Cast(d_dtype, val)
    _, combine = _OPS[kind]
    body = seq([tirx.BufferStore(acc, combine(tirx.BufferLoad(acc, [i32(0)]), val), [i32(0)]),
                tirx.BufferStore(d_buf, tirx.BufferLoad(acc, [i32(0)]), d_idx)])
    scan = seq([tirx.AllocBuffer(acc), tirx.BufferStore(acc, _init(kind, d_dtype), [i32(0)]),
                tirx.For(k, i32(0), i32(n), tirx.ForKind.SERIAL, body)])
    guarded = tirx.IfThenElse(tirx.LT(row, i32(rows)), scan, None) if rows % lw.T else scan
    if rounds == 1:
        return guarded
    return tirx.For(r0, i32(0), i32(rounds), tirx.ForKind.SERIAL, guarded)
