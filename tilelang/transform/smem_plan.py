"""Shared-memory planning: where each shared buffer lives in the block's one dynamic allocation.

Two buffers that are never live at the same time may share bytes. Liveness is taken at the
granularity of the kernel body's top-level statements: a buffer is live from the first top-level
statement that names it to the last one (a loop that names it keeps it live for all its
iterations), except a buffer private to the iterations of a serial loop (``refine``: named only
inside one loop that is not software-pipelined, and overwritten whole by the first statement of the
loop body that names it, so no value crosses from one iteration to the next), which is live only
from that statement to the last one of the body that names it (a loop within such a loop is
narrowed the same way). Upstream's gated-delta-net W / U kernel loads a tile, scales it into
another, multiplies, and stages the product in a third, loop after loop: the staged product takes
the loaded tile's bytes (33 -> 25 KiB, six blocks an SM -> eight; the Lowerer keeps such sharing
only where it pays for its barriers: ``Lowerer._weigh_loop_reuse``). The classic case is flash
attention's output tile: ``O_shared`` is written only after the main loop, so it takes the bytes
of ``Q_shared`` (read only inside the loop), which saves a quarter of the kernel's shared memory
and lets two blocks share an SM. (The caller decides liveness, ``lower_tile_ops.Lowerer.
_plan_memory``: in a warp-specialised kernel the tiles the producer fills are live from the first
statement, since it starts loading while the consumers run what precedes the loop; a persistent
one makes them live throughout, as the producer refills them during the epilogue, so there O gets
bytes of its own where they fit.)

Placement is first fit in declaration order: each buffer goes to the lowest (aligned) offset
that overlaps no earlier buffer live at the same time. When no lifetimes are disjoint this is
exactly the plain sequential layout. A buffer the body never names (declared for a branch the
kernel's parameters switched off, e.g. a bias tile without a bias) takes no bytes at all, as
upstream's planner drops it.

Sharing bytes needs barriers the buffers alone would not ask for (a write of ``O_shared`` must
wait until every thread has finished reading ``Q_shared``): ``aliases`` tells the barrier
planner (``thread_sync``) which buffers overlap, and it treats them as one. (With
``tl.enable_occupancy_neutral_reuse`` the Lowerer keeps sharing only where it keeps a block per
SM: ``Lowerer._prefer_own_bytes``.)
"""

from __future__ import annotations

from dataclasses import dataclass

import tvm_ffi
from tvm import tirx

from tilelang.language._ops import is_tl_call
from tilelang.language.loops import ORDER_ATTR, PARALLEL_ATTR, STAGE_ATTR, STAGES_ATTR
from tilelang.tir_utils import const_int, flatten, tensor_loads


@dataclass
class Item:
    key: object            # the shared buffer (or any hashable)
    nbytes: int
    align: int
    live: tuple | None     # (first, last) top-level statement index, or ``refine``'s (start,
                           # end) statement paths; None: unknown, overlaps every buffer;
                           # UNUSED: never used, takes no bytes


UNUSED = ()


def top_level(body) -> list:
    """The kernel body's top-level statements (nested sequences flattened, and the bodies of
    attribute statements other than a launch binding spliced in where they stand: an annotation
    such as ``T.annotate_min_blocks_per_sm`` wraps the rest of the kernel)."""
    out = []
    for stmt in flatten([body]):
        if isinstance(stmt, tirx.AttrStmt) and stmt.attr_key != "thread_extent":
            out.extend(top_level(stmt.body))
        else:
            out.append(stmt)
    return out


def names_buffers(stmt, shared: set) -> set:
    if isinstance(stmt, tirx.AllocBuffer) or (
            isinstance(stmt, tirx.Evaluate) and is_tl_call(stmt.value)
            and stmt.value.op.name in ("tl.annotate_layout", "tl.use_swizzle")):
        return set()   # declarations and annotations name a buffer without touching it
    found = set()

    def on_var(v):
        if v in shared:
            found.add(v)

    tvm_ffi.structural_walk(stmt, [(tirx.Var, on_var)], order="pre")
    return found


def live_ranges(body, buffers) -> dict:
    """buffer -> (first, last) top-level statement index that names it (absent: never used)."""
    shared = set(buffers)
    out = {}
    for k, stmt in enumerate(top_level(body)):
        for buf in names_buffers(stmt, shared):
            first, _ = out.get(buf, (k, k))
            out[buf] = (first, k)
    return out


def _align(n: int, a: int) -> int:
    return -(-n // a) * a


_DEPTH = 8   # the deepest statement path ``refine`` gives (loops within loops)


def _span(live) -> tuple:
    """(start, end) of a live range as statement paths of one length, compared in order: a
    top-level range (first, last) covers every statement nested in its first and last."""
    start, end = live if isinstance(live[0], tuple) else ((live[0],), (live[1],))
    return start + (-1,) * (_DEPTH - len(start)), end + (1 << 30,) * (_DEPTH - len(end))


def _overlap(a, b) -> bool:
    if a is None or b is None:
        return True
    (sa, ea), (sb, eb) = _span(a), _span(b)
    return sa <= eb and sb <= ea


def _serial_loop(stmt) -> bool:
    """A loop whose iterations run one after another in program order: serial or unrolled, not a
    T.Parallel nest, not software-pipelined (no stages, order or stage of the user's; a refilled
    one-stage loop carries its stage count)."""
    if not isinstance(stmt, tirx.For) or stmt.thread_binding is not None or stmt.kind not in (
            tirx.ForKind.SERIAL, tirx.ForKind.UNROLLED):
        return False
    ann = stmt.annotations
    if PARALLEL_ATTR in ann or ORDER_ATTR in ann or STAGE_ATTR in ann:
        return False
    return const_int(ann.get(STAGES_ATTR, 0)) == 0


def _whole(buf, starts, extents) -> bool:
    shape = [const_int(x) for x in buf.shape]
    return len(starts) == len(shape) == len(extents) and None not in shape and all(
        const_int(s) == 0 for s in starts) and [const_int(e) for e in extents] == shape


def _overwrites(stmt, buf) -> bool:
    """``stmt`` writes every element of ``buf`` and reads none: a ``T.copy`` into all of it from
    another buffer, a ``T.fill`` / ``T.clear`` of all of it, or a T.Parallel nest of one store
    ``buf[i, j] = f(...)`` over exactly its shape that does not read ``buf``."""
    from tilelang.transform.kernel import (copy_base_extents, decode_region, is_parallel_nest, op_name,
                                           parallel_nest)

    name = op_name(stmt)
    if name in ("copy", "fill"):
        args = stmt.value.args
        dst = decode_region(args[1] if name == "copy" else args[0])
        if not dst.buffer.same_as(buf) or not _whole(buf, dst.starts, dst.extents):
            return False
        if name == "fill":
            return True
        src = decode_region(args[0])
        # the tile the copy moves, its regions' dimensions of extent 1 left out as the lowering
        # pairs them (lower_copy._match): a fragment source smaller than the tile writes part of it
        se, de = ([const_int(e) for e in r.nonunit()[1]] for r in (src, dst))
        tile = de if se == de else None if None in se + de else copy_base_extents(src, dst, se, de)
        return not src.buffer.same_as(buf) and tile == de
    if is_parallel_nest(stmt):
        loop_vars, extents, body = parallel_nest(stmt)
        if not isinstance(body, tirx.BufferStore) or not body.buffer.same_as(buf) or \
                getattr(body, "predicate", None) is not None:
            return False
        if len(body.indices) != len(loop_vars) or not all(
                isinstance(i, tirx.Var) and i.same_as(v) for i, v in zip(body.indices, loop_vars)):
            return False
        if not _whole(buf, [0] * len(loop_vars), extents):
            return False
        return not any(e.source.same_as(buf) for idx in [body.value, *body.indices] for e in tensor_loads(idx))
    return False


def _narrow(stmt, buf, path: tuple):
    """The (start, end) paths within ``stmt`` (at ``path``) where ``buf``, named nowhere else, is
    live, when ``stmt`` is a serial loop each of whose iterations overwrites it before reading it;
    else None."""
    if not _serial_loop(stmt) or len(path) >= _DEPTH - 1:
        return None
    body = flatten([stmt.body])
    uses = [j for j, s in enumerate(body) if buf in names_buffers(s, {buf})]
    if not uses:
        return None
    first, last = uses[0], uses[-1]
    if first == last:
        deeper = _narrow(body[first], buf, path + (first,))
        if deeper is not None:
            return deeper
    if not _overwrites(body[first], buf):
        return None
    return path + (first,), path + (last,)


def refine(body, live: dict) -> dict:
    """``live`` (``live_ranges``) with each buffer that is private to the iterations of a serial
    loop narrowed to the statements of the loop body that name it (see the module docstring)."""
    top = top_level(body)
    out = dict(live)
    for buf, rng in live.items():
        if not rng or isinstance(rng[0], tuple) or rng[0] != rng[1]:
            continue
        narrowed = _narrow(top[rng[0]], buf, (rng[0],))
        if narrowed is not None:
            out[buf] = narrowed
    return out


def narrows(body, buffers) -> bool:
    """Whether ``refine`` narrows the lifetime of any of ``buffers`` in ``body``."""
    live = live_ranges(body, buffers)
    return refine(body, live) != live


def place(items: list[Item], base: int = 0) -> tuple[dict, int]:
    """(key -> byte offset, total bytes) with first-fit placement in the order given."""
    placed = []   # (offset, end, live)
    offsets = {}
    for it in items:
        if it.live == UNUSED:   # never used: no bytes (it shares the base with whatever is there)
            offsets[it.key] = _align(base, it.align)
            continue
        busy = sorted((o, e) for o, e, live in placed if _overlap(live, it.live))
        offset = _align(base, it.align)
        for o, e in busy:
            if offset + it.nbytes <= o:
                break
            offset = max(offset, _align(e, it.align))
        offsets[it.key] = offset
        placed.append((offset, offset + it.nbytes, it.live))
    total = max([base] + [e for _, e, _ in placed])
    return offsets, total


def aliases(items: list[Item], offsets: dict) -> dict:
    """key -> the other keys whose bytes overlap its own (only keys that share bytes appear)."""
    out = {}
    for a in items:
        for b in items:
            if a.key is b.key or not a.nbytes or not b.nbytes or UNUSED in (a.live, b.live):
                continue
            oa, ob = offsets[a.key], offsets[b.key]
            if oa < ob + b.nbytes and ob < oa + a.nbytes:
                out.setdefault(a.key, set()).add(b.key)
    return out


def plan(body, sizes: dict, aligns: dict | None = None, default_align: int = 128, reuse: bool = True,
         live: dict | None = None, refine_loops: bool = True):
    """(offsets, total bytes, aliases) for shared buffers ``sizes`` (buffer -> bytes, in
    declaration order) used by the kernel ``body`` (``live``: its ``live_ranges`` when the caller
    has them); ``reuse=False`` (``tl.disable_shared_memory_reuse``) gives every buffer bytes of
    its own; ``refine_loops=False`` keeps buffers private to loop iterations live for the whole
    loop (``refine`` not applied)."""
    if not reuse:
        live = {buf: (0, 0) for buf in sizes}
    else:
        live = live_ranges(body, list(sizes)) if live is None else live
        if refine_loops:
            live = refine(body, live)
    items = [Item(buf, n, (aligns or {}).get(buf, default_align), live.get(buf, UNUSED)) for buf, n in sizes.items()]
    offsets, total = place(items)
    return offsets, total, aliases(items, offsets)
