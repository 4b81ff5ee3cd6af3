"""Line-staged tile atomics (``tl.enable_atomic_line_staging``, on by default since session 27; false
turns it off): attention backward 3-15 % faster on the H200 (RESULTS.md, sessions 26 and 27).

Contract: ``lower_atomic(lw, stmt)`` lowers ``T.atomic_add(dst, src)`` of a whole float32
fragment into a float32 global tensor on sm_90+ so that every warp instruction adds whole
128-byte lines, or returns None and the caller keeps ``lower_copy.lower_atomic`` (there:
``_fragment_vector_atomic``). An mma accumulator's column pairs, added in place, make
each warp instruction touch 8 rows x 32 bytes (attention backward's dQ: 64 lines per warp per
iteration, where upstream's example touches 16).

Each warp writes the registers it holds into its own region of a shared-memory staging tile (its
part of the fragment, row-major; rows padded against bank conflicts, ``_pad``), meets its lanes at
``__syncwarp()``, reads the region back four consecutive floats per lane and adds them with
``red.global.add.v4.f32`` (``tl::atomic_addx4``): 32 lanes x 16 bytes are 4 whole lines. A second
``__syncwarp()`` keeps the next writes (the next round, or the next execution of the statement)
behind every lane's reads. The region is the warp's own, so no block barrier is needed. A warp's
staging tile larger than ``BLOCK_BYTES`` goes in rounds of whole register rows. Each element is still added
once, by one atomic, so the sum is the same as the in-place lowering's up to the order of the adds.

It applies where the fragment's layout gives each warp a contiguous run of ``C`` columns of whole
16-byte vectors, at least half a line (``C % 4 == 0``, ``C >= 16``): every thread axis lies either
inside a warp or across warps, the axes a warp's own lanes and registers contribute to the last
dimension are its lowest digits, and replication is across warps only; the global tensor's rows
are whole 16-byte vectors (row strides and the last extent multiples of 4, the column start too).
With ``C`` a multiple of 32 each instruction adds 4 whole lines; narrower runs (GQA backward's
dQ, 24 columns a warp) add 16-byte pieces of about 8 lines an instruction, half the lines of the
in-place column pairs.
"""

from __future__ import annotations

import math

from tvm import tirx

from tilelang import targets
from tilelang.layout.axes import LOCAL
from tilelang.tir_utils import const_int, evaluate_extern, i32, seq, simplify, substitute_stmt
from tilelang.transform import lower_copy
from tilelang.transform.kernel import FRAGMENT_SCOPE, decode_region, scope_of

KEY = "tl.enable_atomic_line_staging"
DEFAULT = True          # the key's value where a kernel does not set it
WARP = 32
LINE = 32               # float32 elements per 128-byte line
VEC = 4                 # float32 lanes of one red.global.add.v4.f32
BLOCK_BYTES = 24 * 1024     # staging bytes per block at most; a larger fragment goes in rounds
PADS = (0, 4, 8, 12, 16, 20, 24, 28)    # row paddings tried (floats; 16-byte rows)
RESERVED = 1024         # shared memory the driver keeps per resident block


def lower_atomic(lw, stmt):
    """The staged lowering of a tile ``T.atomic_add`` from a fragment, or None where the key is
    off or it does not apply."""
    if not lw.configs.get(KEY, DEFAULT):
        return None
    args = stmt.value.args
    dst, src = decode_region(args[0]), decode_region(args[1])
    if str(args[2].value) != "add" or scope_of(src.buffer) != FRAGMENT_SCOPE:
        return None
    layout = lw.layouts.fragments[src.buffer]
    sd, dd, _ = lower_copy._match(lw, src, dst, stmt.span, "T.atomic_add")
    if not _applies(lw, layout, src, dst, sd, dd):
        return None
    shape = _warp_shape(layout, len(src.buffer.shape) - 1)
    if shape is None:
        return None
    plan = _plan(lw, layout, shape)
    if plan is None:
        return None
    return _emit(lw, layout, src, dst, sd, dd, shape, plan, stmt)


def _applies(lw, layout, src, dst, sd, dd) -> bool:
    """The statement-level conditions: a whole float32 fragment added into a float32 global
    tensor on sm_90+, by all the threads of warp-aligned ranges, into rows of whole vectors."""
    if not src.is_whole() or scope_of(dst.buffer) != "global":
        return False
    if str(src.dtype) != "float32" or str(dst.dtype) != "float32":
        return False
    arch = getattr(lw, "arch", None)
    if arch is None or targets.parse_arch(arch) < 90:
        return False
    region = getattr(lw, "thread_region", None)
    if lw.thread_guard is not None or lw.T % WARP or layout.num_threads != lw.T:
        return False    # (``__syncwarp`` needs every lane of the warp)
    if region is not None and region.first % WARP:
        return False
    if not sd or sd[-1] != len(src.buffer.shape) - 1 or dd[-1] != len(dst.buffer.shape) - 1:
        return False
    return _global_rows_aligned(lw, dst, dd)


def _global_rows_aligned(lw, dst, dd) -> bool:
    """Every vector of ``VEC`` columns the staged adds address is 16-byte aligned and lies inside
    the tensor whole or not at all (the bounds guard tests its first element)."""
    strides = lower_copy._strides(dst.buffer)
    last = const_int(dst.buffer.shape[-1])
    if strides[-1] != 1 or last is None or last % VEC:
        return False
    if any(s is None or s % VEC for s in strides[:-1]):
        return False
    ms = lw.an.modular_set(lw.rewrite(dst.starts[dd[-1]]))
    return ms.coeff % VEC == 0 and ms.base % VEC == 0


def _warp_shape(layout, col):
    """(lane axes, register axes, warp axes, row axes, C): the warp's part of the fragment as a
    dense [R, C] tile. ``row axes`` are the in-warp axes of the other dimensions, lanes first
    (the low digits of the staged row), then registers; None where the layout does not fit."""
    lanes, regs, warps = [], [], []
    for a in layout.axes:
        if a.kind == LOCAL:
            regs.append(a)
        elif a.stride >= WARP:
            warps.append(a)
        elif a.stride * a.extent <= WARP:
            lanes.append(a)
        else:
            return None     # an axis that spans lanes and warps
    if math.prod(a.extent for a in lanes) != WARP or any(a.dim is None for a in lanes + regs):
        return None         # (replicated within a warp, or a warp not filled)
    c = 1
    for a in sorted((a for a in lanes + regs if a.dim == col), key=lambda a: a.coef):
        if a.coef != c:
            return None     # the warp's columns are not one contiguous run
        c *= a.extent
    if c % VEC or c < LINE // 2:
        return None     # (staged rows of whole vectors, at least half a line each)
    rows = (sorted((a for a in lanes if a.dim != col), key=lambda a: a.stride)
            + sorted((a for a in regs if a.dim != col), key=lambda a: a.stride))
    return lanes, regs, warps, rows, c


def _plan(lw, layout, shape):
    """(rows per round, padded row length): the largest round of whole register rows whose
    staging (one region per warp) fits ``BLOCK_BYTES`` and the block's shared memory; None where
    none does."""
    _, _, _, rows, c = shape
    lane_rows = math.prod(a.extent for a in rows if a.kind != LOCAL)
    reg_rows = math.prod(a.extent for a in rows if a.kind == LOCAL)
    for g in sorted((g for g in range(1, reg_rows + 1) if reg_rows % g == 0), reverse=True):
        r = lane_rows * g
        if (r * c) % (WARP * VEC):
            continue
        pad = _pad(layout, shape, r)
        size = (lw.T // WARP) * r * (c + pad) * 4
        if size <= BLOCK_BYTES and _fits(lw, size):
            return r, c + pad
    return None


def _fits(lw, size) -> bool:
    if not lw.scratch_fits(size):
        return False
    if (getattr(lw, "min_blocks_per_sm", None) or 1) > 1:     # a block pair shares the SM's bytes
        spec = targets.gpu_spec(lw.arch)
        end = -(-lw.smem_bytes // 128) * 128 + size
        return spec is not None and 2 * (end + RESERVED) <= spec["smem_per_sm"]
    return True


def _pad(layout, shape, r):
    """Row padding (floats) with the fewest shared-memory wavefronts for the warp's writes: lane
    ``l``'s register vector lands at ``(row % r) * (C + pad) + col``."""
    regs, c = shape[1], shape[4]
    vec = _write_vector(regs, shape)
    best = None
    for pad in PADS:
        waves = 0
        for base in range(0, layout.local_size, vec):
            words = [_numeric_slot(shape, lane, base, r, c + pad) for lane in range(WARP)]
            per = WARP // vec if vec > 1 else WARP     # lanes per wavefront of a vec-wide access
            for p in range(0, WARP, per):
                banks = {}
                for w in words[p:p + per]:
                    for k in range(vec):
                        banks.setdefault((w + k) % 32, set()).add(w + k)
                waves += max(len(s) for s in banks.values())
        if best is None or waves < best[0]:
            best = (waves, pad)
    return best[1]


def _numeric_slot(shape, lane, reg, r, stride):
    """Staging word of lane ``lane``'s register ``reg`` (ints): ``_writes``' address, evaluated."""
    def value_of(a):
        return lane if a.kind != LOCAL else reg

    return (_staged_row(shape[3], value_of) % r) * stride + _staged_col(shape, value_of)


def _digit(a, v):
    """Axis ``a``'s digit of the lane or register index ``v`` (int or expression)."""
    if isinstance(v, int):
        return (v // a.stride) % a.extent
    return tirx.floormod(tirx.floordiv(v, i32(a.stride)), i32(a.extent))


def _staged_row(rows, value_of):
    """The staged row number from the row axes' digits (mixed radix, ``rows`` low digit first);
    ``value_of(axis)`` is the lane (thread axes) or register (local axes) index, int or expression."""
    out, scale = 0, 1
    for a in rows:
        out = out + _digit(a, value_of(a)) * scale
        scale *= a.extent
    return out


def _staged_col(shape, value_of):
    """The column in the warp's staged row: the in-warp digits of the last dimension's axes."""
    col = 0
    for a in shape[0] + shape[1]:
        if a not in shape[3]:
            col = col + _digit(a, value_of(a)) * a.coef
    return col


def _write_vector(regs, shape):
    """Registers written per store: the run of consecutive registers holding consecutive columns."""
    col_axes = [a for a in regs if a not in shape[3] and a.stride == 1 and a.coef == 1]
    if not col_axes:
        return 1
    vec = col_axes[0].extent
    vec = vec & -vec
    return min(vec, VEC)


def _emit(lw, layout, src, dst, sd, dd, shape, plan, stmt):
    """Per round: the writes, ``__syncwarp()``, the packed adds, ``__syncwarp()``; warps holding
    a replica of the elements (``layout.replication``) skip it all."""
    rows = shape[3]
    r, stride = plan
    rounds = math.prod(a.extent for a in rows) // r
    share = ("line_stage", str(lw.tid), lw.T)
    stage = lw.scratch(f"{src.buffer.name}_line_stage", (lw.T // WARP) * r * stride, "float32", share=share)
    lane = simplify(tirx.floormod(lw.tid, i32(WARP)))
    region = simplify(tirx.floordiv(lw.tid, i32(WARP)) * (r * stride))
    sync = evaluate_extern("__syncwarp")
    body = []
    for k in range(rounds):
        body += [_writes(lw, layout, src, shape, r, stride, k, stage, region, stmt),
                 sync,
                 _reads(lw, dst, sd, dd, len(src.buffer.shape), shape, (r, stride, k), stage, region, lane,
                        stmt),
                 sync]
    out = seq(body)
    if layout.replication > 1:      # (warp-level replicas: whole warps skip, __syncwarp included)
        out = tirx.IfThenElse(tirx.EQ(layout.replica_index(lw.tid), i32(0)), out, None)
    return out


def _writes(lw, layout, src, shape, r, stride, k, stage, region, stmt):
    """Round ``k``: each thread stores its registers of the round's rows into the warp's region."""
    _, regs, _, rows, _ = shape
    vec = _write_vector(regs, shape)
    w, lane = tirx.Var("w", "int32"), tirx.Var("l", "int32")
    lw.bind_loop(w, layout.local_size // vec)
    base = w * vec

    def value_of(a):
        return lw.tid if a.kind != LOCAL else base

    row, col = _staged_row(rows, value_of), _staged_col(shape, value_of)
    at = simplify(region + (row - k * r) * stride + col + lane)
    store = tirx.BufferStore(stage, tirx.BufferLoad(lw.frag[src.buffer], [base + lane]), [at], span=stmt.span)
    body = lower_copy._lanes(lane, vec, store)
    if r != math.prod(a.extent for a in rows):      # rounds: only the registers of round k's rows
        lane_rows = math.prod(a.extent for a in rows if a.kind != LOCAL)
        reg_row = _staged_row([a for a in rows if a.kind == LOCAL], lambda a: base)
        body = tirx.IfThenElse(tirx.EQ(simplify(tirx.floordiv(reg_row, i32(r // lane_rows))), i32(k)), body, None)
    n = layout.local_size // vec
    return tirx.For(w, i32(0), i32(n), tirx.ForKind.SERIAL, body, annotations={"pragma_unroll": True},
                    span=stmt.span)


def _reads(lw, dst, sd, dd, ndim, shape, round_, stage, region, lane, stmt):
    """Round ``k``: lane ``l`` adds floats ``4l .. 4l + 3`` of each 128 consecutive staged
    elements to their place in ``dst`` with one packed atomic (``C % 32 == 0``: a quarter-warp
    adds one whole line)."""
    _, _, warps, rows, c = shape
    r, stride, k = round_
    j = tirx.Var("j", "int32")
    n = r * c // (WARP * VEC)
    lw.bind_loop(j, n)
    p = j * (WARP * VEC) + lane * VEC
    row, col = tirx.floordiv(p, i32(c)) + k * r, tirx.floormod(p, i32(c))
    idx = [i32(0) for _ in range(ndim)]
    scale = 1
    for a in rows:      # the staged row's digits back to the fragment's indices
        idx[a.dim] = idx[a.dim] + tirx.floormod(tirx.floordiv(row, i32(scale)), i32(a.extent)) * a.coef
        scale *= a.extent
    idx[sd[-1]] = idx[sd[-1]] + col
    for a in warps:     # the warp's own offset
        if a.dim is not None:
            idx[a.dim] = idx[a.dim] + tirx.floormod(tirx.floordiv(lw.tid, i32(a.stride)), i32(a.extent)) * a.coef
    d_idx = lower_copy._indices(dst, dd, [simplify(idx[d]) for d in sd], lw)
    src_at = simplify(region + tirx.floordiv(p, i32(c)) * stride + tirx.floormod(p, i32(c)))
    body = evaluate_extern("tl::atomic_addx4", lower_copy._ptr(lw, dst, d_idx),
                           tirx.address_of(tirx.BufferLoad(stage, [src_at])), span=stmt.span)
    guard = lower_copy._in_bounds(lw, dst, d_idx, dd)
    if guard is not None:
        body = tirx.IfThenElse(guard, body, None)
    if n == 1:
        return substitute_stmt(body, {j: i32(0)})
    return tirx.For(j, i32(0), i32(n), tirx.ForKind.SERIAL, body, annotations={"pragma_unroll": True},
                    span=stmt.span)
