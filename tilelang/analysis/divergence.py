"""Shared-memory exchanges no barrier can order (TL0404).

Input: a ``Kernel``. An ``if`` whose condition differs between the threads of a block (it reads
the thread index, or a value that does: ``transform.thread_regions.thread_varying``) and whose
branch no barrier can serve (``thread_regions.barrier_threads``, as the compiler decides it: the
threads it selects are part of several warps, or an unknown set) and holds no synchronisation of
the user's own is examined for element reads of a shared buffer that the branch also stores to:
for every thread that takes the branch (all of them where a per-thread value decides) and every
iteration of the constant loops inside it, the elements each access touches are computed, and a
read of an element another thread stores is reported (thread i reads ``S[47 - i]``, which thread
``47 - i`` stores) where the compiler cannot split a barrier out of the branch between the two
(``transform.barrier_hoist``): both in one statement, or one under a ``while`` or a loop whose
bounds differ between threads. Reads of what the thread itself stores (``S[tx * 4 + 3 - j]`` after
``S[tx * 4 + i] = ...``) are none; so is anything not computable that way (an index read from
memory, a loop of unknown extent): a warning must never be a false alarm. Tile ops are not
examined (they carry their own barriers). One warning per buffer and branch, at the read, with
the store as a note.
"""

from __future__ import annotations

import tvm
from tvm import ir, tirx

from tilelang.diagnostics import Note
from tilelang.tir_utils import children, const_int, substitute, tensor_loads, uses_vars, walk_stmts
from tilelang.transform.barrier_hoist import loop_alike
from tilelang.transform.kernel import SHARED_SCOPES, scope_of
from tilelang.transform.thread_regions import (barrier_threads, reads_any, thread_condition, thread_values,
                                               thread_varying)


def check_divergence(k, rep) -> None:
    rep.guard("divergent exchange check", _Divergence(k, rep).run)


class _Divergence:
    def __init__(self, k, rep):
        self.k, self.rep = k, rep
        info = k.info
        self.tvars = list(info.thread_vars.values())
        self.tid, self.T = info.tid, info.num_threads
        self.an = tvm.sym.Analyzer()
        self.varying = thread_varying(info.body, self.tvars)
        self.values = thread_values(info.body, self.tvars)

    def run(self):
        if self.tvars:
            self.visit(self.k.info.body, [])

    def varies(self, cond) -> bool:
        return reads_any(cond, self.varying)

    def visit(self, s, conds):
        if isinstance(s, tirx.IfThenElse) and self.varies(s.condition):
            branches = [(s.then_case, s.condition)]
            if s.else_case is not None:
                branches.append((s.else_case, tirx.Not(s.condition)))
            for body, cond in branches:
                inner = conds + [cond]
                if not self.orderable(inner):
                    self.examine(body, inner)
                    continue    # (one report per outermost such branch)
                self.visit(body, inner)
            return
        for c in children(s):
            self.visit(c, conds)

    def orderable(self, conds) -> bool:
        """Whether the compiler orders a barrier under ``conds`` (``thread_regions.barrier_threads``:
        the whole block, whole warps or a range inside one warp)."""
        cond = thread_condition(conds, self.tvars, self.varies, self.values)
        return barrier_threads(self.k.info, cond) != "none"

    def examine(self, body, conds):
        if _has_user_sync(body):
            return      # (the kernel orders its threads itself: mbarriers, named barriers)
        # (access, statement, {loop var: extent} of the loops around it, whether a barrier there
        # can be split out of the branch: only sequences, `if`s and loops every thread runs alike
        # lie between, barrier_hoist)
        stores, loads = [], []

        def visit(s, loops, hoistable=True):
            if isinstance(s, tirx.For):
                lo, n = const_int(s.min), const_int(s.extent)
                inner = {**loops, s.loop_var: (lo, n)} if lo is not None and n is not None else {**loops,
                                                                                             s.loop_var: None}
                visit(s.body, inner, hoistable and loop_alike(s, self.tvars, self.varies))
                return
            if isinstance(s, tirx.While):
                hoistable = False
            exprs = []
            if isinstance(s, tirx.BufferStore):
                if scope_of(s.buffer) in SHARED_SCOPES:
                    stores.append((s, s, loops, hoistable))
                exprs = [s.value] + list(s.indices)
            elif isinstance(s, tirx.Bind):
                exprs = [s.value]
            elif isinstance(s, tirx.IfThenElse):
                exprs = [s.condition]
            elif isinstance(s, tirx.Evaluate) and not _tile_op(s):
                exprs = [s.value]
            for e in exprs:
                loads.extend((ld, s, loops, hoistable) for ld in tensor_loads(e)
                             if scope_of(ld.source) in SHARED_SCOPES)
            for c in children(s):
                visit(c, loops, hoistable)

        visit(body, {})
        threads = self.threads(conds)
        if threads is None:
            return
        reported = []
        for ld, stmt, loops, ld_ok in loads:
            if any(b.same_as(ld.source) for b in reported):
                continue
            # a barrier the compiler can split out of the branch orders a write and a read in two
            # statements; within one statement, or under a `while` or a loop the threads run
            # differently, none can
            writes = [(w, wl) for w, _, wl, w_ok in stores if w.buffer.same_as(ld.source)
                      and (w.same_as(stmt) or not (w_ok and ld_ok))]
            if not writes:
                continue
            written = {}        # element -> threads that store it
            for w, wl in writes:
                for t, element in self.elements(w.indices, wl, threads) or ():
                    written.setdefault(element, set()).add(t)
            if any(written.get(element, set()) - {t} for t, element in self.elements(ld.indices, loops, threads)
                   or ()):
                reported.append(ld.source)
                self.report(ld.source, ld, stmt, writes[0][0], conds)

    def threads(self, conds):
        """The threads of the block that take the branch (every thread where a per-thread value
        decides), or None where that cannot be told."""
        cond = thread_condition(conds, self.tvars, self.varies, self.values)
        tid = self.tid
        if not isinstance(tid, tirx.Var) or self.T > 1024:
            return None
        if cond is None or tensor_loads(cond) or not uses_vars(cond, [tid]):
            return list(range(self.T))
        out = []
        for t in range(self.T):
            got = self.an.simplify(substitute(cond, {tid: tirx.const(t, "int32")}))
            if not isinstance(got, tirx.IntImm):
                return list(range(self.T))
            if got.value:
                out.append(t)
        return out

    def elements(self, indices, loops, threads, budget=20000):
        """[(thread, element)] an access at ``indices`` touches over the ``threads`` and every
        iteration of the constant ``loops`` around it in the branch; None where another variable
        is in its indices (a loop of unknown extent, a value read from memory) or it would take
        more than ``budget`` evaluations. Block indices are the same in every thread: 0."""
        used = [v for v in loops if any(uses_vars(i, [v]) for i in indices)]
        if any(loops[v] is None for v in used):
            return None
        block = {v: tirx.const(0, "int32") for v in self.k.info.block_vars.values()}
        combos = [dict()]
        for v in used:
            lo, n = loops[v]
            combos = [{**c, v: tirx.const(lo + i, "int32")} for c in combos for i in range(n)]
        if len(combos) * len(threads) > budget:
            return None
        out = []
        for t in threads:
            for c in combos:
                env = {self.tid: tirx.const(t, "int32"), **block, **c}
                element = []
                for i in indices:
                    got = self.an.simplify(substitute(i, env))
                    if not isinstance(got, tirx.IntImm):
                        return None
                    element.append(int(got.value))
                out.append((t, tuple(element)))
        return out

    def _data_only(self, cond) -> bool:
        return not uses_vars(cond, self.tvars) or bool(tensor_loads(cond))

    def report(self, buf, load, stmt, write, conds):
        why = ("a value that differs between threads" if all(self._data_only(c) for c in conds)
               else "part of several warps")
        span = self.rep.span(stmt)
        notes = [Note(f"'{buf.name}' is written here, in the same branch", self.rep.span(write)),
                  Note(("the write and the read are one statement: no barrier can come between them"
                       if write.same_as(stmt) else
                       "they are under a `while` or a loop whose trip count differs between threads, where "
                       "no barrier can be met (one between two statements of the branch is split out of the "
                       "`if`)") + "; read after the `if`, or select whole warps")]
        self.rep.emit("TL0404", f"threads read '{buf.name}' where other threads of this branch write it, under "
                      f"a condition on {why}: no barrier orders the write and the read", span, notes=notes)


_SYNC_WORDS = ("sync", "barrier", "fence", "arrive", "wait")


def _has_user_sync(body) -> bool:
    found = []

    def visit(s):
        if isinstance(s, tirx.Evaluate) and isinstance(s.value, ir.Call):
            name = getattr(s.value.op, "name", "") or ""
            if name in ("tirx.call_extern", "tirx.call_intrin") and s.value.args:
                name = str(s.value.args[0])
            if any(w in name.lower() for w in _SYNC_WORDS):
                found.append(s)

    walk_stmts(body, visit)
    return bool(found)


def _tile_op(s) -> bool:
    v = s.value
    return isinstance(v, ir.Call) and getattr(v.op, "name", "").startswith("tl.")
