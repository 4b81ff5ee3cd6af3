"""Lowering of ``T.copy``, ``T.fill`` and tile-level atomics.

Memory-to-memory copies (global/shared in any direction) are spread over the block's threads in
16-byte vectors where alignment allows (``cp.async`` for global->shared, zero-filling elements
outside the tensor); copies from or to a fragment follow the fragment's layout, each thread moving
the elements it holds. On sm_90a, a slab-swizzled shared tile copied to a global tensor whose box
TMA can address becomes TMA stores (``_tma_store``). Out-of-bounds guards are emitted only when
the analyzer cannot prove the tile fits.
"""

from __future__ import annotations

import math

from tvm import tirx

from tilelang.language.dtypes import nbytes
from tilelang.layout import CustomSharedLayout
from tilelang.tir_utils import const_int, dtype_of, evaluate_extern, i32, seq, simplify, substitute_stmt
from tilelang.transform import tma
from tilelang.transform.kernel import (FRAGMENT_SCOPE, SHARED_SCOPES, LoweringError, Region,
                                       decode_region, scope_of)


def _match(lw, src: Region, dst: Region, span):
    """Pair the non-unit dimensions of both regions; returns the common tile extents."""
    sd, se = src.nonunit()
    dd, de = dst.nonunit()
    se_c = [const_int(lw.rewrite(e)) for e in se]
    de_c = [const_int(lw.rewrite(e)) for e in de]
    if None in se_c or None in de_c:
        raise LoweringError("TL0601", "T.copy extents must be compile-time constants", span)
    if se_c != de_c:
        raise LoweringError("TL0601", f"T.copy extent mismatch: source {src.buffer.name} {se_c} vs "
                            f"destination {dst.buffer.name} {de_c} (dimensions of extent 1 are ignored; "
                            f"the others must match in order)", span)
    return sd, dd, se_c


def _indices(region: Region, dims, pos, lw):
    """Full index list of ``region`` at tile position ``pos`` (one entry per non-unit dim)."""
    idx = [lw.rewrite(s) for s in region.starts]
    for d, p in zip(dims, pos):
        idx[d] = idx[d] + p
    return [simplify(i) for i in idx]


def _in_bounds(lw, region: Region, idx, dims, span_vec=1):
    """Condition that ``idx`` lies inside a global tensor (None when provably always true)."""
    if scope_of(region.buffer) != "global":
        return None
    conds = []
    for d in dims:
        shape = region.buffer.shape[d]
        if not lw.prove(tirx.LT(idx[d], shape)):
            conds.append(tirx.LT(idx[d], shape))
    if not conds:
        return None
    out = conds[0]
    for c in conds[1:]:
        out = tirx.And(out, c)
    return out


def _vector_width(lw, src, dst, sd, dd, tile):
    """Elements per thread-vector: 16 bytes if every alignment condition holds."""
    esize = max(nbytes(src.dtype), nbytes(dst.dtype))
    if src.dtype != dst.dtype:
        return 1
    vec = max(1, 16 // esize)
    inner = tile[-1]
    for region, dims in ((src, sd), (dst, dd)):
        if not dims or _custom_layout(lw, region):
            return 1
        d = dims[-1]
        if d != len(region.buffer.shape) - 1:
            return 1
        start = lw.rewrite(region.starts[d])
        while vec > 1:
            ok = inner % vec == 0
            if scope_of(region.buffer) == "global":
                strides = _strides(region.buffer)
                row = const_int(region.buffer.shape[-1])
                ok = ok and row is not None and row % vec == 0 and strides[-1] == 1
                ok = ok and all(st is not None and st % vec == 0 for st in strides[:-1])
            ms = lw.an.modular_set(start)
            ok = ok and ms.coeff % vec == 0 and ms.base % vec == 0
            if ok:
                break
            vec //= 2
    return vec


def _custom_layout(lw, region) -> bool:
    """A user layout gives no guarantee that a run of columns stays contiguous and aligned."""
    return isinstance(lw.layouts.shared.get(region.buffer), CustomSharedLayout)


def _strides(buffer):
    """Element strides of a buffer (declared ones for T.StridedTensor, else row-major)."""
    if buffer.strides:
        return [const_int(s) for s in buffer.strides]
    shape = [const_int(s) for s in buffer.shape]
    out, s = [], 1
    for e in reversed(shape):
        out.append(s if s is not None else None)
        s = s * e if (s is not None and e is not None) else None
    return list(reversed(out))


def _ptr(lw, region, idx):
    if scope_of(region.buffer) in SHARED_SCOPES:
        return lw.shared_ptr(region.buffer, idx)
    return tirx.address_of(_load_raw(lw, region, idx))


def lower_copy(lw, stmt):
    args = stmt.value.args
    src, dst = decode_region(args[0]), decode_region(args[1])
    s_scope, d_scope = scope_of(src.buffer), scope_of(dst.buffer)
    if s_scope == FRAGMENT_SCOPE or d_scope == FRAGMENT_SCOPE:
        return _copy_fragment(lw, src, dst, stmt)
    sd, dd, tile = _match(lw, src, dst, stmt.span)
    store = _tma_store(lw, src, dst, stmt)
    if store is not None:
        return store
    vec = _vector_width(lw, src, dst, sd, dd, tile)
    use_async = (s_scope == "global" and d_scope in SHARED_SCOPES and vec * nbytes(src.dtype) >= 4
                 and not lw.configs.get("tl.disable_async_copy", False))
    body = _threaded_copy(lw, src, dst, sd, dd, tile, vec, use_async, stmt.span)
    if use_async and not lw.in_producer:
        body = seq([body, evaluate_extern("tl::cp_async_commit"), evaluate_extern("tl::cp_async_wait<0>")])
    return body


def _tma_store(lw, src, dst, stmt):
    """A shared tile in the 128-byte-swizzled slab layout (an epilogue staging buffer of an sm_90a
    wgmma kernel) written to a global tensor as TMA box stores, one per slab, issued by thread 0,
    or None (the threaded copy). The statements before it (``thread_sync``) end with
    ``fence.proxy.async`` and a barrier, so the whole tile is visible to the TMA unit; thread 0
    waits until the stores have read shared memory (``tma_store_wait<0>``) before it goes on, so
    the barrier that precedes any later write of the tile also covers the stores' reads. Parts of
    the box outside the tensor are not written (TMA clips them)."""
    args = stmt.value.args
    if (not lw.layouts.wgmma or lw.configs.get("tl.disable_tma_lower") or scope_of(dst.buffer) != "global"
            or scope_of(src.buffer) not in SHARED_SCOPES or src.buffer in lw.stage
            or (len(args) > 3 and const_int(args[3]) == 1)):       # T.copy(..., disable_tma=True)
        return None
    if any(const_int(lw.rewrite(x)) != 0 for x in src.starts):
        return None     # part of the staging tile
    spec = tma.tma_box_spec(lw, dst, src, len(lw.tensormaps))
    if isinstance(spec, str):
        return None
    j = len(lw.tensormaps)
    lw.tensormaps.append(spec)
    layout = lw.layouts.shared[src.buffer]
    rows, cols = (const_int(x) for x in src.buffer.shape)
    width = layout.slab_width
    coords = [lw.rewrite(x) for x in dst.starts[::-1]]           # innermost first
    view = lw.smem_views[src.buffer]
    stores = [evaluate_extern(f"tl::tma_store_{len(coords)}d", tma.tmap(j),
                              tirx.address_of(tirx.BufferLoad(view, [i32(s * rows * width)])),
                              coords[0] + s * width, *coords[1:], span=stmt.span)
              for s in range(cols // width)]
    stores += [evaluate_extern("tl::tma_store_arrive"), evaluate_extern("tl::tma_store_wait<0>")]
    return tirx.IfThenElse(tirx.EQ(lw.tid, i32(0)), seq(stores), None, span=stmt.span)


def _threaded_copy(lw, src, dst, sd, dd, tile, vec, use_async, span):
    """Each thread moves vectors q = it * T + tid of the tile (row-major order)."""
    inner_vecs = tile[-1] // vec
    total = math.prod(tile) // vec
    iters = -(-total // lw.T)
    it = tirx.Var("it", "int32")
    q = it * lw.T + lw.tid if iters > 1 else lw.tid
    pos, rest = [], q
    for k in reversed(range(len(tile))):
        ext = inner_vecs if k == len(tile) - 1 else tile[k]
        digit = tirx.floormod(rest, i32(ext))
        pos.append(digit * vec if k == len(tile) - 1 else digit)
        rest = tirx.floordiv(rest, i32(ext))
    pos = [simplify(p) for p in reversed(pos)]
    s_idx, d_idx = _indices(src, sd, pos, lw), _indices(dst, dd, pos, lw)
    guard = None
    for region, idx, dims in ((src, s_idx, sd), (dst, d_idx, dd)):
        g = _in_bounds(lw, region, idx, dims)
        guard = g if guard is None else (tirx.And(guard, g) if g is not None else guard)
    if total % lw.T:
        tail = tirx.LT(q, i32(total))
        guard = tail if guard is None else tirx.And(tail, guard)
    nbytes_vec = vec * nbytes(src.dtype)
    s_ptr, d_ptr = _ptr(lw, src, s_idx), _ptr(lw, dst, d_idx)
    if use_async:
        if guard is None:
            one = evaluate_extern(f"tl::cp_async_gs<{nbytes_vec}>", d_ptr, s_ptr, span=span)
        else:
            src_guard = _in_bounds(lw, src, s_idx, sd)
            if src_guard is None:
                one = evaluate_extern(f"tl::cp_async_gs<{nbytes_vec}>", d_ptr, s_ptr, span=span)
            else:
                one = evaluate_extern(f"tl::cp_async_gs_conditional<{nbytes_vec}>", d_ptr, s_ptr, src_guard, span=span)
            if total % lw.T:
                one = tirx.IfThenElse(tirx.LT(q, i32(total)), one, None)
    else:
        if vec == 1:
            # s_idx is already rewritten: map storage only (substituting again would shift a
            # pipelined loop variable twice).
            value = _load_raw(lw, src, s_idx)
            if src.dtype != dst.dtype:
                value = tirx.Cast(dst.dtype, value)
            one = _store_raw(lw, dst, d_idx, value, span)
        else:
            one = evaluate_extern(f"tl::copy_vec<{nbytes_vec}>", d_ptr, s_ptr, span=span)
        if guard is not None:
            src_guard = _in_bounds(lw, src, s_idx, sd)
            if scope_of(dst.buffer) in SHARED_SCOPES and src_guard is not None:
                zero = _zero_fill(lw, dst, d_idx, vec, span)
                one = tirx.IfThenElse(guard, one, zero)
            else:
                one = tirx.IfThenElse(guard, one, None)
    if iters == 1:
        return one
    return tirx.For(it, i32(0), i32(iters), tirx.ForKind.SERIAL, one, annotations={"pragma_unroll": True}, span=span)


def _store_raw(lw, region, idx, value, span):
    """Store to ``region.buffer[idx]`` (idx already rewritten), through its lowered storage."""
    buf, flat = lw.element(region.buffer, idx)
    return tirx.BufferStore(buf, value, flat, span=span)


def _load_raw(lw, region, idx):
    buf, flat = lw.element(region.buffer, idx)
    return tirx.BufferLoad(buf, flat)


def _zero_fill(lw, region, idx, vec, span):
    if vec == 1:
        return _store_raw(lw, region, idx, tirx.const(0, region.dtype), span)
    return evaluate_extern(f"tl::zero_vec<{vec * nbytes(region.dtype)}>", _ptr(lw, region, idx), span=span)


def _fragment_vector(lw, layout, frag_side, other, fd, od, tile):
    """Registers moved per vector access: the run of consecutive columns a thread holds,
    capped at 16 bytes and by the alignment of the memory side."""
    if scope_of(other.buffer) == FRAGMENT_SCOPE or not fd or not od or _custom_layout(lw, other):
        return 1
    if fd[-1] != len(frag_side.buffer.shape) - 1 or od[-1] != len(other.buffer.shape) - 1:
        return 1
    axis = [a for a in layout.local_axes if a.stride == 1 and a.dim == fd[-1] and a.coef == 1]
    if not axis:
        return 1
    vec = axis[0].extent
    vec = vec & -vec
    vec = min(vec, max(1, 16 // nbytes(other.dtype)))
    start = lw.rewrite(other.starts[od[-1]])
    fstart = frag_side.starts[fd[-1]]
    while vec > 1:
        ok = tile[-1] % vec == 0 and const_int(fstart) is not None and const_int(fstart) % vec == 0
        ms = lw.an.modular_set(start)
        ok = ok and ms.coeff % vec == 0 and ms.base % vec == 0
        if scope_of(other.buffer) == "global":
            strides = _strides(other.buffer)
            row = const_int(other.buffer.shape[-1])
            ok = ok and row is not None and row % vec == 0 and strides[-1] == 1
            ok = ok and all(st is not None and st % vec == 0 for st in strides[:-1])
        if ok:
            return vec
        vec //= 2
    return 1


def _copy_fragment(lw, src, dst, stmt):
    """Each thread moves the fragment elements it holds, in vectors of consecutive columns."""
    packed = _packed_cast(lw, src, dst, stmt)
    if packed is not None:
        return packed
    frag_side = src if scope_of(src.buffer) == FRAGMENT_SCOPE else dst
    other = dst if frag_side is src else src
    layout = lw.layouts.fragments[frag_side.buffer]
    sd, dd, tile = _match(lw, src, dst, stmt.span)
    fd, od = (sd, dd) if frag_side is src else (dd, sd)
    n = max(layout.local_size, 1)
    vec = _fragment_vector(lw, layout, frag_side, other, fd, od, tile)
    w, lane = tirx.Var("w", "int32"), tirx.Var("l", "int32")
    lw.bind_loop(w, n // vec)
    base = w * vec if vec > 1 else w
    elem = layout.index(lw.tid, base)
    pos = [elem[d] for d in fd]
    lane_pos = list(pos)
    if vec > 1:
        lane_pos[-1] = lane_pos[-1] + lane
    f_idx = _indices(frag_side, fd, lane_pos, lw) if fd else [i32(0)] * len(frag_side.buffer.shape)
    o_idx = _indices(other, od, lane_pos, lw)
    o_idx0 = _indices(other, od, pos, lw)
    f_buf = lw.frag[frag_side.buffer]
    f_flat = [base + lane if vec > 1 else base] if frag_side.is_whole() else [
        lw.an.simplify(layout.local_of(f_idx))]
    guard = _in_bounds(lw, other, o_idx0, od)
    if frag_side is src:
        value = tirx.BufferLoad(f_buf, f_flat)
        if src.dtype != dst.dtype:
            value = tirx.Cast(dst.dtype, value)
        if scope_of(other.buffer) == FRAGMENT_SCOPE:
            o_layout = lw.layouts.fragments[other.buffer]
            body = tirx.BufferStore(lw.frag[other.buffer], value, [lw.an.simplify(o_layout.local_of(o_idx))],
                                    span=stmt.span)
        else:
            body = _store_raw(lw, other, o_idx, value, stmt.span)
            if layout.replication > 1:
                rep = tirx.EQ(layout.replica_index(lw.tid), i32(0))
                guard = rep if guard is None else tirx.And(rep, guard)
        body = _lanes(lane, vec, body)
        if guard is not None:
            body = tirx.IfThenElse(guard, body, None)
    else:
        if scope_of(other.buffer) == FRAGMENT_SCOPE:
            o_layout = lw.layouts.fragments[other.buffer]
            value = tirx.BufferLoad(lw.frag[other.buffer], [lw.an.simplify(o_layout.local_of(o_idx))])
        else:
            buf, flat = lw.element(other.buffer, o_idx)
            value = tirx.BufferLoad(buf, flat)
        if src.dtype != dst.dtype:
            value = tirx.Cast(dst.dtype, value)
        body = _lanes(lane, vec, tirx.BufferStore(f_buf, value, f_flat, span=stmt.span))
        if guard is not None:
            # A serial loop: TVM's codegen mis-prints wide float broadcasts (make_ulonglong4 of 8).
            zero = _lanes(lane, vec, tirx.BufferStore(f_buf, tirx.const(0, dst.dtype), f_flat), serial=True)
            body = tirx.IfThenElse(guard, body, zero)
    if n // vec == 1:
        return substitute_stmt(body, {w: i32(0)})
    return tirx.For(w, i32(0), i32(n // vec), tirx.ForKind.SERIAL, body, annotations={"pragma_unroll": True},
                    span=stmt.span)


def _packed_cast(lw, src, dst, stmt):
    """A whole 32-bit fragment cast into a whole 16-bit fragment of the same layout (attention's
    ``T.copy(acc_s, acc_s_cast)``), two registers at a time: nvcc then keeps the result packed in
    32-bit registers (one F2FP per pair) even when it lives across a loop iteration, as the P
    operand of an asynchronous register-A wgmma does; else None."""
    if scope_of(src.buffer) != FRAGMENT_SCOPE or scope_of(dst.buffer) != FRAGMENT_SCOPE:
        return None
    if not (src.is_whole() and dst.is_whole()) or nbytes(src.dtype) != 4 or nbytes(dst.dtype) != 2:
        return None
    layout, o_layout = lw.layouts.fragments[src.buffer], lw.layouts.fragments[dst.buffer]
    n = layout.local_size
    if n < 2 or n % 2 or not layout.same_as(o_layout):
        return None
    w, lane = tirx.Var("w", "int32"), tirx.Var("l", "int32")
    i = w * 2 + lane
    body = tirx.BufferStore(lw.frag[dst.buffer], tirx.Cast(dst.dtype, tirx.BufferLoad(lw.frag[src.buffer], [i])),
                            [i], span=stmt.span)
    return tirx.For(w, i32(0), i32(n // 2), tirx.ForKind.SERIAL, _lanes(lane, 2, body),
                    annotations={"pragma_unroll": True}, span=stmt.span)


def _lanes(lane, vec, body, serial=False):
    """``for lane in vectorized(vec): body`` with a fresh loop variable."""
    if vec == 1:
        return substitute_stmt(body, {lane: i32(0)})
    fresh = tirx.Var(lane.name, "int32")
    kind = tirx.ForKind.UNROLLED if serial else tirx.ForKind.VECTORIZED
    return tirx.For(fresh, i32(0), i32(vec), kind, substitute_stmt(body, {lane: fresh}))


def lower_fill(lw, stmt):
    region = decode_region(stmt.value.args[0])
    value = lw.rewrite(stmt.value.args[1])
    dtype = region.dtype
    if not (hasattr(value, "ty") and dtype_of(value) == dtype):
        value = tirx.Cast(dtype, value) if hasattr(value, "ty") else tirx.const(value, dtype)
    scope = scope_of(region.buffer)
    if scope == FRAGMENT_SCOPE:
        layout = lw.layouts.fragments[region.buffer]
        if not region.is_whole():
            raise LoweringError("TL0002", "T.fill of part of a fragment is not supported yet", stmt.span)
        v = tirx.Var("v", "int32")
        n = max(layout.local_size, 1)
        return tirx.For(v, i32(0), i32(n), tirx.ForKind.SERIAL,
                        tirx.BufferStore(lw.frag[region.buffer], value, [v], span=stmt.span),
                        annotations={"pragma_unroll": True}, span=stmt.span)
    if scope == "local":
        n = math.prod(const_int(e) for e in region.extents)
        v = tirx.Var("v", "int32")
        flat_start = [lw.rewrite(s) for s in region.starts]
        body = tirx.BufferStore(region.buffer, value, [flat_start[0] + v] + flat_start[1:], span=stmt.span)
        return tirx.For(v, i32(0), i32(n), tirx.ForKind.SERIAL, body, annotations={"pragma_unroll": True})
    dims, ext = region.nonunit()
    tile = [const_int(lw.rewrite(e)) for e in ext]
    total = math.prod(tile)
    iters = -(-total // lw.T)
    it = tirx.Var("it", "int32")
    q = it * lw.T + lw.tid if iters > 1 else lw.tid
    pos, rest = [], q
    for k in reversed(range(len(tile))):
        pos.append(tirx.floormod(rest, i32(tile[k])))
        rest = tirx.floordiv(rest, i32(tile[k]))
    idx = _indices(region, dims, [simplify(p) for p in reversed(pos)], lw)
    one = _store_raw(lw, region, idx, value, stmt.span)
    guard = _in_bounds(lw, region, idx, dims)
    if total % lw.T:
        tail = tirx.LT(q, i32(total))
        guard = tail if guard is None else tirx.And(tail, guard)
    if guard is not None:
        one = tirx.IfThenElse(guard, one, None)
    if iters == 1:
        return one
    return tirx.For(it, i32(0), i32(iters), tirx.ForKind.SERIAL, one, annotations={"pragma_unroll": True})


def lower_atomic(lw, stmt):
    args = stmt.value.args
    dst, src = decode_region(args[0]), decode_region(args[1])
    kind = str(args[2].value)
    if scope_of(src.buffer) != FRAGMENT_SCOPE:
        raise LoweringError("TL0002", "tile-level T.atomic_* needs a fragment source", stmt.span)
    layout = lw.layouts.fragments[src.buffer]
    sd, dd, tile = _match(lw, src, dst, stmt.span)
    v = tirx.Var("v", "int32")
    lw.bind_loop(v, max(layout.local_size, 1))
    elem = layout.index(lw.tid, v)
    pos = [elem[d] for d in sd]
    d_idx = _indices(dst, dd, pos, lw)
    value = tirx.BufferLoad(lw.frag[src.buffer], [lw.an.simplify(layout.local_of(_indices(src, sd, pos, lw)))])
    if src.dtype != dst.dtype:
        value = tirx.Cast(dst.dtype, value)
    body = evaluate_extern(f"tl::atomic_{kind}", _ptr(lw, dst, d_idx), value, span=stmt.span)
    guard = _in_bounds(lw, dst, d_idx, dd)
    if layout.replication > 1:
        rep = tirx.EQ(layout.replica_index(lw.tid), i32(0))
        guard = rep if guard is None else tirx.And(rep, guard)
    if guard is not None:
        body = tirx.IfThenElse(guard, body, None)
    n = max(layout.local_size, 1)
    return tirx.For(v, i32(0), i32(n), tirx.ForKind.SERIAL, body, annotations={"pragma_unroll": True})
