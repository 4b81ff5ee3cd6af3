"""Data flow: registers read before they are written (TL0401), outputs never written (TL0402),
fragments computed and never used (TL0403).

Input: a ``Kernel``. TL0401 is a forward "definitely initialised" analysis over fragments and
thread-local buffers, whole buffers at a time (a write to any element initialises the buffer; a
warning must never be a false alarm):

- writes: ``T.fill``/``T.clear``, a copy or reduction into the buffer, ``T.gemm`` with
  ``clear_accum`` other than the constant False (``clear_accum=(k == 0)`` counts), an assignment;
- reads: ``T.gemm`` accumulating into C, ``T.reduce_*(..., clear=False)``, any load (``+=``);
- ``if`` joins both branches (a write on one branch only does not count), except that a branch
  taken on the first iteration of its loop (``if k == 0:``) counts as taken; a loop runs at
  least once, and since writes never undo one another, the first iteration decides (its
  ``else`` runs in later iterations, after what the first one wrote); and a
  branch on the thread index alone (warp roles: ``if tid < 128:``) counts, since the threads of
  a role read the registers they wrote themselves; inside a branch, what an earlier branch of
  the same condition (structurally, loop variables matched by position) wrote counts as written,
  and so does what a branch that set a scalar flag nonzero wrote (``if i < total: ...; v[0] = 1``
  with ``else: v[0] = 0``) inside a later ``if v[0] != 0`` (until the flag is stored again).

TL0402 reports an ``out_idx`` output never written; without ``out_idx``, a tensor neither read
nor written only when the kernel writes no tensor at all (an input a feature leaves unread is not
an output). TL0402/TL0403 classify every statement by the buffers it writes and reads. A buffer is *used*
when another buffer, an address or a condition reads it; reading itself (``C += ...``, a gemm
accumulating into C) does not count.
"""

from __future__ import annotations

import tvm
from tvm import ir, tirx

from tilelang.diagnostics import Note
from tilelang.tir_utils import const_int, flatten, tvm_ffi_walk, walk_stmts
from tilelang.transform.kernel import FRAGMENT_SCOPE, SHARED_SCOPES, decode_region, op_name

TRACKED = (FRAGMENT_SCOPE, "local")
GEMMS = ("gemm", "tcgen05_gemm")   # T.tcgen05_gemm as the checker builds it (language/tmem.py): gemm's arguments


def loads(expr, skip_addresses: bool = False) -> list:
    """Buffers read by ``expr`` (TensorLoads); with ``skip_addresses``, not those whose element
    address is only passed on (``address_of``: an extern call may write through it)."""
    if expr is None or isinstance(expr, (int, float, str)):
        return []
    import tvm_ffi

    found = []

    def visit(node):
        if skip_addresses and isinstance(node, ir.Call) and isinstance(node.op, ir.Op):
            if _written_args(node) is not None:
                for i, arg in enumerate(node.args):
                    if i not in _written_args(node):
                        found.extend(loads(arg, skip_addresses))
                return tvm_ffi.structural.WalkResult.SKIP
        if isinstance(node, ir.TensorLoad):
            found.append(node.source)
        return None

    tvm_ffi.structural_walk(expr, [(ir.Expr, visit)], order="pre")
    return found


def _written_args(call):
    """Indices of the arguments of ``call`` through which it may write, or None for a call that
    writes through none: ``T.address_of(x[i])``, ``T.access_ptr(x, "w")`` (a write mask) and
    the outputs of ``T.tvm_thread_allreduce(n, values..., cond, outputs..., threads...)``."""
    name = call.op.name
    if name == "tirx.address_of":
        return {0}
    if name in ("tl.access_ptr", "tirx.tvm_access_ptr"):
        mask = const_int(call.args[-1]) if call.args else None
        return {0, 1} if mask is None or mask & 2 else None
    if name == "tirx.tvm_thread_allreduce" and call.args:
        n = const_int(call.args[0])
        if n is None:
            return None
        return set(range(2 + n, min(2 + 2 * n, len(call.args))))
    return None


def effects(stmt):
    """(reads, writes, read_first): buffers one leaf statement reads and writes; ``read_first``
    lists the written buffers whose old value the statement reads (accumulation)."""
    if isinstance(stmt, tirx.BufferStore):
        reads = loads(stmt.value) + [b for i in stmt.indices for b in loads(i)]
        first = [stmt.buffer] if any(b.same_as(stmt.buffer) for b in reads) else []
        return reads, [stmt.buffer], first
    name = op_name(stmt)
    if name is None:
        value = getattr(stmt, "value", None)
        writes = _address_targets(value) if isinstance(stmt, tirx.Evaluate) else []
        return loads(value), writes, []
    args = stmt.value.args
    regions = [decode_region(a) for a in args if isinstance(a, ir.Call) and a.op.name == "tl.region"]
    index_reads = [b for r in regions for s in r.starts for b in loads(s)]
    reads = [r.buffer for r in regions if r.access & 1] + index_reads
    writes = [r.buffer for r in regions if r.access & 2]
    first = []
    if name in GEMMS:
        first = [regions[2].buffer] if const_int(args[6]) == 0 else []
        reads = [regions[0].buffer, regions[1].buffer] + first + index_reads
    elif name == "reduce":
        first = [regions[1].buffer] if const_int(args[4]) == 0 else []
        reads = reads + first
    elif name == "atomic":
        first = [regions[0].buffer]
    return reads, writes, first


def _address_targets(value) -> list:
    """Buffers whose element address is passed to an extern call (``T.atomic_add(C[i], v)``)."""
    out = []

    def visit(node):
        if isinstance(node, ir.Call) and isinstance(node.op, ir.Op):
            for i in sorted(_written_args(node) or ()):
                arg = node.args[i]
                out.extend(loads(arg))
                if isinstance(arg, tirx.Var):       # tvm_access_ptr(type, data, ...): a buffer's data
                    out.append(arg)

    if value is not None:
        tvm_ffi_walk(value, visit)
    return out


def check_dataflow(k, rep) -> None:
    rep.guard("initialisation check", _Init(k, rep).run)
    rep.guard("write-back check", _check_outputs, k, rep)


class _Init:
    """The TL0401 analysis (module docstring)."""

    def __init__(self, k, rep):
        self.k, self.rep = k, rep
        self.tracked = {b for b in k.allocs if k.scope(b) in TRACKED}
        self.reported = set()
        self.loops = []          # enclosing loops, innermost last
        self._roles = None       # thread-index variables and names bound to them (``roles()``)
        self.guarded = []        # (condition, what its then-branch wrote), in program order
        self.flags = {}          # scalar -> what was written where it was set nonzero (``_flag_set``)

    def run(self):
        self.visit(self.k.info.body, frozenset())

    def visit(self, s, state):
        if isinstance(s, tirx.SeqStmt):
            for c in s.seq:
                state = self.visit(c, state)
            return state
        if isinstance(s, tirx.AllocBuffer):
            return state - {s.buffer}
        if isinstance(s, tirx.For):
            return self.visit_for(s, state)
        if isinstance(s, tirx.IfThenElse):
            return self.visit_if(s, state)
        if isinstance(s, tirx.While):   # its body may not run: what it writes does not count after it
            self.read(s, loads(s.condition), state)
            self.visit(s.body, state)
            return state
        if isinstance(s, (tirx.AttrStmt, tirx.DeclBuffer)):
            return self.visit(s.body, state) if getattr(s, "body", None) is not None else state
        if isinstance(s, tirx.Bind):
            self.read(s, loads(s.value), state)
            return state
        reads, writes, first = effects(s)
        for w in writes:
            self.flags.pop(w, None)
        if isinstance(s, tirx.Evaluate) and op_name(s) is None:
            # an extern call given an element's address (ldmatrix into a register array, a
            # dequantiser writing its output) may write through it: not a read of its value
            reads = loads(s.value, skip_addresses=True)
        self.read(s, reads, state, accumulates=first)
        return state | {w for w in writes if w in self.tracked}

    def visit_for(self, s, state):
        self.read(s, loads(s.min) + loads(s.extent), state)
        if const_int(s.extent) == 0:
            return state
        self.loops.append(s)
        try:
            return self.visit(s.body, state)
        finally:
            self.loops.pop()

    def visit_if(self, s, state):
        self.read(s, loads(s.condition), state)
        # what an earlier branch of the same condition wrote is written here too (``if row < n:
        # inv[i] = ...`` in one loop, ``if row < n: ... inv[i]`` in the next: TileOPs' attention)
        same = [w for c, w in self.guarded if tvm.ir.structural_equal(c, s.condition, map_free_vars=True)]
        flag = _flag_test(s.condition)
        if flag is not None and flag in self.flags:   # ``if v[0] != 0:`` of an earlier ``v[0] = 1``
            same.append(self.flags[flag])
        then = self.visit(s.then_case, state.union(*same))
        self.guarded.append((s.condition, then - state))
        first = self._first_iteration(s.condition)
        # (the else-branch of ``if k == 0:`` runs in later iterations, after the first one's then-branch)
        other = self.visit(s.else_case, then if first else state) if s.else_case is not None else state
        for flag, wrote in ((_flag_set(s.then_case, s.else_case), then - state),
                            (_flag_set(s.else_case, s.then_case), other - state)):
            if flag is not None:
                self.flags[flag] = wrote
        if first:
            return then
        if self._thread_role(s.condition):
            return then | other
        return then & other

    def _thread_role(self, cond) -> bool:
        """A condition on the thread index alone (``if tid < 128:``): it splits the block into warp
        roles, and a register written under a role is read by that role's own threads, so a
        write on either side counts (data flow that crosses roles is not followed)."""
        roles = self.roles()
        used = []
        tvm_ffi_walk(cond, lambda n: used.append(n) if isinstance(n, tirx.Var) else None)
        return bool(used) and all(any(v.same_as(r) for r in roles) for v in used) and not loads(cond)

    def roles(self) -> list:
        if self._roles is None:
            self._roles = list(self.k.info.thread_vars.values())

            def visit(st):
                if isinstance(st, tirx.Bind) and not loads(st.value):
                    used = []
                    tvm_ffi_walk(st.value, lambda n: used.append(n) if isinstance(n, tirx.Var) else None)
                    if used and all(any(v.same_as(r) for r in self._roles) for v in used):
                        self._roles.append(st.var)

            walk_stmts(self.k.info.body, visit)
        return self._roles

    def _first_iteration(self, cond) -> bool:
        """``k == min`` for an enclosing loop variable ``k``: taken on that loop's first iteration."""
        if not isinstance(cond, tirx.EQ):
            return False
        for loop in self.loops:
            for var, other in ((cond.a, cond.b), (cond.b, cond.a)):
                if isinstance(var, tirx.Var) and var.same_as(loop.loop_var) and \
                        const_int(other) is not None and const_int(other) == const_int(loop.min):
                    return True
        return False

    def read(self, stmt, buffers, state, accumulates=()):
        for buf in buffers:
            if buf in self.tracked and buf not in state and buf not in self.reported:
                self.reported.add(buf)
                self.report(stmt, buf, any(buf.same_as(a) for a in accumulates))

    def report(self, stmt, buf, accumulates: bool):
        rep, name = self.rep, buf.name
        kind = "fragment" if self.k.scope(buf) == FRAGMENT_SCOPE else "local buffer"
        if op_name(stmt) in GEMMS:
            span = rep.operand_span(stmt, 2)
            message = (f"T.gemm accumulates into {kind} '{name}', which nothing has initialised: "
                       f"registers start with garbage, so the result is undefined")
        elif accumulates:
            span = rep.span(stmt)
            message = f"'{name}' is updated from its own value, but nothing has initialised the {kind}"
        else:
            span = rep.span(stmt)
            message = f"{kind} '{name}' is read before anything writes it"
        anchor = self._anchor(stmt, buf)
        fix = rep.insertion_before(anchor, f"T.clear({name})") if self.k.scope(buf) == FRAGMENT_SCOPE else None
        notes = [Note(f"'{name}' is allocated here", rep.alloc_span(buf))]
        if op_name(stmt) in GEMMS:
            notes.append(Note("T.gemm reads its accumulator unless called with clear_accum=True"))
        rep.emit("TL0401", message, span, notes=notes, fix=fix)


    def _anchor(self, stmt, buf):
        """Where a ``T.clear`` belongs: before the outermost loop entered after the allocation."""
        alloc = self.rep.span(self.k.allocs[buf]) if buf in self.k.allocs else None
        for loop in self.loops:
            span = self.rep.span(loop)
            if alloc is None or (span is not None and span.line > alloc.line):
                return loop
        return stmt


def _scalar_store(stmt):
    """The (scalar, constant) of each top-level ``v[0] = c`` of a branch (none for a missing one)."""
    for c in flatten([stmt]) if stmt is not None else []:
        if isinstance(c, tirx.BufferStore) and len(c.indices) == 1 and const_int(c.indices[0]) == 0 \
                and const_int(c.value) is not None:
            yield c.buffer, const_int(c.value)


def _flag_set(branch, other):
    """The scalar a branch sets nonzero while the other sets it to 0 (``if i < total: ...; v[0] = 1
    else: v[0] = 0``, TileOPs' persistent grouped GEMM): a later ``if v[0] != 0`` runs only
    after that branch."""
    zeroed = {b for b, c in _scalar_store(other) if c == 0}
    for b, c in _scalar_store(branch):
        if c != 0 and b in zeroed:
            return b
    return None


def _flag_test(cond):
    """The scalar ``v`` of a condition ``v[0] != 0`` / ``v[0] == c`` (c nonzero) / ``v[0] > 0``."""
    if isinstance(cond, (tirx.NE, tirx.GT)) and const_int(cond.b) == 0 or \
            isinstance(cond, tirx.EQ) and const_int(cond.b) not in (None, 0):
        load = cond.a
        if isinstance(load, ir.TensorLoad) and len(load.indices) == 1 and const_int(load.indices[0]) == 0:
            return load.source
    return None


def _walk_leaves(stmt, fn, conds=()):
    """Call ``fn(leaf, extra_reads)`` for every leaf statement; loop bounds and conditions are
    passed as reads of a pseudo statement."""
    if isinstance(stmt, tirx.SeqStmt):
        for c in stmt.seq:
            _walk_leaves(c, fn)
    elif isinstance(stmt, tirx.For):
        fn(None, loads(stmt.min) + loads(stmt.extent))
        _walk_leaves(stmt.body, fn)
    elif isinstance(stmt, tirx.While):
        fn(None, loads(stmt.condition))
        _walk_leaves(stmt.body, fn)
    elif isinstance(stmt, tirx.IfThenElse):
        fn(None, loads(stmt.condition))
        _walk_leaves(stmt.then_case, fn)
        if stmt.else_case is not None:
            _walk_leaves(stmt.else_case, fn)
    elif isinstance(stmt, (tirx.AttrStmt, tirx.AllocBuffer, tirx.DeclBuffer)):
        if getattr(stmt, "body", None) is not None:
            _walk_leaves(stmt.body, fn)
    elif isinstance(stmt, tirx.Bind):
        fn(None, loads(stmt.value))
    else:
        fn(stmt, [])


def usage(k, body=None):
    """(written, used, written_at) over the kernel (or ``body``): see the module docstring for
    *used*."""
    written, used, written_at = set(), set(), {}

    def on_leaf(stmt, extra):
        used.update(extra)
        if stmt is None:
            return
        reads, writes, _ = effects(stmt)
        for w in writes:
            written.add(w)
            written_at.setdefault(w, stmt)
        if isinstance(stmt, tirx.Evaluate) and op_name(stmt) is None:
            # an extern call given several addresses reads some of them (atomic_addx4(dst, src),
            # ldmatrix(src, dst)): which ones, it does not say, so each counts as used
            targets = _address_targets(stmt.value)
            if len(targets) > 1:
                used.update(targets)
        others = [r for r in reads if not any(r.same_as(w) for w in writes)]
        used.update(others)
        if not writes:
            used.update(reads)

    _walk_leaves(k.info.body if body is None else body, on_leaf)
    return written, used, written_at


def _check_outputs(k, rep) -> None:
    written, used, written_at = usage(k)
    for other in getattr(k, "siblings", ()):       # the other kernels of the same prim_func
        w, u, _ = usage(k, other.body)
        written |= w
        used |= u
    params = k.params()
    outs = _out_params(k, params)
    views = []              # (view, source): T.Tensor(shape, dtype, p.data) / T.view(p) declared in the body

    def collect(s):
        data = getattr(s, "data", None) if isinstance(s, tirx.DeclBuffer) else None
        if isinstance(data, ir.Call) and data.args and tirx.is_buffer_var(data.args[0]):
            views.append((s.buffer, data.args[0]))

    walk_stmts(k.info.func.body, collect)

    def aliased(p, bufs):   # written or read through a view of the parameter's storage
        return any(v.same_as(b) and src.same_as(p) for v, src in views for b in bufs)

    # without out_idx, which tensors are outputs the kernel does not say: one it neither reads nor
    # writes is reported only when the kernel writes no tensor at all (then the output it should
    # write is among them); an input skipped for these values (``if use_bias:``) is no output
    writes_some = any(p in written or aliased(p, written) for p in params)
    for p in params:
        if p in written or aliased(p, written):
            continue
        if outs is not None and p in outs:
            rep.emit("TL0402", f"output '{p.name}' is never written: the kernel returns uninitialised "
                     f"memory", rep.param_span(p.name),
                     notes=[Note(f"out_idx={list(k.ctx.out_idx)} makes '{p.name}' an output")])
        elif outs is None and not writes_some and p not in used and not aliased(p, used):
            rep.emit("TL0402", f"tensor '{p.name}' is neither read nor written: if it is the kernel's "
                     f"output, the result is never written back", rep.param_span(p.name))
    for buf, stmt in written_at.items():
        scope = k.scope(buf)
        if buf in k.allocs and (scope == FRAGMENT_SCOPE or scope in SHARED_SCOPES) and buf not in used:
            rep.emit("TL0403", f"'{buf.name}' is computed but its value is never used",
                     rep.alloc_span(buf), notes=[Note(f"'{buf.name}' is written here", rep.span(stmt))])


def _out_params(k, params):
    if k.ctx.out_idx is None:
        return None
    out = set()
    for i in k.ctx.out_idx:
        j = i + len(k.func.params) if i < 0 else i
        if 0 <= j < len(k.func.params) and k.func.params[j] in params:
            out.add(k.func.params[j])
    return out
