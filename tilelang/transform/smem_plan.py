"""Shared-memory planning: where each shared buffer lives in the block's one dynamic allocation.

Two buffers that are never live at the same time may share bytes. Liveness is taken at the
granularity of the kernel body's top-level statements: a buffer is live from the first top-level
statement that names it to the last one (a loop that names it keeps it live for all its
iterations). The classic case is flash attention's output tile: ``O_shared`` is written only
after the main loop, so it takes the bytes of ``Q_shared`` (read only inside the loop), which
saves a quarter of the kernel's shared memory and lets two blocks share an SM. (The caller
decides liveness, ``lower_tile_ops.Lowerer._plan_memory``: in a warp-specialised kernel the
tiles the producer fills are live from the first statement, since it starts loading while the
consumers run what precedes the loop; a persistent one makes them live throughout, as the
producer refills them during the epilogue, so there O gets bytes of its own where they fit.)

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
from tilelang.tir_utils import flatten


@dataclass
class Item:
    key: object            # the shared buffer (or any hashable)
    nbytes: int
    align: int
    live: tuple | None     # (first, last) top-level statement index; None: unknown, overlaps
                           # every buffer; UNUSED: never used, takes no bytes


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


def _overlap(a, b) -> bool:
    return a is not None and b is not None and a[0] <= b[1] and b[0] <= a[1]


def place(items: list[Item], base: int = 0) -> tuple[dict, int]:
    """(key -> byte offset, total bytes) with first-fit placement in the order given."""
    placed = []   # (offset, end, live)
    offsets = {}
    for it in items:
        if it.live == UNUSED:   # never used: no bytes (it shares the base with whatever is there)
            offsets[it.key] = _align(base, it.align)
            continue
        busy = sorted((o, e) for o, e, live in placed if None in (live, it.live) or _overlap(live, it.live))
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
         live: dict | None = None):
    """(offsets, total bytes, aliases) for shared buffers ``sizes`` (buffer -> bytes, in
    declaration order) used by the kernel ``body`` (``live``: its ``live_ranges`` when the caller
    has them); ``reuse=False`` (``tl.disable_shared_memory_reuse``) gives every buffer bytes of
    its own."""
    if not reuse:
        live = {buf: (0, 0) for buf in sizes}
    elif live is None:
        live = live_ranges(body, list(sizes))
    items = [Item(buf, n, (aligns or {}).get(buf, default_align), live.get(buf, UNUSED)) for buf, n in sizes.items()]
    offsets, total = place(items)
    return offsets, total, aliases(items, offsets)
