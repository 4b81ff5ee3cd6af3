"""Early pipeline prologues (opt-in ``tl.enable_early_prologue``, session 26; session 27 on the H200:
gemv_alloc_reducer 2 % faster, the six other bench kernels it changes within noise).

A cp.async pipeline's prologue (tiles 0 .. S-2 of its loop, each group committed) is lowered right
in front of its loop, so it follows whatever the kernel does first: a synchronous ``T.copy`` of Q
into shared memory, the clears of the accumulators, the barrier that publishes Q. Each block then
waits for Q's global latency before the first K / V loads even start (small attention, split-KV
decoding: a few iterations a block, where that startup is a visible part of the kernel).

Contract: ``mark(lw, prologue)`` wraps a pipeline's prologue statements in a ``PROLOGUE_ATTR``
attribute when the key is on (else returns them as they are); ``place(lw, body)`` moves each
marked prologue of the kernel body's top-level sequence up, in front of the statements before it
that it may pass, and strips every marker. A prologue passes a statement that issues no cp.async,
mbarrier, TMA or bulk-copy operation and no wait, binds no variable the prologue reads and may
write no other buffer the prologue reads (a store, or an element's address handed to a call); it
passes barriers too. A prologue moves only when no statement before it in the sequence touches
the shared buffers it fills or reads (alias-widened) or may write a buffer it reads: then no
earlier access needs a barrier to order it with the early loads. The cp.async groups keep their
order (nothing that commits or waits is passed), so the loop's ``cp_async_wait<n>`` still counts
the same groups. Warp-specialised kernels have no such prologue (their producer loads the tiles).
"""

from __future__ import annotations

from tvm import ir, tirx

from tilelang.tir_utils import (extern_name, flatten, map_stmts, seq, tensor_loads, tvm_ffi_walk, uses_vars,
                                walk_stmts)
from tilelang.transform import thread_sync

KEY = "tl.enable_early_prologue"
PROLOGUE_ATTR = "tl.pipeline_prologue"
_ASYNC = ("cp_async", "mbarrier", "tma_", "bulk_copy", "wait")


def mark(lw, prologue: list) -> list:
    """The prologue statements, wrapped in one ``PROLOGUE_ATTR`` attribute when the key is on."""
    if not lw.configs.get(KEY) or not prologue:
        return prologue
    return [tirx.AttrStmt(tirx.StringImm("prologue"), PROLOGUE_ATTR, tirx.IntImm("int32", 1), seq(prologue))]


def _is_marked(st) -> bool:
    return isinstance(st, tirx.AttrStmt) and str(st.attr_key) == PROLOGUE_ATTR


def place(lw, body):
    """``body`` with its top-level marked prologues moved up where they may go, and no markers."""
    if lw.configs.get(KEY) and getattr(lw, "ws", None) is None:
        body = _hoist(lw, body)
    return map_stmts(body, pre=_unwrap)


def _unwrap(st):
    """A marked prologue's statements (markers inside them stripped too), else None."""
    return map_stmts(st.body, pre=_unwrap) if _is_marked(st) else None


def _hoist(lw, body):
    """The top-level sequence with each marked prologue moved up as far as it may go."""
    items = flatten([body])
    if not any(_is_marked(x) for x in items):
        return body
    views = {v: b for b, v in lw.smem_views.items()}     # flat view over smem -> its shared buffer
    alias = getattr(lw, "smem_alias", None) or {}
    out = list(items)
    for k in range(len(out)):
        if not _is_marked(out[k]):
            continue
        pro = out[k]
        used = _buffers(pro)
        filled = thread_sync.widen({views[b] for b in used if b in views}, alias)
        if not filled:
            continue
        reads_global = {b for b in used if b not in views}
        touched_before = any(filled & thread_sync.widen({views[b] for b in _buffers(x) if b in views}, alias)
                             or _may_write(x, reads_global) for x in out[:k])
        if touched_before:
            continue
        p = k
        while p > 0 and _passable(out[p - 1], pro, reads_global):
            p -= 1
        if p < k:
            out = out[:p] + [pro] + out[p:k] + out[k + 1:]
    return seq(out)


def _passable(st, pro, reads_global) -> bool:
    """Whether the prologue ``pro`` may move in front of ``st`` (module docstring)."""
    if isinstance(st, (tirx.AllocBuffer, tirx.DeclBuffer)) or _may_write(st, reads_global):
        return False
    blocked = []
    walk_stmts(st, lambda s: blocked.append(s) if isinstance(s, tirx.Bind) and uses_vars(pro, [s.var]) else None)

    def on_expr(e):
        name = extern_name(e) if isinstance(e, tirx.Call) else None
        if name is not None and any(a in name for a in _ASYNC):
            blocked.append(e)

    tvm_ffi_walk(st, on_expr)
    return not blocked


def _may_write(st, bufs) -> bool:
    """Whether ``st`` stores into one of ``bufs`` or hands an element's address to a call (which
    may write it: a vector copy, an atomic)."""
    found = []
    walk_stmts(st, lambda s: found.append(s) if isinstance(s, tirx.BufferStore) and s.buffer in bufs else None)

    def on_expr(e):
        if isinstance(e, tirx.Call) and getattr(e.op, "name", "") == "tirx.address_of" and \
                isinstance(e.args[0], ir.TensorLoad) and e.args[0].source in bufs:
            found.append(e)

    tvm_ffi_walk(st, on_expr)
    return bool(found)


def _buffers(st) -> set:
    """The buffers ``st`` loads, stores or addresses."""
    out = {e.source for e in tensor_loads(st)}
    walk_stmts(st, lambda s: out.add(s.buffer) if isinstance(s, tirx.BufferStore) else None)
    return out
