"""Lowering of ``T.reduce_*`` and ``T.cumsum``, and of the fragment moves through shared memory they
share a workspace with: ``convert_layout``, a ``T.copy`` between two fragments of different layouts.

A reduction of fragment ``src`` over ``dim`` runs in three steps: each thread folds the registers
it holds along ``dim`` (from 8 registers on, into ``FOLD_LANES`` independent partial results
combined as a tree, so the dependency chain is a quarter as long; in a loop whose live fragments
overflow the register file, FOLD_LANES chains in all rather than per output register,
``_fold_lanes``; two registers per packed ``tl::add2`` / ``max2`` / ``min2`` where the type and
target have pair instructions, see ``_pair_fold``); threads of the same warp that hold other parts
of the row combine through an XOR-shuffle butterfly (``tl::warp_allreduce``; 8 or more rows a thread
over 16 or 32 lanes all at once, ``tl::warp_allreduce_rows``, see ``_rows_at_once``); threads in other
warps combine through a shared-memory workspace. Every replica of the result ends up with the full value, which is what
the replicated output layout (``drop_dim``) promises. Thread-private arrays (``T.alloc_local`` /
``T.alloc_var`` operands) are folded by each thread on its own.

Reducer epochs (``T.alloc_reducer``) take one of two plans, chosen by layout inference
(``layout_inference.ReducerPlan``): the narrow plan (partials laid out like the update loop with
the reduced dimensions dropped, every loop replica folding its own, the finalize all-reducing
only the threads of one element, 16-bit sums in two ``_pk`` lanes) or the whole-block plan
(replicated partials, updates on one replica, an all-reduce over every thread).
"""

from __future__ import annotations

import math
from collections import namedtuple

from tvm import ir, tirx

from tilelang import targets
from tilelang.language.dtypes import is_narrow_float, nbytes
from tilelang.language.intrinsics import _packed as packed_call  # T.add2 & co.: tl::add2<float2>(...)
from tilelang.layout import drop_dim
from tilelang.layout.fragment import LOCAL, THREAD
from tilelang.tir_utils import const_int, evaluate_extern, i32, seq, simplify, substitute, substitute_stmt, walk_stmts
from tilelang.transform import thread_sync
from tilelang.transform.attention_schedule import REGISTER_FILE, loop_fragment_registers
from tilelang.transform.kernel import (FRAGMENT_SCOPE, SHARED_SCOPES, LoweringError, buffer_accesses, decode_region,
                                       is_parallel_nest, op_name, scope_of)

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
# Live fragment registers per thread in the loop around a reduction (32-bit words, as
# ``attention_schedule.loop_fragment_registers`` counts them) above which the register file is
# oversubscribed: the fold then keeps FOLD_LANES independent chains in all, not per output register
# (``_fold_lanes``).
FOLD_REGISTER_BUDGET = REGISTER_FILE


def _fold_lanes(lw, n_out: int) -> int:
    """Independent partial results per output register. FOLD_LANES shortens each dependency chain
    while registers are to spare. In a loop whose live fragments already exceed the register file
    (a 128x128 attention tile on one warpgroup: S, P and O take 320 registers of 255) every extra
    partial is one more spill, and ``n_out`` output registers are ``n_out`` independent chains
    already: the lanes shrink to FOLD_LANES // n_out (at least one)."""
    if n_out <= 1 or not lw.loops:
        return FOLD_LANES
    loop = lw.loops[-1]
    if loop not in lw.loop_words:
        lw.loop_words[loop] = loop_fragment_registers(lw.info.body, loop, lw.T)
    if lw.loop_words[loop] <= FOLD_REGISTER_BUDGET:
        return FOLD_LANES
    return max(1, FOLD_LANES // n_out)


def _init(kind, dtype):
    if kind in ("sum", "abssum", "absmax", "bitor", "bitxor"):
        return tirx.const(0, dtype)
    if kind == "bitand":  # all bits set
        return tirx.max_value(dtype) if dtype.startswith("uint") else tirx.const(-1, dtype)
    if dtype == "bfloat16":   # TIR has no bfloat16 infinity: its bits (0xff80 is -inf, 0x7f80 +inf)
        return tirx.reinterpret(dtype, tirx.const(0xFF80 if kind == "max" else 0x7F80, "uint16"))
    if kind == "max":
        return tirx.min_value(dtype) if not dtype.startswith(("float", "bfloat")) else -tirx.infinity(dtype)
    return tirx.max_value(dtype) if not dtype.startswith(("float", "bfloat")) else tirx.infinity(dtype)


def _acc_dtype(dtype: str) -> str:
    """The type a reduction accumulates in: float32 for 8-, 6- and 4-bit floats (CUDA's
    ``__nv_fp8_*`` have no arithmetic, and a running sum rounded to 3 mantissa bits at every step
    loses the row), else the output's own type."""
    return "float32" if is_narrow_float(dtype) else dtype


def _digit(x, stride, extent):
    return tirx.floormod(tirx.floordiv(x, i32(stride)), i32(extent))


def lower_reduce(lw, stmt):
    args = stmt.value.args
    src, dst = decode_region(args[0]), decode_region(args[1])
    kind, dim, clear = str(args[2].value), int(args[3].value), bool(int(args[4].value))
    batch, nan = (int(args[5].value), bool(int(args[6].value))) if len(args) > 6 else (1, False)
    fadd2 = bool(int(args[7].value)) if len(args) > 7 else True
    if kind not in _OPS:
        raise LoweringError("TL0002", f"unknown reduction '{kind}'", stmt.span)
    out_dtype = str(dst.buffer.dtype)
    dtype = _acc_dtype(out_dtype)
    functor, combine = _OPS[kind]
    if nan and kind in ("max", "min", "absmax") and dtype in ("float16", "bfloat16"):
        functor, combine = _NAN_OPS[kind]
    elif kind in ("max", "min", "absmax") and dtype == "float16":
        # the half-precision intrinsics (a NaN operand loses, as with fmaxf)
        combine = _nan_combine("__hmin" if kind == "min" else "__hmax")
    if scope_of(src.buffer) == "local" and scope_of(dst.buffer) == "local":
        return _reduce_local(lw, stmt, src, dst, kind, dim, clear, combine,
                             _pair_fold(lw, kind, dtype, str(src.buffer.dtype), nan, fadd2, [], [_UNIT_AXIS]))
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
    pair = _pair_fold(lw, kind, dtype, str(src.buffer.dtype), nan, fadd2, kept, red)
    lanes = _fold_lanes(lw, n_out)
    if pair is not None:
        stmts.append(_for(u, n_out, _fold_pairs(pair, src_local, src_index, u, n_red, combine, acc,
                                                 dst.buffer.name, lanes)))
    elif n_red >= 2 * lanes:
        # ``lanes`` independent partial results, combined as a tree at the end: dependency
        # chains of n_red / lanes instead of n_red (a softmax row of 32 registers: 10 dependent
        # FMNMX instead of 32)
        part = tirx.decl_buffer((lanes,), dtype, f"{dst.buffer.name}_part", scope="local")
        lane = tirx.floormod(w, i32(lanes))
        w0 = tirx.Var("w0", "int32")
        first = tirx.For(w0, i32(0), i32(lanes), tirx.ForKind.SERIAL,
                         tirx.BufferStore(part, substitute(value, {w: w0}), [w0]),
                         annotations={"pragma_unroll": True})
        rest = tirx.For(w, i32(lanes), i32(n_red - lanes), tirx.ForKind.SERIAL,
                        tirx.BufferStore(part, combine(tirx.BufferLoad(part, [lane]), value), [lane]),
                        annotations={"pragma_unroll": True})
        level = [tirx.BufferLoad(part, [i32(i)]) for i in range(lanes)]
        while len(level) > 1:
            level = [combine(level[i], level[i + 1]) for i in range(0, len(level), 2)]
        stmts.append(_for(u, n_out, seq([tirx.AllocBuffer(part), first, rest,
                                         tirx.BufferStore(acc, level[0], [u])])))
    else:
        fold = tirx.For(w, i32(0), i32(n_red), tirx.ForKind.SERIAL,
                        tirx.BufferStore(acc, combine(tirx.BufferLoad(acc, [u]), value), [u]),
                        annotations={"pragma_unroll": True})
        stmts.append(_for(u, n_out, seq([tirx.BufferStore(acc, _init(kind, dtype), [u]), fold])))
    reduced = [a for a in F.thread_axes if a.dim == dim and a.extent > 1]
    in_warp, cross = _split_thread_axes(reduced)
    # A block smaller than a warp shuffles among its own lanes only (a mask over the live lanes).
    mask = f", {hex((1 << lw.T) - 1)}u" if lw.T < 32 else ""
    if cross and n_out == 1 and len(reduced) == 1 and _block_barrier_only(lw) and _pow2(reduced[0].extent) \
            and _pow2(reduced[0].stride):
        # one result per thread, one group of threads spanning warps: the device library's
        # all-reduce (in-warp shuffles, then the warps' partials through a shared workspace;
        # power-of-two groups: others take the general path below)
        axis = reduced[0]
        ws = lw.scratch(f"{dst.buffer.name}_red_ws", lw.T, dtype)
        fn = f"tl::AllReduce<{functor}, {axis.extent}, {axis.stride}>::run"
        reduced_value = tirx.call_extern(dtype, fn, tirx.BufferLoad(acc, [i32(0)]),
                                         tirx.address_of(tirx.BufferLoad(ws, [i32(0)])), lw.info.tid)
        stmts.append(tirx.BufferStore(acc, reduced_value, [i32(0)]))
        in_warp, cross = [], []
    for stride, extent in in_warp:
        if _rows_at_once(n_out, extent):
            stmts.append(evaluate_extern(f"tl::warp_allreduce_rows<{functor}, {stride}, {stride * extent}, "
                                         f"{n_out}{mask}>", tirx.address_of(tirx.BufferLoad(acc, [i32(0)]))))
            continue
        shuffled = tirx.call_extern(dtype, f"tl::warp_allreduce<{functor}, {stride}, {stride * extent}{mask}>",
                                    tirx.BufferLoad(acc, [u]))
        stmts.append(_for(u, n_out, tirx.BufferStore(acc, shuffled, [u])))
    if cross:
        stmts.extend(_cross_warp(lw, acc, n_out, cross, combine, dtype, dst.buffer.name))
    if stmt in lw.layouts.conversions:
        keep = len(dst.buffer.shape) == len(F.shape)
        stmts.extend(_converted_result(lw, acc, drop_dim(F, dim, keep_unit=keep), dst, dst_local, G, clear, combine,
                                       dtype, out_dtype))
        return seq(stmts)
    # Write the result: the output fragment's registers follow the kept axes' order.
    result = _into_output(tirx.BufferLoad(acc, [u]), tirx.BufferLoad(dst_local, [u]), clear, combine, dtype,
                          out_dtype)
    stmts.append(_for(u, n_out, tirx.BufferStore(dst_local, result, [u], span=stmt.span)))
    if n_out != max(G.local_size, 1):
        raise LoweringError("TL0201", f"reduction output '{dst.buffer.name}' holds {G.local_size} registers "
                            f"per thread, the reduction produces {n_out}", stmt.span)
    return seq(stmts)


def _into_output(value, here, clear, combine, dtype, out_dtype):
    """A reduction's result ``value`` (accumulated in ``dtype``) as the output element: combined with
    the output's element ``here`` unless ``clear``, in ``dtype``, then rounded to ``out_dtype``."""
    if not clear:
        value = combine(here if dtype == out_dtype else tirx.Cast(dtype, here), value)
    return value if dtype == out_dtype else tirx.Cast(out_dtype, value)


def _converted_result(lw, acc, natural, dst, dst_local, G, clear, combine, dtype, out_dtype):
    """The reduction's result, held in ``acc`` as laid out by ``natural`` (``drop_dim`` of the
    source), moved into ``dst`` whose layout ``G`` was fixed elsewhere (``Layouts.conversions``):
    one replica of each element stored at its row-major position in a shared workspace, a barrier,
    and every thread loads the elements ``G`` gives it (combined with what ``dst`` holds unless
    ``clear``). The barrier before the stores keeps them off an earlier use of the workspace."""
    shape = [const_int(n) for n in G.shape]
    sync = thread_sync.sync_stmt(lw, writes=())
    scratch = lw.scratch(f"{dst.buffer.name}_red_convert", math.prod(shape), dtype, share=_workspace_share(lw, sync))
    at = _row_major(scratch, shape)
    store = _layout_io(lw, natural, acc, at, load=False, one_replica=True)
    v = tirx.Var("v", "int32")
    target, idx = at(G.index(lw.tid, v))
    value = _into_output(tirx.BufferLoad(target, idx), tirx.BufferLoad(dst_local, [v]), clear, combine, dtype,
                         out_dtype)
    load = tirx.For(v, i32(0), i32(max(G.local_size, 1)), tirx.ForKind.SERIAL,
                    tirx.BufferStore(dst_local, value, [v]), annotations={"pragma_unroll": True})
    return [sync, store, sync, load]


# The in-thread fold two registers at a time (src/tl/packed.h): 16-bit floats on every target
# (bfloat16 from sm_80, where the bf16x2 instructions exist), float32 from sm_100 (the .f32x2
# instructions; a sum or abssum only while ``enable_fadd2`` is not turned off).
_PAIR_OPS = {"sum": "add2", "abssum": "add2", "max": "max2", "absmax": "max2", "min": "min2"}


def _pair_fold(lw, kind, dtype, src_dtype, nan, fadd2, kept, red):
    """The pair combiner ``(a, b) -> a op b`` on ``<dtype>x2`` values (and whether each pair is
    taken by its absolute value) where the fold can read the reduced registers two at a time, else
    None. Pairs are registers ``2k, 2k + 1`` of the innermost reduced local axis: it must have
    stride 1 and an even extent, every other local stride even (each pair starts 8-/4-byte
    aligned)."""
    if kind not in _PAIR_OPS or src_dtype != dtype or not red:
        return None
    arch = targets.parse_arch(getattr(lw, "arch", None) or "sm_90a")
    if dtype == "float16" or (dtype == "bfloat16" and arch >= 80):
        pass
    elif dtype == "float32" and arch >= 100 and (fadd2 or kind not in ("sum", "abssum")):
        pass
    else:
        return None
    if red[0].stride != 1 or red[0].extent % 2 or any(a.stride % 2 for a in list(kept) + list(red[1:])):
        return None
    name = _PAIR_OPS[kind]
    if nan and dtype != "float32" and kind in ("max", "min", "absmax"):
        name += "_nan"
    return (f"{dtype}x2", lambda a, b: packed_call(name, a, b), kind in ("abssum", "absmax"))


def _fold_pairs(pair, src_local, src_index, u, n_red, combine, acc, name, lanes=FOLD_LANES):
    """Fold output register ``u`` two registers at a time into ``acc[u]``: from ``2 * lanes``
    registers on, ``lanes / 2`` independent pair partials combined as a tree (the scalar fold's
    chain length), then the two lanes of the last pair."""
    vtype, combine2, absolute = pair
    n_pairs = n_red // 2
    parts = max(1, lanes // 2) if n_red >= 2 * lanes else 1
    part = tirx.decl_buffer((parts,), vtype, f"{name}_pack", scope="local")

    def load(k):
        value = tirx.BufferLoad(src_local, [tirx.Ramp(src_index(u, k * 2), i32(1), 2)])
        return packed_call("abs2", value) if absolute else value

    k, k0 = tirx.Var("k", "int32"), tirx.Var("k0", "int32")
    slot = tirx.floormod(k, i32(parts)) if parts > 1 else i32(0)
    first = tirx.For(k0, i32(0), i32(parts), tirx.ForKind.SERIAL, tirx.BufferStore(part, load(k0), [k0]),
                     annotations={"pragma_unroll": True}) if parts > 1 else \
        tirx.BufferStore(part, load(i32(0)), [i32(0)])
    step = tirx.BufferStore(part, combine2(tirx.BufferLoad(part, [slot]), load(k)), [slot])
    rest = None
    if n_pairs == parts + 1:
        rest = substitute_stmt(step, {k: i32(parts)})
    elif n_pairs > parts:
        rest = tirx.For(k, i32(parts), i32(n_pairs - parts), tirx.ForKind.SERIAL, step,
                        annotations={"pragma_unroll": True})
    level = [tirx.BufferLoad(part, [i32(i)]) for i in range(parts)]
    while len(level) > 1:
        level = [combine2(level[i], level[i + 1]) for i in range(0, len(level), 2)]
    tree = tirx.BufferStore(part, level[0], [i32(0)]) if parts > 1 else None
    lanes = [tirx.Shuffle([tirx.BufferLoad(part, [i32(0)])], [tirx.IntImm("int32", i)]) for i in (0, 1)]
    return seq([tirx.AllocBuffer(part), first, rest, tree, tirx.BufferStore(acc, combine(*lanes), [u])])


_UNIT_AXIS = namedtuple("_UnitAxis", "stride extent")(1, 2)   # (_pair_fold's layout test, for local arrays)


def _reduce_local(lw, stmt, src, dst, kind, dim, clear, combine, pair):
    """A reduction of a thread-private array into another (``T.alloc_local`` / ``T.alloc_var``):
    every thread folds its own registers, no exchange. With ``pair`` (see ``_pair_fold``) a
    clearing reduction of an even extent folds two elements at a time: a vector read where the
    reduced dimension is the innermost one (and each pair starts aligned), else two reads
    side by side."""
    shape = [const_int(e) for e in src.extents]
    dshape = [const_int(e) for e in dst.extents]
    if None in shape or None in dshape:
        raise LoweringError("TL0002", "T.reduce_* of local arrays needs constant extents", stmt.span)
    if dim < 0:
        dim += len(shape)
    keep = len(dshape) == len(shape)
    expect = [n for d, n in enumerate(shape) if d != dim] if not keep else [
        1 if d == dim else n for d, n in enumerate(shape)]
    if dshape != expect and not (not expect and dshape == [1]):
        raise LoweringError("TL0604", f"reduction of '{src.buffer.name}' {shape} over dim {dim} gives shape "
                            f"{expect}, but '{dst.buffer.name}' has shape {dshape}", stmt.span)
    dtype = str(dst.buffer.dtype)
    other = [d for d in range(len(shape)) if d != dim]
    outs = [tirx.Var(f"i{d}", "int32") for d in other]
    r = tirx.Var("r", "int32")

    def src_at(x):
        idx = [x if d == dim else outs[other.index(d)] for d in range(len(shape))]
        return [simplify(s0 + i) for s0, i in zip(src.starts, idx)]

    didx = [i32(0) if d == dim else outs[other.index(d)] for d in range(len(shape))] if keep else (outs or [i32(0)])
    didx = [simplify(s0 + i) for s0, i in zip(dst.starts, didx)] if len(dst.starts) == len(didx) else didx
    n = shape[dim]

    def value(x):
        v = tirx.BufferLoad(src.buffer, src_at(x))
        v = tirx.Cast(dtype, v) if str(src.buffer.dtype) != dtype else v
        if kind not in ("abssum", "absmax"):
            return v
        wide = _acc_dtype(dtype)   # fp8 has no abs of its own
        return tirx.abs(v) if wide == dtype else tirx.Cast(dtype, tirx.abs(tirx.Cast(wide, v)))

    here = tirx.BufferLoad(dst.buffer, didx)
    if pair is not None and clear and n % 2 == 0:
        vtype, combine2, absolute = pair
        strides = [math.prod(src.buffer.shape[d + 1:]) for d in range(len(shape))]
        base = simplify(sum((st * s0 for st, s0 in zip(strides, src.starts)), i32(0)))
        aligned = dim == len(shape) - 1 and const_int(base) is not None and const_int(base) % 2 == 0 and \
            all(const_int(st) % 2 == 0 for d, st in enumerate(strides) if d != dim)

        def load(k):
            if aligned:
                idx = src_at(k * 2)
                idx[-1] = tirx.Ramp(idx[-1], i32(1), 2)
                v = tirx.BufferLoad(src.buffer, idx)
            else:
                v = tirx.Shuffle([tirx.BufferLoad(src.buffer, src_at(k * 2)),
                                  tirx.BufferLoad(src.buffer, src_at(k * 2 + 1))], [i32(0), i32(1)])
            return packed_call("abs2", v) if absolute else v

        part = tirx.decl_buffer((1,), vtype, f"{dst.buffer.name}_pack", scope="local")
        acc = tirx.BufferLoad(part, [i32(0)])
        k = tirx.Var("k", "int32")
        step = tirx.BufferStore(part, combine2(acc, load(k)), [i32(0)])
        lanes = [tirx.Shuffle([acc], [tirx.IntImm("int32", i)]) for i in (0, 1)]
        body = seq([tirx.AllocBuffer(part), tirx.BufferStore(part, load(i32(0)), [i32(0)]),
                    (tirx.For(k, i32(1), i32(n // 2 - 1), tirx.ForKind.SERIAL, step,
                              annotations={"pragma_unroll": True}) if n > 2 else None),
                    tirx.BufferStore(dst.buffer, combine(*lanes), didx, span=stmt.span)])
    else:
        fold = tirx.For(r, i32(0), i32(n), tirx.ForKind.SERIAL,
                        tirx.BufferStore(dst.buffer, combine(here, value(r)), didx),
                        annotations={"pragma_unroll": True})
        body = seq([tirx.BufferStore(dst.buffer, _init(kind, dtype), didx) if clear else None, fold])
    for d, v in reversed(list(zip(other, outs))):
        body = tirx.For(v, i32(0), i32(shape[d]), tirx.ForKind.SERIAL, body, annotations={"pragma_unroll": True})
    return body


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
    out_dtype = str(dst.buffer.dtype)
    dtype = _acc_dtype(out_dtype)
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
    result = _into_output(a0, tirx.BufferLoad(d_buf, d_idx), clear, combine, dtype, out_dtype)
    # start from the row's first element: no identity needed (bfloat16 has no TIR infinity)
    body = seq([tirx.AllocBuffer(acc), tirx.BufferStore(acc, substitute(val, {k: i32(0)}), [i32(0)]),
                tirx.For(k, i32(1), i32(shape[dim] - 1), tirx.ForKind.SERIAL,
                         tirx.BufferStore(acc, combine(a0, val), [i32(0)])) if shape[dim] > 1 else None,
                tirx.BufferStore(d_buf, result, d_idx)])
    body = tirx.IfThenElse(tirx.LT(row, i32(rows)), body, None) if rows % T else body
    stmts += [sync, body if rounds == 1 else tirx.For(r0, i32(0), i32(rounds), tirx.ForKind.SERIAL, body), sync]
    if scope_of(dst.buffer) == FRAGMENT_SCOPE:
        stmts.append(_fragment_io(lw, dst.buffer, d_at, load=True))
    return seq(stmts)


def _block_barrier_only(lw) -> bool:
    """Whether this block synchronises with a plain ``__syncthreads()`` (no warp specialisation,
    no warp-group role, no async-proxy fence), as ``tl::AllReduce`` does."""
    from tilelang.transform import user_ws

    return (getattr(lw, "ws", None) is None and user_ws.role_sync(lw) is None
            and not getattr(lw, "thread_conds", None)      # (under `if tx < n:`: named barriers)
            and not lw.layouts.wgmma and lw.T % 32 == 0)


def _pow2(n: int) -> bool:
    return n > 0 and not n & (n - 1)


def _rows_at_once(n_rows: int, lanes: int) -> bool:
    """Whether ``n_rows`` results a thread holds, each all-reduced over ``lanes`` lanes of a warp,
    go through one ``tl::warp_allreduce_rows`` (rows halved between partners, then gathered back)
    rather than one butterfly each: from 8 rows over 16 lanes on, where it takes under half the
    shuffles (16 rows over 32 lanes: 31 instead of 80) for a chain of dependent shuffles about
    twice as long. Fewer rows save too little for that chain where the reduction is the kernel's
    last step (dsv4_act_quant_fp8's 4 rows over 16 lanes: 0.7 % slower on an H100) or for the
    selects it adds (an attention row's 2 rows over a quad)."""
    return n_rows >= 8 and _pow2(n_rows) and lanes >= 16


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
    """Combine partial results across warps through a shared-memory workspace: all ``n_out``
    registers in one exchange (two barriers), or, where a workspace of ``T * n_out`` elements
    would take the block past its shared-memory budget, one register at a time through ``T``
    elements (two barriers each), as upstream's reductions do."""
    T = lw.T
    sync = thread_sync.sync_stmt(lw, writes=())    # (it orders the workspace only: no proxy fence)
    # Every use below writes the workspace after `sync` and reads it before the next one: a later
    # reduction of the same threads may take its bytes where fresh ones would not fit.
    share = _workspace_share(lw, sync)
    batched = n_out == 1 or _scratch_fits(lw, T * n_out, dtype, share)
    scratch = lw.scratch(f"{name}_red_ws", T * n_out if batched else T, dtype, share=share)
    u = tirx.Var("u", "int32")
    slot = u * T if batched else i32(0)
    write = tirx.BufferStore(scratch, tirx.BufferLoad(acc, [u]), [slot + lw.tid])
    out = [sync, _for(u, n_out, write), sync] if batched else []
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
    first = tirx.BufferLoad(scratch, [slot + simplify(_subst(partner, c, 0))])
    body = seq([
        tirx.BufferStore(total, first, [u]),
        tirx.For(c, i32(1), i32(combos - 1), tirx.ForKind.SERIAL,
                 tirx.BufferStore(total, combine(tirx.BufferLoad(total, [u]),
                                                 tirx.BufferLoad(scratch, [slot + simplify(partner)])), [u]),
                 annotations={"pragma_unroll": True}) if combos > 1 else None,
        tirx.BufferStore(acc, tirx.BufferLoad(total, [u]), [u]),
    ])
    out += [tirx.AllocBuffer(total), _for(u, n_out, body if batched else seq([sync, write, sync, body]))]
    return out


def _workspace_share(lw, sync) -> tuple:
    """The ``Lowerer.scratch(share=)`` key of a workspace the current threads write after ``sync``
    and read before their next one: their barrier, thread region, warp-group role and guards."""
    return (str(sync), id(getattr(lw, "thread_region", None)), getattr(lw, "role_block", None),
            tuple(str(c) for c in getattr(lw, "thread_conds", None) or ()))


def _scratch_fits(lw, elems, dtype, share=None):
    """Whether ``elems`` more elements of ``dtype`` carved after what the block already uses stay
    within the target's shared memory per block (or, with ``share``, fit on the bytes of an
    earlier workspace of the same threads: ``Lowerer.scratch``)."""
    return lw.scratch_fits(elems * nbytes(dtype), share)


def _subst(expr, var, value):
    return substitute(expr, {var: i32(value)})


def convert_layout(lw, stmt):
    """``T.copy`` between two whole fragments of different layouts (``Layouts.conversions``): every
    thread stores the elements of ``src`` it holds (one replica of each) into a shared workspace
    at their row-major positions, converted to ``dst``'s type, and after a barrier loads the
    elements of ``dst`` it holds; the barrier before the stores keeps them off a previous use of
    the workspace, whose bytes a later conversion or cross-warp reduction of the same threads may
    take (``Lowerer.scratch(share=)``)."""
    src, dst = decode_region(stmt.value.args[0]), decode_region(stmt.value.args[1])
    s_shape, d_shape = (list(lw.layouts.fragments[r.buffer].shape) for r in (src, dst))
    sync = thread_sync.sync_stmt(lw, writes=())
    scratch = lw.scratch(f"{dst.buffer.name}_convert", math.prod(s_shape), str(dst.dtype),
                         share=_workspace_share(lw, sync))
    return seq([sync, _fragment_io(lw, src.buffer, _row_major(scratch, s_shape), load=False, one_replica=True),
                sync, _fragment_io(lw, dst.buffer, _row_major(scratch, d_shape), load=True)])


def lower_cumsum(lw, stmt):
    """Inclusive scan along ``dim``: rows spread over threads, each row scanned serially in
    shared memory, or, with fewer rows than threads, a warp a row, 32 elements at a time
    (``tl.enable_warp_scan``, on by default). Fragment operands are staged through a shared workspace (each thread writes
    the elements it holds, then reads back the ones it holds)."""
    args = stmt.value.args
    src, dst = decode_region(args[0]), decode_region(args[1])
    dim, reverse = int(args[2].value), bool(int(args[3].value))
    kind = str(args[4].value) if len(args) > 4 else "sum"   # T.cummax passes "max"
    for r in (src, dst):
        shared = scope_of(r.buffer) in SHARED_SCOPES
        if not (shared or scope_of(r.buffer) == FRAGMENT_SCOPE and r.is_whole()):
            raise LoweringError("TL0002", "T.cumsum works on shared-memory buffers (or regions of them) and whole "
                                "fragments", stmt.span)
        if shared and None in [const_int(e) for e in r.extents]:
            raise LoweringError("TL0002", "T.cumsum over a shared-memory region needs constant extents", stmt.span)
    shape = _region_shape(src)
    if _region_shape(dst) != shape:
        raise LoweringError("TL0002", f"T.cumsum: source region {shape} and destination region "
                            f"{_region_shape(dst)} differ in shape", stmt.span)
    if dim < 0:
        dim += len(shape)
    sync = thread_sync.sync_stmt(lw)
    stmts = [sync]
    s_at = _scan_operand(lw, src, shape, "src", stmts)
    d_at = _scan_operand(lw, dst, shape, "dst", [])
    stmts += [sync, _scan(lw, shape, dim, reverse, s_at, d_at, str(src.buffer.dtype), str(dst.buffer.dtype), kind),
              sync]
    if scope_of(dst.buffer) == FRAGMENT_SCOPE:
        stmts.append(_fragment_io(lw, dst.buffer, d_at, load=True))
    return seq(stmts)


def _region_shape(region):
    """The extents of a scan operand: a fragment's shape, a shared region's extents."""
    if scope_of(region.buffer) == FRAGMENT_SCOPE:
        return [const_int(x) for x in region.buffer.shape]
    return [const_int(e) for e in region.extents]


def _scan_operand(lw, region, shape, role, stmts):
    """An accessor ``at(indices) -> (buffer, [flat index])`` over shared memory for one operand;
    a fragment gets a scratch buffer (filled by ``stmts`` for the source)."""
    buf = region.buffer
    if scope_of(buf) in SHARED_SCOPES:
        # a region of the buffer: its starts added to the (trailing) indices the scan walks
        starts = list(region.starts)
        lead = len(starts) - len(shape)
        return lambda idx: (lw.smem_views[buf], [lw.shared_offset(
            buf, starts[:lead] + [simplify(s + i) for s, i in zip(starts[lead:], idx)])])
    scratch = lw.scratch(f"{buf.name}_scan_{role}", math.prod(shape), str(buf.dtype))
    at = _row_major(scratch, shape)
    if role == "src":
        stmts.append(_fragment_io(lw, buf, at, load=False))
    return at


def _row_major(scratch, shape):
    """The accessor ``at(indices) -> (scratch, [flat index])`` of a tile of ``shape`` laid out row
    by row in ``scratch``."""
    return lambda idx: (scratch, [sum((e * math.prod(shape[d + 1:]) for d, e in enumerate(idx)), i32(0))])


def _fragment_io(lw, buf, at, load, one_replica=False):
    """Each thread loads the elements of fragment ``buf`` it holds from ``at(indices)`` (``load``),
    or stores them there, cast to the target's type (``one_replica``: only the first replica of
    each element stores it)."""
    return _layout_io(lw, lw.layouts.fragments[buf], lw.frag[buf], at, load, one_replica)


def _layout_io(lw, layout, local, at, load, one_replica=False):
    """``_fragment_io`` of the registers ``local`` laid out by ``layout``."""
    v = tirx.Var("v", "int32")
    target, idx = at(layout.index(lw.tid, v))
    if load:
        body = tirx.BufferStore(local, tirx.BufferLoad(target, idx), [v])
    else:
        value = tirx.BufferLoad(local, [v])
        if str(local.dtype) != str(target.dtype):
            value = tirx.Cast(str(target.dtype), value)
        body = tirx.BufferStore(target, value, idx)
        if one_replica and layout.replication > 1:
            body = tirx.IfThenElse(tirx.EQ(layout.replica_index(lw.tid), i32(0)), body, None)
    return tirx.For(v, i32(0), i32(max(layout.local_size, 1)), tirx.ForKind.SERIAL, body,
                    annotations={"pragma_unroll": True})


# on by default since session 48 (H100: one row of 4096 13.9 -> 9.9 us, four of 1024 13.3 -> 5.9 us,
# 23 cases against torch): a scan of few long rows by whole warps (_warp_scan)
WARP_SCAN_KEY = "tl.enable_warp_scan"
_WARP_SCAN_TYPES = ("float32", "float64", "int32", "uint32", "int64", "uint64")
_WARP_SCAN_STEP = 6     # one warp's chunk of 32 elements against one serial element, in dependent steps


def _warp_scan_pays(lw, rows, n, d_dtype, kind) -> bool:
    """Whether the rows go faster a warp each, 32 elements at a time, than a thread each, one at a
    time: whole warps only (a block of whole warps, not under a thread guard), 32- and 64-bit
    sums and maxima, and fewer dependent steps for the slowest warp than for the slowest thread."""
    T = const_int(lw.T)
    if lw.configs.get(WARP_SCAN_KEY) is False or T is None or T % 32 or getattr(lw, "thread_conds", None) \
            or d_dtype not in _WARP_SCAN_TYPES or kind not in ("sum", "max"):
        return False
    warps = T // 32
    return -(-rows // warps) * -(-n // 32) * _WARP_SCAN_STEP < -(-rows // T) * n


def _scan(lw, shape, dim, reverse, s_at, d_at, s_dtype, d_dtype, kind="sum"):
    other = [d for d in range(len(shape)) if d != dim]
    rows = math.prod(shape[d] for d in other) if other else 1
    n = shape[dim]
    if _warp_scan_pays(lw, rows, n, d_dtype, kind):
        return _warp_scan(lw, shape, dim, other, rows, n, reverse, s_at, d_at, d_dtype, kind)
    rounds = -(-rows // lw.T)
    r0, k = tirx.Var("r0", "int32"), tirx.Var("k", "int32")
    row = r0 * lw.T + lw.tid if rounds > 1 else lw.tid
    a_dtype = _acc_dtype(d_dtype)
    acc = tirx.decl_buffer((1,), a_dtype, "cumsum_acc", scope="local")
    idx = _row_indices(shape, dim, other, row, (n - 1 - k) if reverse else k)
    s_buf, s_idx = s_at(idx)
    d_buf, d_idx = d_at(idx)
    val = tirx.BufferLoad(s_buf, s_idx)
    if s_dtype != a_dtype:
        val = tirx.Cast(a_dtype, val)
    _, combine = _OPS[kind]
    out = tirx.BufferLoad(acc, [i32(0)])
    body = seq([tirx.BufferStore(acc, combine(out, val), [i32(0)]),
                tirx.BufferStore(d_buf, tirx.Cast(d_dtype, out) if a_dtype != d_dtype else out, d_idx)])
    scan = seq([tirx.AllocBuffer(acc), tirx.BufferStore(acc, _init(kind, a_dtype), [i32(0)]),
                tirx.For(k, i32(0), i32(n), tirx.ForKind.SERIAL, body)])
    guarded = tirx.IfThenElse(tirx.LT(row, i32(rows)), scan, None) if rows % lw.T else scan
    if rounds == 1:
        return guarded
    return tirx.For(r0, i32(0), i32(rounds), tirx.ForKind.SERIAL, guarded)


def _row_indices(shape, dim, other, row, pos):
    """The indices of element ``pos`` of row ``row`` (the rows: the other dimensions, row-major)."""
    idx, rest = [i32(0)] * len(shape), row
    for d in reversed(other):
        idx[d] = tirx.floormod(rest, i32(shape[d]))
        rest = tirx.floordiv(rest, i32(shape[d]))
    idx[dim] = pos
    return idx


def _warp_scan(lw, shape, dim, other, rows, n, reverse, s_at, d_at, d_dtype, kind):
    """The scan with a warp per row (``tl.enable_warp_scan``, on by default): 32 consecutive elements at a time
    (from the end with ``reverse``), one a lane, scanned across the warp
    (``tl::warp_inclusive_scan``) and combined with the total of the chunks before, which lane 31
    hands on (``tl::warp_lane_value``). Lanes past the row's end take the identity."""
    functor, combine = _OPS[kind]
    warps = const_int(lw.T) // 32
    r0, c = tirx.Var("r0", "int32"), tirx.Var("c", "int32")
    warp, lane = tirx.floordiv(lw.tid, i32(32)), tirx.floormod(lw.tid, i32(32))
    row = r0 * warps + warp
    k = c * 32 + lane
    pos = (i32(n - 1) - k) if reverse else k
    inside = tirx.LT(k, i32(n))
    safe = tirx.Select(inside, pos, i32(0))     # (an index inside the row for the lanes past it)
    s_buf, s_idx = s_at(_row_indices(shape, dim, other, row, safe))
    d_buf, d_idx = d_at(_row_indices(shape, dim, other, row, pos))
    val = tirx.BufferLoad(s_buf, s_idx)
    if str(val.dtype) != d_dtype:
        val = tirx.Cast(d_dtype, val)
    v = tirx.decl_buffer((1,), d_dtype, "scan_v", scope="local")
    carry = tirx.decl_buffer((1,), d_dtype, "scan_carry", scope="local")
    init = _init(kind, d_dtype)
    v0 = tirx.BufferLoad(v, [i32(0)])
    chunk = seq([
        tirx.BufferStore(v, tirx.Select(inside, val, init), [i32(0)]),
        tirx.BufferStore(v, combine(tirx.call_extern(d_dtype, f"tl::warp_inclusive_scan<{functor}>", v0),
                                    tirx.BufferLoad(carry, [i32(0)])), [i32(0)]),
        tirx.IfThenElse(inside, tirx.BufferStore(d_buf, v0, d_idx), None),
        tirx.BufferStore(carry, tirx.call_extern(d_dtype, "tl::warp_lane_value", v0, i32(31)), [i32(0)])])
    scan = seq([tirx.AllocBuffer(v), tirx.AllocBuffer(carry), tirx.BufferStore(carry, init, [i32(0)]),
                tirx.For(c, i32(0), i32(-(-n // 32)), tirx.ForKind.SERIAL, chunk)])
    body = tirx.IfThenElse(tirx.LT(row, i32(rows)), scan, None) if rows % warps else scan
    return tirx.For(r0, i32(0), i32(-(-rows // warps)), tirx.ForKind.SERIAL, body)


_ThreadAxis = namedtuple("_ThreadAxis", "stride extent")


# ---- TVM's thread all-reduce (T.comm_reducer + T.tvm_thread_allreduce) -------------------------

def lower_thread_allreduce(lw, stmt):
    """``with T.attr(T.comm_reducer(f, [id]), "reduce_scope", ...): T.tvm_thread_allreduce(1, v,
    cond, out, *thread_vars)``: ``out`` of every thread gets ``f`` folded over the ``v`` of the
    threads that differ from it only in ``thread_vars`` (a ``cond`` that is false contributes the
    identity). Lanes of one warp combine by xor shuffles (group extent and stride powers of two),
    anything else through a shared workspace."""
    reducer, call = stmt.node, getattr(stmt.body, "value", None)
    if not isinstance(reducer, tirx.CommReducer) or not (
            isinstance(call, ir.Call) and getattr(call.op, "name", "") == "tirx.tvm_thread_allreduce"):
        raise LoweringError("TL0002", "a reduce_scope attribute holds T.comm_reducer(...) around one "
                            "T.tvm_thread_allreduce(...)", stmt.span)
    args = list(call.args)
    n = const_int(args[0])
    if n != 1 or len(reducer.result) != 1:
        raise LoweringError("TL0002", "T.tvm_thread_allreduce reduces one value at a time here", stmt.span)
    src, cond, out, rvars = args[1], args[2], args[3], args[4:]
    if not isinstance(out, ir.TensorLoad):
        raise LoweringError("TL0002", "T.tvm_thread_allreduce writes its result into a buffer element (Cr[0])",
                            stmt.span)
    strides = {"threadIdx.x": 1, "threadIdx.y": lw.info.threads[0],
               "threadIdx.z": lw.info.threads[0] * (lw.info.threads[1] if len(lw.info.threads) > 1 else 1)}
    extents = dict(zip(("threadIdx.x", "threadIdx.y", "threadIdx.z"), lw.info.threads))
    axes = []
    for v in rvars:
        tag = next((t for t, tv in lw.info.thread_vars.items() if tv.same_as(v)), None)
        if tag is None:
            raise LoweringError("TL0002", f"T.tvm_thread_allreduce reduces over thread indices; '{v}' is not one "
                                "(use T.get_thread_binding(k))", stmt.span)
        axes.append(_ThreadAxis(strides[tag], extents[tag]))
    dtype = str(out.source.dtype)
    lhs, rhs, res = reducer.lhs[0], reducer.rhs[0], reducer.result[0]

    def combine(a, b):
        return substitute(res, {lhs: a, rhs: b})

    value = lw.rewrite(src)
    if str(value.dtype) != dtype:
        value = tirx.Cast(dtype, value)
    if const_int(cond) != 1:
        value = tirx.Select(lw.rewrite(cond), value, reducer.identity_element[0])
    acc = tirx.decl_buffer((1,), dtype, "red_buf", scope="local")
    a0 = tirx.BufferLoad(acc, [i32(0)])
    stmts = [tirx.AllocBuffer(acc), tirx.BufferStore(acc, value, [i32(0)])]
    in_warp, cross = _split_thread_axes([a for a in axes if a.extent > 1])
    mask = tirx.IntImm("uint32", (1 << lw.T) - 1 if lw.T < 32 else 0xFFFFFFFF)
    for stride, extent in in_warp:
        off = extent // 2
        while off >= 1:
            other = tirx.call_extern(dtype, "tl::shfl_xor", a0, i32(off * stride), mask)
            stmts.append(tirx.BufferStore(acc, combine(a0, other), [i32(0)]))
            off //= 2
    if cross:
        stmts.extend(_cross_warp(lw, acc, 1, cross, combine, dtype, "red_buf"))
    stmts.append(lw.store(out.source, list(out.indices), a0, span=stmt.span))
    return seq(stmts)


# ---- reducer epochs (T.alloc_reducer / reducer_init / reducer_update / finalize_reducer) -----------

_REDUCER_FUNCTORS = {"sum": "tl::SumOp", "max": "tl::MaxOp", "min": "tl::MinOp", "bitand": "tl::BitAndOp",
                     "bitor": "tl::BitOrOp", "bitxor": "tl::BitXorOp"}
REDUCER_OPS = ("reducer_decl", "reducer_init", "reducer_update", "finalize_reducer")


def finalize_parts(args):
    """(destination region or None, batch) of a ``finalize_reducer`` call's arguments."""
    batch = 1
    if isinstance(args[-1], tirx.IntImm):
        batch, args = int(args[-1].value), args[:-1]
    return (decode_region(args[1]) if len(args) > 1 else None), batch


def _reducer_decls(body):
    """{buffer: (op, legacy)} of every T.alloc_reducer in ``body``."""
    out = {}
    epoch = []    # reducers some epoch op (init, update, finalize into a destination) names

    def visit(s):
        name = op_name(s)
        if name == "reducer_decl":
            args = s.value.args
            out[decode_region(args[0]).buffer] = (str(args[1].value), bool(int(args[2].value)))
        elif name == "reducer_init" or (name == "finalize_reducer" and finalize_parts(s.value.args)[0] is not None):
            epoch.append(decode_region(s.value.args[0]).buffer)
        elif name == "reducer_update":
            epoch.append(s.value.args[0].source)

    walk_stmts(body, visit)
    # T.alloc_reducer without ``replication`` is the older form too when no epoch op names it
    return {b: (op, legacy or not any(b.same_as(e) for e in epoch)) for b, (op, legacy) in out.items()}


def reducer_info(lw, buf):
    """(op, legacy) of reducer ``buf``; the kernel's epochs are checked on the first call."""
    decls = getattr(lw, "_reducers", None)
    if decls is None:
        decls = lw._reducers = _reducer_decls(lw.info.body)
        _check_epochs(lw.info.body, decls)
    return decls[buf]


def _check_epochs(body, decls):
    """Every epoch is init -> updates (inside T.Parallel) -> finalize in the init's scope (or in a
    branch of it); between them the reducer is neither stored to nor read."""
    v2 = {b for b, (_, legacy) in decls.items() if not legacy}
    open_at, finalized = {}, set()

    def touched(stmt):
        return [(b, store) for b, _, store in buffer_accesses(stmt) if b in v2]

    def fail(msg, span):
        raise LoweringError("TL0002", msg, span)

    def visit(s, ctx, in_parallel):
        if s is None:
            return
        if isinstance(s, tirx.SeqStmt):
            for c in s.seq:
                visit(c, ctx, in_parallel)
            return
        name = op_name(s)
        if name in REDUCER_OPS:
            args = s.value.args
            buf = args[0].source if name == "reducer_update" else decode_region(args[0]).buffer
            if buf not in v2:
                return
            if name == "reducer_init":
                if buf in open_at:
                    fail(f"double T.reducer_init of reducer '{buf.name}': the epoch opened before is not "
                         "finalized yet", s.span)
                open_at[buf] = ctx
            elif name == "reducer_update":
                if buf not in open_at:
                    fail(f"T.reducer_update of reducer '{buf.name}' before T.reducer_init (no open epoch)", s.span)
                if not in_parallel:
                    fail(f"T.reducer_update of reducer '{buf.name}' outside any T.Parallel loop: which threads "
                         "contribute is ambiguous", s.span)
                for b, _ in touched(tirx.Evaluate(args[1])):
                    fail(f"illegal read of reducer '{b.name}' before T.finalize_reducer", s.span)
            elif name == "finalize_reducer":
                start = open_at.get(buf)
                if start is None:
                    fail(f"T.finalize_reducer of reducer '{buf.name}' without an open epoch (T.reducer_init "
                         "first)", s.span)
                extra = ctx[len(start):]
                if ctx[:len(start)] != start or any(kind != "if" for kind, _ in extra):
                    fail(f"T.finalize_reducer of reducer '{buf.name}' is not in the scope of its T.reducer_init "
                         "(the same block, or a block-uniform branch inside it)", s.span)
                del open_at[buf]
                finalized.add(buf)
                if finalize_parts(args)[0] is not None:
                    for b, _ in touched(tirx.Evaluate(args[1])):
                        fail(f"illegal store to reducer '{b.name}'", s.span)
            return
        if isinstance(s, tirx.For):
            par = is_parallel_nest(s)
            visit(s.body, ctx if par else ctx + (("for", id(s)),), in_parallel or par)
            return
        if isinstance(s, tirx.IfThenElse):
            for b, _ in touched(tirx.Evaluate(s.condition)):
                fail(f"illegal read of reducer '{b.name}' before T.finalize_reducer", s.span)
            visit(s.then_case, ctx + (("if", (id(s), 0)),), in_parallel)
            visit(s.else_case, ctx + (("if", (id(s), 1)),), in_parallel)
            return
        if isinstance(s, (tirx.AttrStmt,)):
            visit(s.body, ctx, in_parallel)
            return
        for b, store in touched(s):
            if name == "fill":
                fail(f"illegal T.clear/T.fill of reducer '{b.name}': open its epoch with T.reducer_init", s.span)
            what = "store to" if store else "read of"
            fail(f"illegal {what} reducer '{b.name}': between T.reducer_init and T.finalize_reducer it is only "
                 "updated with T.reducer_update", s.span)

    visit(body, (), False)
    for buf in open_at:
        raise LoweringError("TL0002", f"reducer '{buf.name}' is initialised but never finalized "
                            "(T.finalize_reducer)", None)


def lower_reducer_op(lw, stmt, name):
    args = stmt.value.args
    if name == "reducer_update":
        buf = args[0].source
        reducer_info(lw, buf)
        raise LoweringError("TL0002", f"T.reducer_update of reducer '{buf.name}' outside any T.Parallel loop",
                            stmt.span)
    buf = decode_region(args[0]).buffer
    kind, _legacy = reducer_info(lw, buf)
    if name == "reducer_decl":
        return None
    dtype = str(buf.dtype)
    regs = lw.frag[buf]
    n = max(lw.layouts.fragments[buf].local_size, 1)
    v = tirx.Var("v", "int32")
    plan = lw.layouts.reducers.get(buf)
    if plan is not None:
        return _lower_narrow(lw, stmt, name, buf, kind, plan)
    if name == "reducer_init":
        init = _init(kind, dtype)
        if len(args) > 1:   # the seed enters once: through thread 0's partials
            init = tirx.Select(tirx.EQ(lw.tid, i32(0)), lw.rewrite(args[1]), init)
            bound = tirx.decl_buffer((1,), dtype, f"{buf.name}_seed", scope="local")
            return seq([tirx.AllocBuffer(bound), tirx.BufferStore(bound, init, [i32(0)]),
                        _for(v, n, tirx.BufferStore(regs, tirx.BufferLoad(bound, [i32(0)]), [v]))])
        return _for(v, n, tirx.BufferStore(regs, init, [v]))
    # finalize: an all-reduce of every partial over the whole block, then the copy into dst
    lw.check_all_threads("T.finalize_reducer", stmt.span)
    T = lw.T
    if T & (T - 1):
        raise LoweringError("TL0002", f"T.finalize_reducer needs a power-of-two thread count, the block has {T}",
                            stmt.span)
    dst_region, batch = finalize_parts(args)
    _check_batch(buf, n, batch, stmt.span)
    ws = lw.scratch(f"{buf.name}_red_ws", T * batch, dtype)
    mask = f", {hex((1 << T) - 1)}u" if T < 32 else ""
    ws_ptr = tirx.address_of(tirx.BufferLoad(ws, [i32(0)]))
    if batch > 1:   # one pair of barriers for every `batch` registers
        fn = f"tl::AllReduceBatch<{_REDUCER_FUNCTORS[kind]}, {T}, 1, {batch}, {T}{mask}>::run_batch"
        stmts = [_for(v, n // batch, tirx.Evaluate(tirx.call_extern(
            "void", fn, tirx.address_of(tirx.BufferLoad(regs, [v * batch])), ws_ptr, lw.info.tid)))]
    else:
        fn = f"tl::AllReduce<{_REDUCER_FUNCTORS[kind]}, {T}, 1{mask}>::run"
        stmts = [_for(v, n, tirx.BufferStore(regs, tirx.call_extern(dtype, fn, tirx.BufferLoad(regs, [v]), ws_ptr,
                                                                     lw.info.tid), [v]))]
    if dst_region is not None:
        dst = dst_region.buffer
        G = lw.layouts.fragments[dst]
        u = tirx.Var("u", "int32")
        target, idx = lw.element(buf, list(G.index(lw.tid, u)))
        value = tirx.BufferLoad(target, idx)
        if str(dst.dtype) != dtype:
            value = tirx.Cast(str(dst.dtype), value)
        stmts.append(_for(u, max(G.local_size, 1), tirx.BufferStore(lw.frag[dst], value, [u], span=stmt.span)))
    return seq(stmts)


def _check_batch(buf, n, batch, span):
    numel = math.prod(const_int(x) for x in buf.shape)
    if batch > numel:
        raise LoweringError("TL0002", f"T.finalize_reducer(batch={batch}) exceeds total output elements of "
                            f"reducer '{buf.name}' ({numel})", span)
    if n % batch:
        raise LoweringError("TL0002", f"T.finalize_reducer(batch={batch}) must evenly divide the {n} elements of "
                            f"reducer '{buf.name}' each thread holds", span)


def _lower_narrow(lw, stmt, name, buf, kind, plan):
    """Init / finalize of a reducer with a narrow plan (``layout_inference.ReducerPlan``): the
    partials start from the identity and the seed is kept aside (combined once, after the
    collective); the finalize all-reduces each register over the plan's thread groups only.
    The destination reads the result where it is: straight from the registers when every
    thread holds every element, else through shared memory (one writer per element)."""
    args = stmt.value.args
    dtype = str(buf.dtype)
    layout = lw.layouts.fragments[buf]
    regs, n = lw.frag[buf], max(layout.local_size, 1)
    v = tirx.Var("v", "int32")
    seeds = lw.__dict__.setdefault("_reducer_seeds", {})
    packed = lw.__dict__.setdefault("_reducer_packed", {})
    if name == "reducer_init":
        if plan.lane is not None:   # two lanes per partial; the plain registers get their fold
            pk = packed.get(buf)
            stmts = []
            if pk is None:
                pk = packed[buf] = tirx.decl_buffer((2 * n,), dtype, f"{buf.name}_pk", scope="local")
                stmts.append(tirx.AllocBuffer(pk))
            stmts.append(_for(v, 2 * n, tirx.BufferStore(pk, _init(kind, dtype), [v])))
        else:
            stmts = [_for(v, n, tirx.BufferStore(regs, _init(kind, dtype), [v]))]
        if len(args) > 1:   # taken now, combined once per element at the finalize
            bound = tirx.decl_buffer((1,), dtype, f"{buf.name}_seed", scope="local")
            seeds[buf] = bound
            stmts = [tirx.AllocBuffer(bound), tirx.BufferStore(bound, lw.rewrite(args[1]), [i32(0)])] + stmts
        return seq(stmts)
    lw.check_all_threads("T.finalize_reducer", stmt.span)
    dst_region, batch = finalize_parts(args)
    _check_batch(buf, layout.local_size, batch, stmt.span)   # (the collectives here stay per register)
    _, combine = _OPS[kind]
    T = lw.T
    value = tirx.BufferLoad(regs, [v])
    if buf in packed:
        pk = packed[buf]
        value = combine(tirx.BufferLoad(pk, [v * 2]), tirx.BufferLoad(pk, [v * 2 + 1]))
    if plan.steps:
        mask = f", {hex((1 << T) - 1)}u" if T < 32 else ""
        ws_ptr = None
        for threads, stride in plan.steps:
            fn = f"tl::AllReduce<{_REDUCER_FUNCTORS[kind]}, {threads}, {stride}{mask}>::run"
            if threads * stride <= 32:      # inside a warp: shuffles only, no workspace
                value = tirx.call_extern(dtype, fn, value)
                continue
            if ws_ptr is None:
                ws = lw.scratch(f"{buf.name}_red_ws", T, dtype)
                ws_ptr = tirx.address_of(tirx.BufferLoad(ws, [i32(0)]))
            value = tirx.call_extern(dtype, fn, value, ws_ptr, lw.info.tid)
    if buf in seeds:
        value = combine(value, tirx.BufferLoad(seeds[buf], [i32(0)]))
    stmts = []
    if not isinstance(value, tirx.BufferLoad):     # a collective or a seed: fold it into the registers
        stmts.append(_for(v, n, tirx.BufferStore(regs, value, [v])))
    if dst_region is None:
        return seq(stmts) if stmts else tirx.Evaluate(i32(0))
    dst = dst_region.buffer
    G = lw.layouts.fragments[dst]
    u = tirx.Var("u", "int32")
    shape = [const_int(x) for x in buf.shape]
    numel = math.prod(shape)
    if layout.local_size >= numel:       # every thread holds every element
        target, idx = lw.element(buf, list(G.index(lw.tid, u)))
        src = tirx.BufferLoad(target, idx)
    else:
        stage = lw.scratch(f"{buf.name}_fin", numel, dtype)
        sync = thread_sync.sync_stmt(lw, writes=())    # (around the workspace only)

        def flat(index):
            out = i32(0)
            for e, m in zip(index, shape):
                out = out * i32(m) + e
            return simplify(out)

        write = tirx.BufferStore(stage, tirx.BufferLoad(regs, [v]), [flat(layout.index(lw.tid, v))])
        stmts += [sync, tirx.IfThenElse(tirx.EQ(layout.replica_index(lw.tid), i32(0)), _for(v, n, write), None),
                  sync]
        src = tirx.BufferLoad(stage, [flat(G.index(lw.tid, u))])
    if str(dst.dtype) != dtype:
        src = tirx.Cast(str(dst.dtype), src)
    stmts.append(_for(u, max(G.local_size, 1), tirx.BufferStore(lw.frag[dst], src, [u], span=stmt.span)))
    return seq(stmts)


def lower_reducer_update(lw, stmt, loop):
    """``T.reducer_update(acc[idx], value)`` in a T.Parallel body: the iteration's thread folds
    ``value`` into its partial (the loop lowering runs each iteration on one replica)."""
    target, value = stmt.value.args
    buf = target.source
    kind, _ = reducer_info(lw, buf)
    _, combine = _OPS[kind]
    idx = [lw.rewrite(i, loop) for i in target.indices]
    regs, ridx = lw.element(buf, idx)
    plan = lw.layouts.reducers.get(buf)
    pk = getattr(lw, "_reducer_packed", {}).get(buf)
    if plan is not None and plan.lane is not None and pk is not None:
        regs, ridx = pk, [lw.an.simplify(ridx[0] * 2 + tirx.floormod(lw.rewrite(plan.lane, loop), i32(2)))]
    cur = tirx.BufferLoad(regs, ridx)
    return tirx.BufferStore(regs, combine(cur, lw.rewrite(value, loop)), ridx, span=stmt.span)
