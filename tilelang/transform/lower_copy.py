"""Lowering of ``T.copy``, ``T.fill`` and tile-level atomics.

Memory-to-memory copies (global/shared in any direction) are spread over the block's threads in
16-byte vectors where alignment allows (``cp.async`` for global->shared, zero-filling elements
outside the tensor); copies from or to a fragment follow the fragment's layout, each thread moving
the elements it holds. On sm_90a, a slab-swizzled shared tile copied to a global tensor whose box
TMA can address becomes TMA stores (``_tma_store``). On sm_90+, as upstream chooses, a whole
linear shared tile stored to a global tensor goes through the TMA unit (``_bulk_store``: one 1-D
bulk copy for a contiguous in-bounds run, a tensor-map box otherwise), by default
(``disable_tma=True`` or ``prefer_instruction="sync"`` keep the threaded copy); loads under
``prefer_instruction="tma"`` likewise (``_tma_load``, completing on an mbarrier of their own).
The T.copy call's fourth argument is the TMA flag: 0 default, 1 ``disable_tma``, 2 prefer TMA,
3 ``T.async_copy`` (global -> shared by cp.async only, committed and not waited for).
Out-of-bounds guards are emitted only when
the analyzer cannot prove the tile fits; an element read outside its global tensor gives the
tensor's ``T.annotate_safe_value`` (0 by default) wherever the destination exists.
"""

from __future__ import annotations

import functools
import math

import tvm
from tvm import tirx

from tilelang import targets
from tilelang.language.dtypes import bits, nbytes
from tilelang.layout import CustomSharedLayout
from tilelang.layout.swizzle import SharedLayout
from tilelang.tir_utils import const_int, dtype_of, evaluate_extern, flat_index, i32, seq, simplify, substitute_stmt
from tilelang.transform import tma
from tilelang.transform.kernel import (FRAGMENT_SCOPE, SHARED_SCOPES, LoweringError, Region, copy_base_extents,
                                       decode_region, safe_value, scope_of)
from tilelang.transform.pass_config import PassConfigKey

LOCAL_SCOPE = "local"   # T.alloc_local: one private copy per thread
# A global->shared T.copy outside a pipelined loop is plain loads and stores while the registers
# they stage its bytes in (plus, inside a loop, the kernel's fragment registers) stay within this
# many per thread (half the 255 a thread may have); beyond it, cp.async (committed and waited
# for on the spot: ``_stages_too_much``).
COPY_STAGING_BUDGET = 128


# opt-in: stmatrix for accumulators written to 16-bit shared tiles (not faster on the H200, session 34)
STMATRIX_KEY = PassConfigKey.TL_ENABLE_STMATRIX.value


def _match(lw, src: Region, dst: Region, span, what="T.copy"):
    """Pair the non-unit dimensions of both regions; returns the common tile extents (``what``:
    the tile op named in errors)."""
    sd, se = src.nonunit()
    dd, de = dst.nonunit()
    if not sd and not de and not dd and not se:   # one element to one element: a 1-long tile
        sd, se = [len(src.starts) - 1], [1]
        dd, de = [len(dst.starts) - 1], [1]
    se_c = [const_int(lw.static(e)) for e in se]
    de_c = [const_int(lw.static(e)) for e in de]
    if None in se_c or None in de_c:
        raise LoweringError("TL0601", f"{what} extents must be compile-time constants", span)
    if se_c != de_c:
        tile = copy_base_extents(src, dst, se_c, de_c) if what == "T.copy" else None
        if tile is None:
            raise LoweringError("TL0601", f"{what} extent mismatch: source {src.buffer.name} {se_c} vs "
                                f"destination {dst.buffer.name} {de_c} (dimensions of extent 1 are ignored; "
                                f"the others must match in order)", span)
        return sd, dd, tile
    return sd, dd, se_c


def _static_region(lw, call) -> Region:
    """The region of a tile op's argument, each extent that is constant given the values in scope
    (``Lowerer.static``) that constant."""
    region = decode_region(call)
    extents = []
    for e in region.extents:
        c = const_int(lw.static(e))
        extents.append(e if c is None else tirx.const(c, dtype_of(e)))
    return Region(region.buffer, region.starts, extents, region.access)


def _bounded_tile(lw, src: Region, dst: Region):
    """For a copy whose extents are known only at run time: (src dims, dst dims, tile, limits), or
    None where the copy has constant extents or its extents cannot be paired (``_match`` then says
    why). Two cases, per dimension:

    - both extents the same run-time value (``T.copy(x[r0:r0 + n, :], s[0:n, :])``, TileOPs'
      ragged pooling): the tile at its compile-time bound (a shared or local side's room from its
      start, or what the analyzer bounds it by);
    - one a run-time value, the other a constant (``T.copy(cu_seqlens[:n - 1], frag)`` of a
      fixed-size fragment, TileOPs' prefill utils): the tile at the constant, as upstream sizes
      such a copy by its on-chip side.

    ``limits`` {tile dim: (run-time extent, fill)}: tile positions from that extent on move
    nothing; with ``fill`` (only the source's extent is at run time, the destination is on chip)
    they get what a read past the source gives (``T.annotate_safe_value``, else 0), as elements
    past a tensor's end do (upstream reads on to the tensor's end there)."""
    sd, se = src.nonunit()
    dd, de = dst.nonunit()
    se, de = [lw.static(e) for e in se], [lw.static(e) for e in de]
    if len(se) != len(de) or all(const_int(e) is not None for e in se + de):
        return None
    on_chip = scope_of(dst.buffer) != "global"
    tile, limits = [], {}
    for k, (a, b) in enumerate(zip(se, de)):
        ca, cb = const_int(a), const_int(b)
        if ca is not None and cb is not None:
            if ca != cb:
                return None
            tile.append(ca)
            continue
        if ca is not None or cb is not None:
            tile.append(ca if ca is not None else cb)
            limits[k] = (b, False) if ca is not None else (a, on_chip)
            continue
        if not lw.prove(tirx.EQ(a, b)):
            return None
        bounds = []
        top = lw.an.const_int_bound(a).max_value
        if top < 2**31 - 1:
            bounds.append(int(top))
        for region, d in ((src, sd[k]), (dst, dd[k])):
            start, size = const_int(lw.rewrite(region.starts[d])), const_int(region.buffer.shape[d])
            if scope_of(region.buffer) != "global" and start is not None and size is not None:
                bounds.append(size - start)
        if not bounds or min(bounds) <= 0:
            return None
        tile.append(min(bounds))
        limits[k] = (a, False)
    return sd, dd, tile, limits


def _limit_conds(limits, pos):
    """(skip, fill) conditions of ``_bounded_tile``'s limits at tile position ``pos`` (None: none)."""
    conds = {False: [], True: []}
    for k, (e, fill) in sorted(limits.items()):
        conds[fill].append(tirx.LT(pos[k], e))
    return tuple(functools.reduce(tirx.And, c) if c else None for c in (conds[False], conds[True]))


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
        if dtype_of(shape) != dtype_of(idx[d]):   # (an int64 start: offsets of a ragged batch)
            shape = tirx.Cast(dtype_of(idx[d]), shape)
        if not lw.prove(tirx.LT(idx[d], shape)):
            conds.append(tirx.LT(idx[d], shape))
    if not conds:
        return None
    out = conds[0]
    for c in conds[1:]:
        out = tirx.And(out, c)
    return out


# (source, destination) dtypes whose vectorized cast has a paired conversion on CUDA
# (tilelang.codegen.cuda._PAIR_CASTS)
PAIRED_CASTS = frozenset([
    ("float32", "float16"), ("float16", "float32"), ("float32", "bfloat16"), ("bfloat16", "float32"),
    *[(a, b) for f8 in ("float8_e4m3fn", "float8_e5m2") for w in ("float32", "float16")
      for a, b in ((w, f8), (f8, w))],
    ("float8_e8m0fnu", "bfloat16"), ("bfloat16", "float8_e8m0fnu"), ("float32", "float8_e8m0fnu"),
    ("float64", "float8_e8m0fnu"),
])


def _vector_width(lw, src, dst, sd, dd, tile):
    """Elements per thread-vector: 16 bytes if every alignment condition holds (counted in bits:
    a vector of a sub-byte type holds 8 / bits elements per byte)."""
    vec = max(1, 128 // max(bits(src.dtype), bits(dst.dtype)))
    if src.dtype != dst.dtype:
        # a converting copy: lanes of a vectorized cast (paired conversions in the CUDA source),
        # for the pairs that have one, through plainly laid out memory, at most 4 lanes
        if (str(src.dtype), str(dst.dtype)) not in PAIRED_CASTS:
            return 1
        if any(scope_of(r.buffer) in SHARED_SCOPES and not _linear(lw, r.buffer) for r in (src, dst)):
            return 1
        vec = min(vec, 4)
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
                ok = ok and all(_multiple_of(lw, st, vec) for st in _stride_exprs(region.buffer)[:-1])
            ok = ok and _starts_aligned(lw, region, start, vec)
            if ok:
                break
            vec //= 2
    return vec


def _starts_aligned(lw, region, start, vec) -> bool:
    """Whether a region whose inner start is ``start`` begins every row at a multiple of ``vec``
    elements (the start's residues, and a plain shared buffer's row strides)."""
    ms = lw.an.modular_set(start)
    return ms.coeff % vec == 0 and ms.base % vec == 0 and _shared_rows_aligned(lw, region, vec)


def _shared_rows_aligned(lw, region, vec) -> bool:
    """Whether every row of a plainly laid out shared region starts at a multiple of ``vec``
    elements: its row strides (a padded ``(32, 36)`` tile: 36) and the starts of its outer
    dimensions count, not only the column start. Swizzled and padded layouts place 16-byte
    chunks themselves (True); other scopes: True."""
    buf = region.buffer
    if scope_of(buf) not in SHARED_SCOPES or vec <= 1:
        return True
    layout = lw.layouts.shared.get(buf)
    if layout is not None and not _linear(lw, buf):
        return True
    strides = _strides(buf)
    if None in strides:
        return False
    flat = i32(0)
    for d, (st, e, stride) in enumerate(zip(region.starts, region.extents, strides)):
        if d == len(strides) - 1:
            continue        # (the column start is checked by the caller)
        term = lw.rewrite(st)
        if const_int(lw.rewrite(e)) != 1:
            term = term + tirx.Var(f"r{d}", "int32")     # any row of the region
        flat = flat + term * stride
    ms = lw.an.modular_set(simplify(flat))
    return ms.coeff % vec == 0 and ms.base % vec == 0


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


def _stride_exprs(buffer):
    """Element strides of a buffer as expressions: a row-major tensor's are products of its
    extents (``T * H * D`` of a ``(B, T, H, D)`` tensor with a symbolic ``T``); declared strides
    that are no constants are unknown (None)."""
    if buffer.strides:
        return [s if const_int(s) is not None else None for s in buffer.strides]
    out, s = [], i32(1)
    for e in reversed(list(buffer.shape)):
        out.append(s)
        s = s * e
    return list(reversed(out))


def _multiple_of(lw, expr, n) -> bool:
    """Whether ``expr`` (None: unknown) is provably a multiple of ``n`` for every value of its
    symbols."""
    if expr is None:
        return False
    ms = lw.an.modular_set(simplify(lw.rewrite(expr)))
    return ms.coeff % n == 0 and ms.base % n == 0


def _ptr(lw, region, idx):
    if scope_of(region.buffer) in SHARED_SCOPES:
        return lw.shared_ptr(region.buffer, idx)
    return tirx.address_of(_load_raw(lw, region, idx))


def lower_copy(lw, stmt):
    args = stmt.value.args
    src, dst = _static_region(lw, args[0]), _static_region(lw, args[1])
    s_scope, d_scope = scope_of(src.buffer), scope_of(dst.buffer)
    forced = len(args) > 3 and const_int(args[3]) == 3      # T.async_copy: cp.async, no wait
    if forced and (s_scope != "global" or d_scope not in SHARED_SCOPES):
        raise LoweringError("TL0002", f"T.async_copy only supports global->shared/shared.dyn copies, got "
                            f"{s_scope} -> {d_scope} ({src.buffer.name} -> {dst.buffer.name})", stmt.span)
    if s_scope == FRAGMENT_SCOPE or d_scope == FRAGMENT_SCOPE:
        return _copy_fragment(lw, src, dst, stmt)
    bounded = _bounded_tile(lw, src, dst)
    if bounded is not None:
        # extents known at run time: the tile at their bound, each element guarded (thread loads
        # and stores; vectors along a constant inner extent)
        sd, dd, tile, limits = bounded
        vec = 1 if len(tile) - 1 in limits else _vector_width(lw, src, dst, sd, dd, tile)
        per_thread = LOCAL_SCOPE in (s_scope, d_scope)
        return _threaded_copy(lw, src, dst, sd, dd, tile, vec, False, stmt.span, per_thread=per_thread,
                              limits=limits)
    sd, dd, tile = _match(lw, src, dst, stmt.span)
    if LOCAL_SCOPE in (s_scope, d_scope):
        # A T.alloc_local buffer belongs to each thread: every thread copies the whole tile itself.
        vec = _vector_width(lw, src, dst, sd, dd, tile)
        return _threaded_copy(lw, src, dst, sd, dd, tile, vec, False, stmt.span, per_thread=True)
    store = _tma_store(lw, src, dst, stmt)
    if store is None:
        store = _bulk_store(lw, src, dst, tile, stmt)
    if store is None:
        store = _tma_load(lw, src, dst, tile, stmt)
    if store is not None:
        return store
    if str(src.dtype) == "float4_e2m1fn" and "float4_e2m1_unpacked" in str(dst.dtype):
        # two fp4 values per byte in, one per byte out: only a TMA copy unpacks (in hardware)
        raise LoweringError("TL0002", f"SIMT copy from packed global float4_e2m1fn {src.buffer.name} to unpacked "
                            f"{dst.buffer.name} (float4_e2m1_unpacked) is not supported: a thread copy moves "
                            "bytes and cannot unpack two fp4 values per byte; copy a TMA-able tile or keep the "
                            "shared buffer packed (float4_e2m1fn)", stmt.span)
    vec = _vector_width(lw, src, dst, sd, dd, tile)
    # cp.async where something overlaps with it: T.async_copy, or a producer of a pipelined loop
    # (committed and waited for by the pipeline). A lone copy is plain vector loads and stores
    # (no commit/wait round trip, and thread_sync knows each thread's elements), as long as the
    # registers they stage the bytes in are to spare (``_stages_too_much``); otherwise it goes
    # through cp.async all the same, waited for before the first statement of its sequence that
    # touches the tile (thread_sync._place_waits), or at once where that sequence has cp.async
    # groups of its own.
    vec_bytes = _vec_bytes(vec, src.dtype)
    use_async = (s_scope == "global" and d_scope in SHARED_SCOPES and vec_bytes >= 4
                 and src.dtype == dst.dtype
                 and (forced or ((lw.in_producer or _stages_too_much(lw, tile, vec, vec_bytes))
                                 and not lw.configs.get("tl.disable_async_copy", False))))
    if forced and not use_async:
        raise LoweringError("TL0002", f"T.async_copy {src.buffer.name} -> {dst.buffer.name}: cp.async needs runs of "
                            f"at least 4 contiguous bytes of one dtype (here {vec} x {src.dtype} -> {dst.dtype})",
                            stmt.span)
    body = _threaded_copy(lw, src, dst, sd, dd, tile, vec, use_async, stmt.span)
    if not use_async:
        # thread_sync.thread_elements: which thread moves which shared element
        lw.__dict__.setdefault("sync_copies", {})[stmt] = (src, dst, sd, dd, tile, vec, lw.T, lw.tid)
    if use_async and not lw.in_producer:
        deferred = not forced and getattr(lw, "defer_copy", None) is not None and lw.defer_copy.same_as(stmt)
        if deferred:    # its sequence waits before the tile's first reader (thread_sync._place_waits)
            lw.deferred_dst = dst.buffer
        wait = [] if forced or deferred else [evaluate_extern("tl::cp_async_wait<0>")]
        body = seq([body, evaluate_extern("tl::cp_async_commit")] + wait)
    return body


def _fragment_registers(lw) -> int:
    """32-bit registers per thread that the kernel's fragments take (their local arrays)."""
    regs = 0
    for local in getattr(lw, "frag", {}).values():
        n = const_int(local.shape[0])
        regs += -(-(n if n is not None else 1 << 16) * nbytes(str(local.dtype)) // 4)
    return regs


def _stages_too_much(lw, tile, vec, vec_bytes) -> bool:
    """A plain (synchronous) copy would stage more registers than the kernel has to spare: its
    bytes per thread (all loads in flight before the first store), plus the fragments' registers
    when the copy sits in a loop of more than one iteration (where the accumulators are live), exceed
    ``COPY_STAGING_BUDGET``. ptxas then spills around the copy or keeps only a few loads in
    flight, and it cannot start them under earlier work as it does cp.async, which stages nothing
    (H200: one-stage 128x128 attention, 340 fragment registers, 9.30 -> 10.02 ms with plain K / V
    copies; NSA, 32 vectors a thread, 1.56 -> 2.32 ms). In a loop, cp.async also lets ptxas
    issue the loads under the compute before them (NSA's V under S = Q K^T), which it does not
    do with plain loads. Light kernels (a row of RMSNorm, an elementwise tile) and copies in front
    of the loops (attention's Q) keep the plain copies."""
    staged = -(-math.prod(tile) // vec // lw.T) * vec_bytes // 4
    live = _fragment_registers(lw) if getattr(lw, "loop_depth", 0) > 0 else 0
    return staged + live > COPY_STAGING_BUDGET


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
            or getattr(lw, "thread_region", None) is not None
            or scope_of(src.buffer) not in SHARED_SCOPES or src.buffer in lw.stage
            or (len(args) > 3 and const_int(args[3]) == 1)):       # T.copy(..., disable_tma=True)
        return None
    if any(const_int(lw.rewrite(x)) != 0 for x in src.starts):
        return None     # part of the staging tile
    spec = tma.tma_box_spec(lw, dst, src, len(lw.tensormaps))
    if isinstance(spec, str):
        return None
    j = tma.add_map(lw, spec)
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


def _bulk_store(lw, src, dst, tile, stmt):
    """A whole, linearly laid out shared tile written to a global tensor by the TMA unit, issued
    by thread 0, or None (the threaded copy). Chosen as upstream chooses on sm_90+: a contiguous
    run of the tensor provably inside it is one 1-D bulk copy (``tl::tma_store_bulk``, no tensor
    map); any other box of a tensor parameter (a tile that may overhang the tensor, rows of a
    wider tensor) is one tensor-map store (``tl::tma_store_{rank}d``), which TMA clips at the
    tensor's bounds. Every thread
    fences its shared writes into the async proxy and meets a barrier first; thread 0 waits
    until the store has read shared memory (``tma_store_wait<0>``) before it goes on."""
    args = stmt.value.args
    prefer_tma = len(args) > 3 and const_int(args[3]) == 2
    arch = getattr(lw, "arch", None)
    if (arch is None or targets.parse_arch(arch) < 90 or lw.configs.get("tl.disable_tma_lower")
            or scope_of(dst.buffer) != "global" or scope_of(src.buffer) not in SHARED_SCOPES
            or src.buffer in lw.stage or lw.in_producer or lw.ws is not None or lw.role_block is not None
            or getattr(lw, "thread_region", None) is not None
            or lw.thread_guard is not None or src.dtype != dst.dtype
            or (len(args) > 3 and const_int(args[3]) == 1)):
        return None
    shape = [const_int(x) for x in src.buffer.shape]
    if (None in shape or any(const_int(lw.rewrite(x)) != 0 for x in src.starts)
            or [const_int(lw.rewrite(e)) for e in src.extents] != shape or not _linear(lw, src.buffer)):
        return None
    esize, elems = nbytes(src.dtype), math.prod(tile)
    if (elems * esize) % 16 or bits(src.dtype) < 8:
        return None     # (sub-byte elements: byte counts and addresses would be off by the packing)
    starts, ext, run, inside = _global_run(lw, dst, esize)
    # (a multi-dimensional tile inside the tensor: TMA too, as upstream's plain T.copy does; its
    # wait is spelled as T.tma_store_wait writes it, which the kernels of the 1-D and overhanging
    # cases predate)
    auto_2d = len(shape) != 1 and inside and not prefer_tma
    wait = "tl::tma_store_wait<0, true>" if auto_2d else "tl::tma_store_wait<0>"
    smem = lw.shared_ptr(src.buffer, [i32(0)] * len(shape))
    if run:
        gptr = tirx.address_of(_load_raw(lw, dst, starts))
        issue = evaluate_extern("tl::tma_store_bulk", gptr, smem, i32(elems * esize), span=stmt.span)
    else:
        spec = _box(lw, dst, ext, starts)
        if spec is None:
            return None
        j = tma.add_map(lw, spec)
        issue = evaluate_extern(f"tl::tma_store_{len(starts)}d", tma.tmap(j), smem, *starts[::-1], span=stmt.span)
    stores = seq([issue, evaluate_extern("tl::tma_store_arrive"), evaluate_extern(wait)])
    return seq([evaluate_extern("tl::fence_proxy_async"), evaluate_extern("__syncthreads"),
                tirx.IfThenElse(tirx.EQ(lw.tid, i32(0)), stores, None, span=stmt.span)])


def _tma_load(lw, src, dst, tile, stmt):
    """``T.copy(global, shared, prefer_instruction="tma")`` outside a pipeline on sm_90+: the TMA
    unit fills the whole, linearly laid out shared tile, or None (the threaded copy). A
    contiguous run of the tensor provably inside it is one 1-D bulk copy (``tl::tma_load_bulk``,
    no tensor map); any other box of a plain tensor parameter is one tensor-map load
    (``tl::tma_load_{rank}d``; TMA fills the parts outside the tensor with zeros, so a tensor with
    a non-zero ``T.annotate_safe_value`` keeps the threaded copy). A multicast
    (``T.copy_cluster(cluster_mask=...)``) may also fill a tile in the swizzled wgmma operand
    layout (a T.gemm operand), one box per swizzle slab. The load completes on an mbarrier of its
    own: a barrier (no thread still waits on its previous use), thread 0 initialises it, a barrier
    (the cluster's, for a multicast), thread 0 arms it and issues the load, every thread waits."""
    args = stmt.value.args
    arch = getattr(lw, "arch", None)
    if (not (len(args) > 3 and const_int(args[3]) == 2) or arch is None or targets.parse_arch(arch) < 90
            or lw.configs.get("tl.disable_tma_lower") or scope_of(src.buffer) != "global"
            or scope_of(dst.buffer) not in SHARED_SCOPES or dst.buffer in lw.stage or lw.in_producer
            or lw.ws is not None or lw.role_block is not None
            or getattr(lw, "thread_region", None) is not None or lw.thread_guard is not None
            or src.dtype != dst.dtype):
        return None
    shape = [const_int(x) for x in dst.buffer.shape]
    mask = tma.multicast_mask(lw, stmt)
    if (None in shape or any(const_int(lw.rewrite(x)) != 0 for x in dst.starts)
            or [const_int(lw.rewrite(e)) for e in dst.extents] != shape):
        return None
    esize, elems = nbytes(src.dtype), math.prod(tile)
    nbytes_total = elems * esize
    if nbytes_total % 16 or nbytes_total >= 1 << 20 or bits(src.dtype) < 8:
        return None     # (an mbarrier counts fewer than 2**20 transaction bytes)
    if _linear(lw, dst.buffer):
        make = _linear_load(lw, src, dst, esize, nbytes_total, stmt)
    elif mask:
        # a multicast into a tile in the swizzled wgmma operand layout (a T.gemm operand): one
        # box per swizzle slab, as T.tma_copy issues them
        make = _slab_load(lw, src, dst, stmt)
    else:
        return None
    if make is None:
        return None
    bar = lw.scratch("tl_copy_mbar", 1, "uint64")
    bar_ptr = tirx.address_of(tirx.BufferLoad(bar, [i32(0)]))
    issue = make(bar_ptr)

    def one(body):      # issued by thread 0
        return tirx.IfThenElse(tirx.EQ(lw.tid, i32(0)), seq(body), None, span=stmt.span)

    if mask:
        # T.copy_cluster(cluster_mask=...): a peer block may complete bytes on this block's
        # barrier, so every block of the cluster has initialised its barrier (cluster_sync)
        # before any block issues; the same sync orders the peers' last reads of the tile
        # before the load that overwrites it
        issue = [tma.multicast(lw, s, mask, stmt.span) for s in issue]
    return seq([evaluate_extern("__syncthreads"),
                one([evaluate_extern("tl::mbarrier_init", bar_ptr, i32(1)), evaluate_extern("tl::fence_barrier_init")]),
                evaluate_extern("tl::cluster_sync" if mask else "__syncthreads"),
                one([evaluate_extern("tl::mbarrier_arrive_expect_tx", bar_ptr, i32(nbytes_total)), *issue]),
                evaluate_extern("tl::mbarrier_wait", bar_ptr, i32(0))])


def _linear_load(lw, src, dst, esize, nbytes_total, stmt):
    """The one load of a whole row-major tile, as a function of the barrier: a 1-D bulk copy where
    the tensor's run is contiguous, else a tensor-map box; None where TMA cannot address it or
    would zero-fill with the wrong value."""
    starts, ext, run, _ = _global_run(lw, src, esize)
    smem = lw.shared_ptr(dst.buffer, [i32(0)] * len(dst.buffer.shape))
    if run:
        gptr = tirx.address_of(_load_raw(lw, src, starts))
        return lambda bar_ptr: [evaluate_extern("tl::tma_load_bulk", smem, gptr, i32(nbytes_total), bar_ptr,
                                                span=stmt.span)]
    spec = _box(lw, src, ext, starts)
    if spec is None or not _zero_filled(lw, src):
        return None
    return lambda bar_ptr: [evaluate_extern(f"tl::tma_load_{len(starts)}d", smem, tma.tmap(tma.add_map(lw, spec)),
                                            bar_ptr, *starts[::-1], span=stmt.span)]


def _slab_load(lw, src, dst, stmt):
    """The boxes of a whole tile in the swizzled wgmma operand layout, as a function of the
    barrier (``slab_loads``), or None where TMA cannot fill it."""
    spec = tma.tma_box_spec(lw, src, dst, len(lw.tensormaps))
    if isinstance(spec, str) or not _zero_filled(lw, src):
        return None
    return lambda bar_ptr: slab_loads(lw, src, dst, tma.add_map(lw, spec), spec["box"][0], bar_ptr, i32(0),
                                      stmt.span)


def slab_loads(lw, src, dst, index, width, bar_ptr, base, span=None) -> list:
    """One TMA box (tensor map ``index``) per ``width``-column swizzle slab of a (rows, columns)
    tile in the wgmma operand layout whose first element is at ``base`` of the tile's view: the
    slabs lie one after another."""
    rows, cols = (const_int(x) for x in dst.buffer.shape[-2:])
    coords = [lw.rewrite(x) for x in src.starts[::-1]]
    view = lw.smem_views[dst.buffer]
    return [evaluate_extern(f"tl::tma_load_{len(coords)}d",
                            tirx.address_of(tirx.BufferLoad(view, [base + i32(s * rows * width)])), tma.tmap(index),
                            bar_ptr, coords[0] + i32(s * width), *coords[1:], span=span)
            for s in range(cols // width)]


def _zero_filled(lw, src) -> bool:
    """Whether TMA's zero fill outside the tensor is the value the kernel reads there."""
    zero = safe_value(lw.info, src.buffer, src.dtype)
    return isinstance(zero, (tirx.IntImm, tirx.FloatImm)) and zero.value == 0


def _box(lw, region, ext, starts):
    """The tensor map whose box is ``region`` (extents ``ext``) of a tensor parameter with a
    static shape and strides, without swizzle, or None where TMA cannot address it."""
    from tilelang.artifact import TENSORMAP_DTYPES

    params = lw.info.func.params
    pi = next((i for i, p in enumerate(params) if p.same_as(region.buffer)), None)
    shape = [const_int(x) for x in region.buffer.shape]
    dtype, esize = str(region.buffer.dtype), nbytes(str(region.buffer.dtype))
    if (pi is None or None in shape or not 1 <= len(shape) <= 5 or dtype not in TENSORMAP_DTYPES
            or any(not 1 <= e <= 256 for e in ext) or (ext[-1] * esize) % 16):
        return None
    el = _strides(region.buffer)                 # element strides (declared, or row-major)
    if None in el or el[-1] != 1:
        return None
    strides = [el[d] * esize for d in range(len(shape) - 2, -1, -1)]   # dims 1 .. rank-1, innermost first
    if any(st % 16 for st in strides):
        return None
    col = lw.an.modular_set(simplify(starts[-1] * esize))
    if col.coeff % 16 or col.base % 16:
        return None     # the innermost coordinate must be a multiple of 16 bytes
    return {"name": f"tl_tmap_{len(lw.tensormaps)}", "param": pi, "dtype": dtype, "dims": shape[::-1],
            "strides": strides, "box": list(ext[::-1]), "swizzle": 0}


def _linear(lw, buf) -> bool:
    """Whether the shared buffer's layout is plain row-major (no swizzle, no padding)."""
    layout = lw.layouts.shared.get(buf)
    if layout is None:
        return False
    shape = [const_int(x) for x in buf.shape]
    if getattr(layout, "size", math.prod(shape)) != math.prod(shape):
        return False
    idx = [tirx.Var(f"i{k}", "int32") for k in range(len(shape))]
    flat = i32(0)
    for v, n in zip(idx, shape):
        flat = flat * n + v
    return const_int(simplify(layout.offset(idx) - flat)) == 0


def _global_run(lw, region, esize) -> tuple:
    """(starts, extents, run, inside) of a global region: ``inside`` when it lies provably inside
    its tensor, ``run`` when it is moreover one contiguous, 16-byte aligned run of memory (a 1-D
    bulk copy can move it)."""
    gshape = [lw.rewrite(x) for x in region.buffer.shape]
    starts = [lw.rewrite(x) for x in region.starts]
    ext = [const_int(lw.rewrite(e)) for e in region.extents]
    strides = _strides(region.buffer)
    inside = None not in ext and all(lw.prove(tirx.GE(st, 0)) and lw.prove(tirx.LE(st + e, n))
                                     for st, e, n in zip(starts, ext, gshape))
    run = inside and None not in strides and _contiguous(lw, gshape, starts, ext, strides)
    if run:
        flat = i32(0)
        for st, stride in zip(starts, strides):
            flat = flat + st * stride
        ms = lw.an.modular_set(simplify(flat * esize))
        run = ms.coeff % 16 == 0 and ms.base % 16 == 0
    return starts, ext, run, inside


def _contiguous(lw, gshape, starts, ext, strides) -> bool:
    """Whether a region is one contiguous run of memory: from the innermost dimension, each
    dimension of extent > 1 has the stride of the whole dimensions inside it, they are whole
    until one that is not, and every dimension further out has extent 1."""
    partial, expected = False, 1
    for n, st, e, stride in reversed(list(zip(gshape, starts, ext, strides))):
        if partial:
            if e != 1:
                return False
            continue
        if e != 1 and stride != expected:
            return False
        if lw.prove(tirx.EQ(st, 0)) and const_int(n) == e:
            expected *= e
        else:
            partial = True
    return True


def _vector_walk(tile, vec, threads, tid):
    """(it, iters, q, total, pos): the tile as ``total`` vectors of ``vec`` elements in row-major
    order, vector q = it * threads + tid taken by thread ``tid`` in iteration ``it`` of ``iters``,
    and ``pos`` the tile coordinates of its first element."""
    inner_vecs = tile[-1] // vec
    total = math.prod(tile) // vec
    iters = -(-total // threads)
    it = tirx.Var("it", "int32")
    q = it * threads + tid if iters > 1 else tid
    pos, rest = [], q
    for k in reversed(range(len(tile))):
        ext = inner_vecs if k == len(tile) - 1 else tile[k]
        digit = tirx.floormod(rest, i32(ext))
        pos.append(digit * vec if k == len(tile) - 1 else digit)
        rest = tirx.floordiv(rest, i32(ext))
    return it, iters, q, total, [simplify(p) for p in reversed(pos)]


def _threaded_copy(lw, src, dst, sd, dd, tile, vec, use_async, span, per_thread=False, limits=None):
    """Each thread moves vectors q = it * T + tid of the tile (row-major order); ``per_thread``
    (a thread-local side): every thread moves all of them. ``limits``: ``_bounded_tile``'s, the
    vectors that start at or past those extents moving nothing or safe values."""
    threads, tid = (1, i32(0)) if per_thread else (lw.T, lw.tid)
    it, iters, q, total, pos = _vector_walk(tile, vec, threads, tid)
    lw.an.bind(it, tvm.ir.Range(0, iters))     # (the bound checks below see the walk's extent)
    s_idx, d_idx = _indices(src, sd, pos, lw), _indices(dst, dd, pos, lw)
    guard = None
    for region, idx, dims in ((src, s_idx, sd), (dst, d_idx, dd)):
        g = _in_bounds(lw, region, idx, dims)
        guard = g if guard is None else (tirx.And(guard, g) if g is not None else guard)
    bounds = guard
    if total % threads:
        tail = tirx.LT(q, i32(total))
        guard = tail if guard is None else tirx.And(tail, guard)
    nbytes_vec = _vec_bytes(vec, src.dtype)
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
            if total % threads:
                one = tirx.IfThenElse(tirx.LT(q, i32(total)), one, None)
    else:
        if vec == 1:
            # s_idx is already rewritten: map storage only (substituting again would shift a
            # pipelined loop variable twice).
            value = _load_raw(lw, src, s_idx)
            if src.dtype != dst.dtype:
                value = tirx.Cast(dst.dtype, value)
            one = _store_raw(lw, dst, d_idx, value, span)
        elif src.dtype != dst.dtype:
            lane = tirx.Var("l", "int32")
            s_lane, d_lane = list(s_idx), list(d_idx)
            s_lane[-1], d_lane[-1] = s_lane[-1] + lane, d_lane[-1] + lane
            value = tirx.Cast(dst.dtype, _load_raw(lw, src, s_lane))
            one = _lanes(lane, vec, _store_raw(lw, dst, d_lane, value, span))
        else:
            one = evaluate_extern(f"tl::copy_vec<{nbytes_vec}>", d_ptr, s_ptr, span=span)
        if guard is not None:
            src_guard = _in_bounds(lw, src, s_idx, sd)
            if scope_of(dst.buffer) in SHARED_SCOPES and src_guard is not None:
                zero = _safe_fill(lw, src, dst, d_idx, vec, span)
                one = tirx.IfThenElse(bounds, one, zero)
                if total % threads:   # threads past the tile store nothing (a zero would race)
                    one = tirx.IfThenElse(tirx.LT(q, i32(total)), one, None)
            elif src_guard is not None:
                # a read outside the source gives its safe value, wherever the destination exists
                dst_guard = _in_bounds(lw, dst, d_idx, dd)
                if total % threads:
                    tail = tirx.LT(q, i32(total))
                    dst_guard = tail if dst_guard is None else tirx.And(tail, dst_guard)
                one = tirx.IfThenElse(src_guard, one, _safe_fill(lw, src, dst, d_idx, vec, span))
                if dst_guard is not None:
                    one = tirx.IfThenElse(dst_guard, one, None)
            else:
                one = tirx.IfThenElse(guard, one, None)
    if limits:
        skip, fill = _limit_conds(limits, pos)
        if fill is not None:   # the destination's tile past the source's extent: safe values
            zero = _safe_fill(lw, src, dst, d_idx, vec, span)
            if total % threads:
                zero = tirx.IfThenElse(tirx.LT(q, i32(total)), zero, None)
            one = tirx.IfThenElse(fill, one, zero)
        if skip is not None:
            one = tirx.IfThenElse(skip, one, None)
    if iters == 1:
        return one
    return tirx.For(it, i32(0), i32(iters), tirx.ForKind.SERIAL, one, annotations={"pragma_unroll": True}, span=span)


def copy_thread_elements(lw, record, max_pairs):
    """{shared buffer: {element index tuple: set of thread slots}} of a copy lowered by
    ``_threaded_copy`` (``record`` as ``lower_copy`` keeps it): vector q = it * T + tid of the tile
    in row-major order, ``vec`` consecutive elements each. None when a shared side's start is not a
    constant or the copy has more than ``max_pairs`` (thread, element) pairs."""
    src, dst, sd, dd, tile, vec, threads, _ = record
    total = math.prod(tile) // vec
    if total * vec > max_pairs:
        return None
    out = {}
    for region, dims in ((src, sd), (dst, dd)):
        if scope_of(region.buffer) not in SHARED_SCOPES:
            continue
        starts = [const_int(lw.rewrite(s)) for s in region.starts]
        if None in starts:
            return None
        owners = out.setdefault(region.buffer, {})
        inner_vecs = tile[-1] // vec
        for q in range(total):
            pos, rest = [], q
            for k in reversed(range(len(tile))):
                ext = inner_vecs if k == len(tile) - 1 else tile[k]
                pos.append(rest % ext)
                rest //= ext
            pos.reverse()
            for lane in range(vec):
                idx = list(starts)
                for j, (d, p) in enumerate(zip(dims, pos)):
                    idx[d] += p * vec + lane if j == len(dims) - 1 else p
                owners.setdefault(tuple(idx), set()).add(q % threads)
    return out


def _store_raw(lw, region, idx, value, span):
    """Store to ``region.buffer[idx]`` (idx already rewritten), through its lowered storage."""
    buf, flat = lw.element(region.buffer, idx)
    return tirx.BufferStore(buf, value, flat, span=span)


def _load_raw(lw, region, idx):
    buf, flat = lw.element(region.buffer, idx)
    return tirx.BufferLoad(buf, flat)


def _safe_fill(lw, src, dst, d_idx, vec, span):
    """Store what out-of-bounds reads of ``src`` give (``T.annotate_safe_value``, else 0) to
    ``vec`` elements of ``dst`` at ``d_idx``."""
    if not any(k.same_as(src.buffer) for k in lw.info.safe_values):
        return _zero_fill(lw, dst, d_idx, vec, span)
    value = safe_value(lw.info, src.buffer, dst.dtype)
    if vec == 1:
        return _store_raw(lw, dst, d_idx, value, span)
    stores = []
    for lane in range(vec):
        idx = list(d_idx)
        idx[-1] = idx[-1] + lane
        stores.append(_store_raw(lw, dst, idx, value, span))
    return seq(stores)


def _zero_fill(lw, region, idx, vec, span):
    if vec == 1:
        return _store_raw(lw, region, idx, tirx.const(0, region.dtype), span)
    return evaluate_extern(f"tl::zero_vec<{_vec_bytes(vec, region.dtype)}>", _ptr(lw, region, idx), span=span)


def _vec_bytes(vec, dtype) -> int:
    """Bytes of a vector of ``vec`` elements of ``dtype`` (16 float4 values are 8 bytes)."""
    return max(1, vec * bits(dtype) // 8)


def _fragment_vector(lw, layout, frag_side, other, fd, od, tile):
    """Registers moved per vector access: the run of consecutive columns a thread holds,
    capped at 16 bytes and by the alignment of the memory side."""
    if scope_of(other.buffer) == FRAGMENT_SCOPE or not fd or not od or _custom_layout(lw, other):
        return 1
    if "bool" in (str(frag_side.dtype), str(other.dtype)):
        return 1    # CUDA has no bool vectors: TVM prints boolx4 as the 8-byte ushort4
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
        ok = ok and ms.coeff % vec == 0 and ms.base % vec == 0 and _shared_rows_aligned(lw, other, vec)
        if scope_of(other.buffer) == "global":
            strides = _strides(other.buffer)
            row = const_int(other.buffer.shape[-1])
            ok = ok and row is not None and row % vec == 0 and strides[-1] == 1
            ok = ok and all(st is not None and st % vec == 0 for st in strides[:-1])
        if ok:
            return vec
        vec //= 2
    return 1


def _stmatrix(lw, src, dst, layout, sd, dd, tile, stmt):
    """``T.copy(fragment, shared)`` of a whole 2-D fragment in the mma / wgmma accumulator pattern
    into a 16-bit shared tile, as ``stmatrix.x4`` (sm_90, ``tl.enable_stmatrix``): each warp stores
    four 8x8 matrices per instruction, every lane handing over two elements per matrix and one row
    address, instead of one 32-bit store per element pair (upstream's epilogue). Needs, for every
    register group ``8s .. 8s+7`` of every thread, the pattern the accumulators have (checked by
    enumerating the layout): registers ``8s + 2q``, ``8s + 2q + 1`` two adjacent columns of matrix
    q, lane ``L`` at row ``L / 4`` and columns ``2 (L % 4)`` of it, the matrix's first column a
    multiple of 8; and shared rows of 16 aligned bytes (a swizzled tile, or row strides and start
    multiples of 8). None where any of that does not hold (the per-pair stores then)."""
    import numpy as np

    if not lw.configs.get(STMATRIX_KEY) or targets.parse_arch(getattr(lw, "arch", None) or "sm_80") < 90 \
            or getattr(lw, "thread_region", None) is not None:      # (a copy over part of the threads)
        return None
    if str(dst.dtype) not in ("float16", "bfloat16") or scope_of(dst.buffer) not in SHARED_SCOPES:
        return None
    if not src.is_whole() or len(layout.shape) != 2 or list(sd) != [0, 1] or layout.replication != 1:
        return None
    if list(dd) != [len(dst.buffer.shape) - 2, len(dst.buffer.shape) - 1] or _custom_layout(lw, dst):
        return None
    n, threads = layout.local_size, layout.num_threads
    if n % 8 or threads % 32 or threads != lw.T or tile[0] % 8 or tile[1] % 8:
        return None
    # each matrix row is 16 contiguous, aligned bytes: a plain tile with rows (and the region's
    # column start) at multiples of 8 elements, or a swizzled one whose rows and slabs are (its
    # XOR moves whole 16-byte chunks)
    start = lw.an.modular_set(lw.rewrite(dst.starts[-1]))
    if start.coeff % 8 or start.base % 8:
        return None
    shared = lw.layouts.shared.get(dst.buffer)
    if _linear(lw, dst.buffer):
        if not _shared_rows_aligned(lw, dst, 8):
            return None
    elif not (isinstance(shared, SharedLayout) and shared.ld % 8 == 0 and shared.slab_width % 8 == 0):
        return None
    width = layout.shape[1]
    owners = layout.owners()
    rows, cols = owners // width, owners % width
    lane = np.arange(threads) % 32
    for s in range(n // 8):
        for q in range(4):
            v = 8 * s + 2 * q
            if not (np.array_equal(rows[:, v + 1], rows[:, v]) and np.array_equal(cols[:, v + 1], cols[:, v] + 1)):
                return None
            r0, c0 = (rows[:, v] - lane // 4).reshape(-1, 32), (cols[:, v] - 2 * (lane % 4)).reshape(-1, 32)
            if (r0 != r0[:, :1]).any() or (c0 != c0[:, :1]).any() or (c0 % 8).any():
                return None
    s = tirx.Var("s", "int32")
    lw.bind_loop(s, n // 8)
    pos = [lw.an.simplify(e) for e in stmatrix_row(layout, lw.tid, s)]
    idx = _indices(dst, dd, pos, lw)
    if _in_bounds(lw, dst, idx, dd) is not None:
        return None
    f_buf = lw.frag[src.buffer]
    values = [tirx.BufferLoad(f_buf, [s * 8 + k]) for k in range(8)]
    body = evaluate_extern("tl::stmatrix_x4", lw.shared_ptr(dst.buffer, idx), *values, span=stmt.span)
    if n // 8 == 1:
        return substitute_stmt(body, {s: i32(0)})
    return tirx.For(s, i32(0), i32(n // 8), tirx.ForKind.SERIAL, body, annotations={"pragma_unroll": True},
                    span=stmt.span)


def stmatrix_row(layout, tid, s):
    """Tile position of the row whose address thread ``tid`` hands to ``stmatrix.x4`` number ``s``
    (``_stmatrix``): lane L gives row L % 8 of matrix L / 8, the row of which lane 4 (L % 8) of
    the same warp holds the first pair, in register 8 s + 2 (L / 8)."""
    lane = tirx.FloorMod(tid, i32(32))
    return layout.index(tid - lane + tirx.FloorMod(lane, i32(8)) * 4, s * 8 + tirx.FloorDiv(lane, i32(8)) * 2)


def _copy_fragment(lw, src, dst, stmt):
    """Each thread moves the fragment elements it holds, in vectors of consecutive columns (a copy
    between two layouts, ``Layouts.conversions``, is ``lower_reduce.convert_layout``'s)."""
    packed = _packed_cast(lw, src, dst, stmt)
    if packed is not None:
        return packed
    frag_side = src if scope_of(src.buffer) == FRAGMENT_SCOPE else dst
    other = dst if frag_side is src else src
    layout = lw.layouts.fragments[frag_side.buffer]
    bounded = _bounded_tile(lw, src, dst)
    limits = bounded[3] if bounded is not None else {}
    sd, dd, tile = bounded[:3] if bounded is not None else _match(lw, src, dst, stmt.span)
    if frag_side is src and scope_of(dst.buffer) in SHARED_SCOPES and not limits:
        matrices = _stmatrix(lw, src, dst, layout, sd, dd, tile, stmt)
        if matrices is not None:
            return matrices
    fd, od = (sd, dd) if frag_side is src else (dd, sd)
    n = max(layout.local_size, 1)
    vec = 1 if limits else _fragment_vector(lw, layout, frag_side, other, fd, od, tile)
    w, lane = tirx.Var("w", "int32"), tirx.Var("l", "int32")
    lw.bind_loop(w, n // vec)
    base = w * vec if vec > 1 else w
    elem = layout.index(lw.tid, base)
    pos = [elem[d] for d in fd]
    inside = None
    if not frag_side.is_whole():
        # A part of the fragment (``acc_o[:4, :]``): tile positions count from the region's start,
        # and only the registers inside the region move (the others would land past the other side).
        starts = [lw.rewrite(x) for x in frag_side.starts]
        pos = [lw.an.simplify(elem[d] - starts[d]) for d in fd]
        inside = _fragment_region_guard(lw, frag_side, elem, starts)
    lane_pos = list(pos)
    if vec > 1:
        lane_pos[-1] = lane_pos[-1] + lane
    o_idx = _indices(other, od, lane_pos, lw)
    o_idx0 = _indices(other, od, pos, lw)
    f_buf = lw.frag[frag_side.buffer]
    # (the thread's own register: element ``elem`` of a region lives at register ``base``)
    f_flat = [base + lane if vec > 1 else base]
    guard = _in_bounds(lw, other, o_idx0, od)
    # packed 4-bit elements move as whole bytes: CUDA has no vectors of them, and one element at a
    # time is a read-modify-write of its byte (a compare-and-swap in memory). TVM addresses int4 /
    # uint4 by 32-bit words (element / 8), so those take whole aligned words only.
    packed = (str(src.dtype) in _PACKED_4BIT and src.dtype == dst.dtype and vec > 1 and vec % 2 == 0
              and scope_of(other.buffer) != FRAGMENT_SCOPE and (frag_side is src or guard is None)
              and (str(src.dtype) == "float4_e2m1fn" or _whole_words(lw, other, o_idx0, base, vec)))
    if packed:
        f_ptr = tirx.address_of(tirx.BufferLoad(f_buf, [base]))
        o_ptr = _ptr(lw, other, o_idx0)
        nb = _vec_bytes(vec, src.dtype)
        body = evaluate_extern(f"tl::copy_vec<{nb}>", *((o_ptr, f_ptr) if frag_side is src else (f_ptr, o_ptr)),
                               span=stmt.span)
        if frag_side is src and layout.replication > 1:
            rep = tirx.EQ(layout.replica_index(lw.tid), i32(0))
            guard = rep if guard is None else tirx.And(rep, guard)
        if guard is not None:
            body = tirx.IfThenElse(guard, body, None)
    elif frag_side is src:
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
            zero = _lanes(lane, vec, tirx.BufferStore(f_buf, safe_value(lw.info, other.buffer, dst.dtype), f_flat),
                          serial=True)
            body = tirx.IfThenElse(guard, body, zero)
    if limits:   # run-time extents (``_bounded_tile``): past them nothing, or safe values
        skip, fill = _limit_conds(limits, pos)
        if fill is not None:
            zero = tirx.BufferStore(f_buf, safe_value(lw.info, other.buffer, dst.dtype), f_flat)
            body = tirx.IfThenElse(fill, body, zero)
        if skip is not None:
            body = tirx.IfThenElse(skip, body, None)
    if inside is not None:
        body = tirx.IfThenElse(inside, body, None)
    if n // vec == 1:
        return substitute_stmt(body, {w: i32(0)})
    return tirx.For(w, i32(0), i32(n // vec), tirx.ForKind.SERIAL, body, annotations={"pragma_unroll": True},
                    span=stmt.span)


def _fragment_region_guard(lw, region, elem, starts):
    """Condition that fragment element ``elem`` lies inside ``region`` (None: always)."""
    conds = []
    for d, (start, ext, full) in enumerate(zip(starts, region.extents, region.buffer.shape)):
        if const_int(start) == 0 and const_int(ext) == const_int(full):
            continue
        ext = lw.rewrite(ext)
        if const_int(ext) == 1:
            cond = tirx.EQ(elem[d], start)
        else:
            cond = tirx.And(tirx.GE(elem[d], start), tirx.LT(elem[d], start + ext))
        cond = lw.an.simplify(cond)
        if const_int(cond) == 1:
            continue
        conds.append(cond)
    if not conds:
        return None
    out = conds[0]
    for c in conds[1:]:
        out = tirx.And(out, c)
    return out


_PACKED_4BIT = ("float4_e2m1fn", "int4", "uint4")


def _whole_words(lw, other, o_idx, base, vec) -> bool:
    """Whether a run of ``vec`` int4 elements from ``other[o_idx]`` and register ``base`` covers
    whole 32-bit words on both sides."""
    flat = flat_index(other.buffer, list(o_idx))
    return (vec % 8 == 0 and flat is not None and lw.an.can_prove(tirx.floormod(flat, 8) == 0)
            and lw.an.can_prove(tirx.floormod(base, 8) == 0))


def _packed_cast(lw, src, dst, stmt):
    """A whole 32-bit fragment cast into a whole 16-bit fragment of the same layout (attention's
    ``T.copy(acc_s, acc_s_cast)``), two registers at a time: nvcc then keeps the result packed in
    32-bit registers (one F2FP per pair) even when it lives across a loop iteration, as the P
    operand of an asynchronous register-A wgmma does; else None."""
    if scope_of(src.buffer) != FRAGMENT_SCOPE or scope_of(dst.buffer) != FRAGMENT_SCOPE:
        return None
    if not (src.is_whole() and dst.is_whole()) or nbytes(src.dtype) != 4:
        return None
    # (float32 -> 8-bit floats: one paired conversion per two registers, cvt.rn.satfinite.e4m3x2)
    if nbytes(dst.dtype) != 2 and (str(src.dtype), str(dst.dtype)) not in (
            ("float32", "float8_e4m3fn"), ("float32", "float8_e5m2")):
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
    region = _static_region(lw, stmt.value.args[0])
    value = lw.rewrite(stmt.value.args[1])
    dtype = region.dtype
    if not (hasattr(value, "ty") and dtype_of(value) == dtype):
        value = tirx.Cast(dtype, value) if hasattr(value, "ty") else tirx.const(value, dtype)
    scope = scope_of(region.buffer)
    if scope == FRAGMENT_SCOPE:
        layout = lw.layouts.fragments[region.buffer]
        v = tirx.Var("v", "int32")
        n = max(layout.local_size, 1)
        body = tirx.BufferStore(lw.frag[region.buffer], value, [v], span=stmt.span)
        if not region.is_whole():
            # part of a fragment (a T.clear of an alias ``C_local[:bm, :bk]``): each thread sets
            # the registers whose element lies inside the region
            lw.bind_loop(v, n)
            inside = None
            for e, lo, ext in zip(layout.index(lw.tid, v), region.starts, region.extents):
                lo, ext = lw.rewrite(lo), lw.rewrite(ext)
                for c in (tirx.GE(e, lo), tirx.LT(e, lo + ext)):
                    if not lw.prove(c):
                        inside = c if inside is None else tirx.And(inside, c)
            if inside is not None:
                body = tirx.IfThenElse(inside, body, None)
        return tirx.For(v, i32(0), i32(n), tirx.ForKind.SERIAL, body,
                        annotations={"pragma_unroll": True}, span=stmt.span)
    if scope == "local":
        n = math.prod(const_int(e) for e in region.extents)
        v = tirx.Var("v", "int32")
        flat_start = [lw.rewrite(s) for s in region.starts]
        body = tirx.BufferStore(region.buffer, value, [flat_start[0] + v] + flat_start[1:], span=stmt.span)
        return tirx.For(v, i32(0), i32(n), tirx.ForKind.SERIAL, body, annotations={"pragma_unroll": True})
    dims, ext = region.nonunit()
    tile = [const_int(lw.rewrite(e)) for e in ext]
    if any(t is None for t in tile):
        return _fill_dynamic(lw, region, dims, [lw.rewrite(e) for e in ext], value, stmt.span)
    vec = _fill_width(lw, region, dims, tile)
    if vec > 1:
        # a plainly laid out shared tile: 16-byte stores of the value repeated
        it, iters, q, total, pos = _vector_walk(tile, vec, lw.T, lw.tid)
        idx = _indices(region, dims, pos, lw)
        one = evaluate_extern(f"tl::fill_vec<{vec * nbytes(dtype)}>", lw.shared_ptr(region.buffer, idx), value,
                              span=stmt.span)
        if total % lw.T:
            one = tirx.IfThenElse(tirx.LT(q, i32(total)), one, None)
        return one if iters == 1 else tirx.For(it, i32(0), i32(iters), tirx.ForKind.SERIAL, one,
                                               annotations={"pragma_unroll": True}, span=stmt.span)
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


def _fill_width(lw, region, dims, tile) -> int:
    """Elements per store of a T.fill of a shared region: 16 bytes' worth where the buffer is laid
    out row-major (no swizzle, no padding), its last dimension is the tile's inner one, and every
    row of the region starts at a multiple of the vector; else 1."""
    buf = region.buffer
    size = nbytes(str(buf.dtype))
    if (scope_of(buf) not in SHARED_SCOPES or bits(buf.dtype) % 8 or size > 8 or not dims
            or dims[-1] != len(buf.shape) - 1 or not _linear(lw, buf)):
        return 1
    vec = 16 // size
    start = lw.rewrite(region.starts[dims[-1]])
    while vec > 1 and not (tile[-1] % vec == 0 and _starts_aligned(lw, region, start, vec)):
        vec //= 2
    return vec


def _fill_dynamic(lw, region, dims, ext, value, span):
    """T.fill of a region whose extents are known only at run time (``x[a:b]``): the threads
    stride over the flattened region, ``ceildiv(total, threads)`` rounds, the tail masked."""
    total = ext[0]
    for e in ext[1:]:
        total = total * e
    it = tirx.Var("it", dtype_of(total))
    threads = tirx.IntImm(dtype_of(total), lw.T)
    q = it * threads + tirx.Cast(dtype_of(total), lw.tid)
    pos, rest = [], q
    for e in reversed(ext[1:]):
        pos.append(tirx.floormod(rest, e))
        rest = tirx.floordiv(rest, e)
    pos.append(rest)   # (q < total: the outermost position needs no wrap)
    idx = _indices(region, dims, [simplify(p) for p in reversed(pos)], lw)
    one = _store_raw(lw, region, idx, value, span)
    guard = tirx.LT(q, total)
    inside = _in_bounds(lw, region, idx, dims)
    if inside is not None:
        guard = tirx.And(guard, inside)
    rounds = tirx.floordiv(total + threads - tirx.IntImm(dtype_of(total), 1), threads)
    return tirx.For(it, tirx.IntImm(dtype_of(total), 0), rounds, tirx.ForKind.SERIAL,
                    tirx.IfThenElse(guard, one, None), span=span)


def lower_atomic(lw, stmt):
    args = stmt.value.args
    dst, src = _static_region(lw, args[0]), _static_region(lw, args[1])
    kind = str(args[2].value)
    if scope_of(src.buffer) != FRAGMENT_SCOPE:
        return _threaded_atomic(lw, src, dst, kind, stmt)
    layout = lw.layouts.fragments[src.buffer]
    sd, dd, tile = _match(lw, src, dst, stmt.span, f"T.atomic_{kind}")
    vec = _fragment_atomic_vector(lw, layout, src, dst, sd, dd, tile, kind)
    if vec > 1:
        return _fragment_vector_atomic(lw, layout, src, dst, sd, dd, vec, stmt)
    v = tirx.Var("v", "int32")
    lw.bind_loop(v, max(layout.local_size, 1))
    elem = layout.index(lw.tid, v)
    pos = [elem[d] for d in sd]
    d_idx = _indices(dst, dd, pos, lw)
    value = tirx.BufferLoad(lw.frag[src.buffer], [lw.an.simplify(layout.local_of(_indices(src, sd, pos, lw)))])
    if src.dtype != dst.dtype:
        value = tirx.Cast(dst.dtype, value)
    body = _guarded_atomic(lw, layout, dst, d_idx, dd,
                           evaluate_extern(f"tl::atomic_{kind}", _ptr(lw, dst, d_idx), value, span=stmt.span))
    n = max(layout.local_size, 1)
    return tirx.For(v, i32(0), i32(n), tirx.ForKind.SERIAL, body, annotations={"pragma_unroll": True})


def _guarded_atomic(lw, layout, dst, d_idx, dd, body):
    """A fragment element's atomic ``body`` under its bounds guard and, for a replicated layout,
    on the first replica only (each element is added once)."""
    guard = _in_bounds(lw, dst, d_idx, dd)
    if layout.replication > 1:
        rep = tirx.EQ(layout.replica_index(lw.tid), i32(0))
        guard = rep if guard is None else tirx.And(rep, guard)
    return body if guard is None else tirx.IfThenElse(guard, body, None)


def _fragment_atomic_vector(lw, layout, src, dst, sd, dd, tile, kind) -> int:
    """Lanes per packed atomic add of a tile-level ``T.atomic_add`` from a whole fragment into a
    global tensor on sm_90+: the run of consecutive columns a thread holds in consecutive
    registers (``_fragment_vector``: an mma / wgmma accumulator's column pairs), capped at the
    widest packed add (``_PACKED_ADDS``: ``red.global.add.v2.f32`` / ``.v4.f32``, a ``half2``); 1
    otherwise. Each lane stays an atomic add of its own element (the sum is the one element by
    element), but a warp's instruction fills whole 32-byte sectors where scalar adds of the
    accumulator's column pairs fill half of each (flash attention's dQ accumulation)."""
    dtype = str(dst.dtype)
    if kind != "add" or str(src.dtype) != dtype or (dtype, 2) not in _PACKED_ADDS or not src.is_whole():
        return 1
    if scope_of(dst.buffer) != "global":
        return 1
    arch = getattr(lw, "arch", None)
    if arch is None or targets.parse_arch(arch) < 90:
        return 1
    vec = min(_fragment_vector(lw, layout, src, dst, sd, dd, tile), 4 if dtype == "float32" else 2)
    return vec if (dtype, vec) in _PACKED_ADDS else 1


def _fragment_vector_atomic(lw, layout, src, dst, sd, dd, vec, stmt):
    """``lower_atomic`` ``vec`` registers at a time: registers ``w * vec .. + vec - 1`` of a thread
    hold consecutive columns of one row (``_fragment_vector``), added with one packed atomic.
    ``_fragment_vector`` guarantees the global rows and the region's column start are multiples
    of ``vec``, so a vector whose first element lies inside the tensor lies inside it whole: the
    bounds guard tests the first element only."""
    n = max(layout.local_size, 1)
    w = tirx.Var("w", "int32")
    lw.bind_loop(w, n // vec)
    base = w * vec
    elem = layout.index(lw.tid, base)
    d_idx = _indices(dst, dd, [elem[d] for d in sd], lw)
    value = tirx.address_of(tirx.BufferLoad(lw.frag[src.buffer], [base]))
    body = _guarded_atomic(lw, layout, dst, d_idx, dd,
                           evaluate_extern(_PACKED_ADDS[(str(dst.dtype), vec)], _ptr(lw, dst, d_idx), value,
                                           span=stmt.span))
    if n // vec == 1:
        return substitute_stmt(body, {w: i32(0)})
    return tirx.For(w, i32(0), i32(n // vec), tirx.ForKind.SERIAL, body, annotations={"pragma_unroll": True},
                    span=stmt.span)


def _threaded_atomic(lw, src, dst, kind, stmt):
    """A tile-level atomic from shared or global memory: element q = it * T + tid of the tile
    (row-major) is read by one thread and added into ``dst`` atomically; elements outside either
    global tensor are skipped."""
    if scope_of(src.buffer) not in SHARED_SCOPES + ("global",):
        raise LoweringError("TL0002", f"tile-level T.atomic_* reads fragments, shared or global memory, not "
                            f"'{src.buffer.name}' (scope '{scope_of(src.buffer)}')", stmt.span)
    sd, dd, tile = _match(lw, src, dst, stmt.span, f"T.atomic_{kind}")
    vec = _atomic_vector(lw, src, dst, sd, dd, tile, kind)
    if vec > 1:
        return _threaded_vector_atomic(lw, src, dst, sd, dd, tile, vec, stmt)
    total = math.prod(tile)
    iters = -(-total // lw.T)
    it = tirx.Var("it", "int32")
    q = it * lw.T + lw.tid if iters > 1 else lw.tid
    if iters > 1:
        lw.bind_loop(it, iters)
    pos, rest = [], q
    for ext in reversed(tile):
        pos.append(tirx.floormod(rest, i32(ext)))
        rest = tirx.floordiv(rest, i32(ext))
    pos = [simplify(p) for p in reversed(pos)]
    s_idx, d_idx = _indices(src, sd, pos, lw), _indices(dst, dd, pos, lw)
    value = _load_raw(lw, src, s_idx)
    if src.dtype != dst.dtype:
        value = tirx.Cast(dst.dtype, value)
    body = evaluate_extern(f"tl::atomic_{kind}", _ptr(lw, dst, d_idx), value, span=stmt.span)
    return _atomic_loop(lw, body, it, iters, q, total, (src, s_idx, sd), (dst, d_idx, dd), stmt.span)


def _atomic_loop(lw, body, it, iters, q, total, src_side, dst_side, span):
    """``body`` (one thread's atomic) guarded by the tile's tail (``q < total`` where the threads
    do not divide it) and both sides' bounds, in an unrolled loop over ``iters`` (none when 1)."""
    guard = None
    for g in (tirx.LT(q, i32(total)) if total % lw.T else None, _in_bounds(lw, *src_side),
              _in_bounds(lw, *dst_side)):
        if g is not None:
            guard = g if guard is None else tirx.And(guard, g)
    if guard is not None:
        body = tirx.IfThenElse(guard, body, None)
    if iters == 1:
        return body
    return tirx.For(it, i32(0), i32(iters), tirx.ForKind.SERIAL, body, annotations={"pragma_unroll": True},
                    span=span)


# packed atomic adds of the device library (src/tl/atomic.h): (dtype, lanes) -> function
_PACKED_ADDS = {("float32", 4): "tl::atomic_addx4", ("float32", 2): "tl::atomic_addx2",
                ("float16", 2): "tl::atomic_addx2", ("bfloat16", 2): "tl::atomic_addx2"}


def _atomic_vector(lw, src, dst, sd, dd, tile, kind) -> int:
    """Lanes per packed atomic add of a tile-level ``T.atomic_add`` from shared or global memory:
    4 float32 (one ``red.global.add.v4.f32`` on sm_90+) or 2 16-bit floats, where both sides are
    contiguous and aligned as a vector copy needs (``_vector_width``); 1 otherwise. Each lane
    stays an atomic add of its own element, so the sum is the same as element by element."""
    dtype = str(dst.dtype)
    if kind != "add" or str(src.dtype) != dtype or (dtype, 2) not in _PACKED_ADDS:
        return 1
    arch = getattr(lw, "arch", None)
    if arch is None or targets.parse_arch(arch) < (80 if dtype == "float32" else 90):
        return 1
    vec = min(_vector_width(lw, src, dst, sd, dd, tile), 4 if dtype == "float32" else 2)
    return vec if (dtype, vec) in _PACKED_ADDS else 1


def _threaded_vector_atomic(lw, src, dst, sd, dd, tile, vec, stmt):
    """``_threaded_atomic`` ``vec`` elements at a time: vector q = it * T + tid of the tile
    (row-major) is added by one thread with one packed atomic. ``_vector_width`` guarantees the
    innermost extent and a global tensor's rows are multiples of ``vec`` and every vector starts
    at a multiple of ``vec``, so a vector whose first element lies inside a tensor lies inside it
    whole: the bounds guard tests the first element only."""
    it, iters, q, total, pos = _vector_walk(tile, vec, lw.T, lw.tid)
    if iters > 1:
        lw.bind_loop(it, iters)
    s_idx, d_idx = _indices(src, sd, pos, lw), _indices(dst, dd, pos, lw)
    body = evaluate_extern(_PACKED_ADDS[(str(dst.dtype), vec)], _ptr(lw, dst, d_idx), _ptr(lw, src, s_idx),
                           span=stmt.span)
    return _atomic_loop(lw, body, it, iters, q, total, (src, s_idx, sd), (dst, d_idx, dd), stmt.span)
