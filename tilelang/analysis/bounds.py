"""Element accesses of global tensors that can fall outside the tensor and that nothing guards (TL0602).

Input: a ``Kernel`` with concrete shapes. The compiler guards global element accesses itself, as
upstream's safe-memory-access pass does (``Lowerer.global_guard``: stores skipped, loads read 0):
tile operators, accesses inside ``T.Parallel``, and plain scalar accesses in thread-indexed code
(``C[idx] = A[idx] + B[idx]`` on a grid that overhangs N; a call taking an element's address,
``T.atomic_add(C[idx], v)``, runs only where the element is inside). So this checks only what stays
unguarded: outside ``T.Parallel``, a vector access (a ``T.Ramp`` index) and an element whose
address is taken in a store's value or a bind (unless its index moves with a scalar parameter:
``T.address_of(X[off])``, a base address the caller chooses), and every plain access when
``tl.disable_safe_memory_access`` switches the guards off. Each index is checked under what is known where it runs: the block and
thread ranges, enclosing loop ranges, enclosing ``if`` conditions, and the value of scalar locals
assigned exactly once (``idx = bx * 1024 + tx``). An access is reported only when the index is not
provably inside and its bound does reach outside; indices that depend on loaded data are skipped
(no false alarms). Loads under ``T.if_then_else`` count as guarded.
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import ir, tirx

from tilelang.diagnostics import Note
from tilelang.tir_utils import ExprRewriter, as_logical, const_int, has_load, uses_vars, walk_stmts
from tilelang.transform.kernel import op_name


def check_bounds(k, rep) -> None:
    _Bounds(k, rep).run()


class _Scalars(ExprRewriter):
    """Replace loads of single-assignment scalar locals by their value."""

    def __init__(self, values):
        self.values = values

    def visit_load(self, load, indices):
        value = self.values.get(load.source)
        if value is not None:
            return self.visit(value)
        return super().visit_load(load, indices)


class _Bounds:
    def __init__(self, k, rep):
        self.k, self.rep = k, rep
        self.an = tvm.sym.Analyzer()
        for iv, extent in k.info.launch:
            self.an.bind(iv.var, tvm.ir.Range(0, extent))
        self.scalars = _Scalars(_single_assignments(k))
        self.reported = set()
        self.guarded = not k.ctx.pass_configs.get("tl.disable_safe_memory_access")
        # scalar parameters (not tensor shapes' symbols, which are concrete here)
        self.free_scalars = [p for p in k.func.params if not tirx.is_buffer_var(p)
                             and not isinstance(getattr(p, "ty", None), ir.PointerType)]

    def run(self):
        self.visit(self.k.info.body)

    def visit(self, s):
        if isinstance(s, tirx.SeqStmt):
            for c in s.seq:
                self.visit(c)
        elif isinstance(s, tirx.For):
            if "tl.parallel" in s.annotations:
                return  # the compiler guards global accesses of T.Parallel bodies
            if const_int(s.extent) is not None and const_int(s.min) is not None:
                self.an.bind(s.loop_var, tvm.ir.Range.from_min_extent(s.min, s.extent))
            elif const_int(s.min) is not None:  # a bounded symbolic trip count (range(tid % 32))
                top = self.an.const_int_bound(s.extent).max_value
                if top < (1 << 31) - 1:
                    self.an.bind(s.loop_var, tvm.ir.Range.from_min_extent(s.min, max(int(top), 1)))
            elif const_int(s.extent) is not None:   # a variable start: T.serial(bx, bx + 4)
                self.an.bind(s.loop_var, tvm.ir.Range.from_min_extent(s.min, s.extent))
            self.visit(s.body)
        elif isinstance(s, tirx.IfThenElse):
            cond = as_logical(self.scalars.visit(s.condition))
            with self.an.constraint_scope(cond):
                self.visit(s.then_case)
            if s.else_case is not None:
                with self.an.constraint_scope(tirx.Not(cond)):
                    self.visit(s.else_case)
        elif isinstance(s, (tirx.AttrStmt, tirx.AllocBuffer, tirx.DeclBuffer)):
            if getattr(s, "body", None) is not None:
                self.visit(s.body)
        elif op_name(s) is None:
            if isinstance(s, tirx.Bind) and _scalar_index(s.value):  # T.let: the name stands for its value
                self.an.bind(s.var, s.value)
            self.leaf(s)

    def leaf(self, s):
        accesses = []
        if isinstance(s, tirx.BufferStore):
            accesses.append((s.buffer, list(s.indices), True, False))
            exprs = [s.value, *s.indices]
        else:
            exprs = [getattr(s, "value", None)]
        for e in exprs:
            if e is not None and not isinstance(e, (int, float, str)):
                accesses += [(ld.source, list(ld.indices), False, pointer) for ld, pointer in _unguarded_loads(e)]
        for buf, indices, store, pointer in accesses:
            if self.guarded and (not pointer or isinstance(s, tirx.Evaluate)) and \
                    not any(isinstance(i, tirx.Ramp) for i in indices):
                continue    # the compiler guards it (Lowerer.global_guard; a call taking the address: all of it)
            if self.k.scope(buf) == "global" and buf not in self.reported:
                self.check_access(s, buf, indices, store, pointer)

    def check_access(self, stmt, buf, indices, store, pointer=False):
        for d, (index, extent) in enumerate(zip(indices, buf.shape)):
            n = const_int(extent)
            e = self.scalars.visit(index)
            if n is None or _has_load(e):
                continue
            if pointer and uses_vars(e, self.free_scalars):
                continue    # a base address offset by a runtime scalar (T.address_of(X[off])): the
                #             caller's value, as unknown as loaded data, and nothing is read there
            floor, vector = 0, isinstance(e, tirx.Ramp)
            if vector:   # a vector access (T.Ramp): its last lane reaches furthest
                lanes = const_int(e.lanes)
                if lanes is None:
                    continue
                e = e.base + e.stride * (lanes - 1)
                floor = -n                 # negative lanes count from the end (transform/negative_index.py)
            bound = self.an.const_int_bound(e)
            high = not self.an.can_prove(tirx.LT(e, extent)) and bound.max_value >= n
            low = not self.an.can_prove(tirx.GE(e, floor)) and bound.min_value < floor
            if high or low:
                self.reported.add(buf)
                self.report(stmt, buf, d, index, n, bound, store, vector)
                return

    def report(self, stmt, buf, d, index, n, bound, store, vector=False):
        index = _source_index(self.rep.ast_node(stmt), buf.name, d, store) or index
        verb = "writes" if store else "reads"
        reach = bound.max_value if bound.max_value >= n else bound.min_value
        where = f"dimension {d} of " if len(buf.shape) > 1 else ""
        guard = (f"guard it so that the vector's last lane stays below {n}" if vector
                 else f"guard it: `if {index} < {n}:`")
        self.rep.emit("TL0602", f"this statement {verb} '{buf.name}' at index {index}, which can reach "
                      f"{reach}, but {where}'{buf.name}' has {n} elements and nothing guards the access",
                      self.rep.span(stmt),
                      notes=[Note(f"{guard} (or bind only sizes that are multiples of the tile)")])


def _source_index(node, name, d, store):
    """The user's spelling of index ``d`` of ``name[...]`` in the statement's source, if found."""
    import ast

    if node is None:
        return None
    for sub in ast.walk(node):
        if isinstance(sub, ast.Subscript) and isinstance(sub.value, ast.Name) and sub.value.id == name \
                and isinstance(sub.ctx, ast.Store) == store:
            items = sub.slice.elts if isinstance(sub.slice, ast.Tuple) else [sub.slice]
            return ast.unparse(items[d]) if d < len(items) else None
    return None


def _unguarded_loads(expr) -> list:
    """``(TensorLoad, whether its address is taken)`` for the loads in ``expr`` that are not under
    a ``T.if_then_else``."""
    found = []

    def on_call(node):
        if isinstance(node.op, ir.Op) and node.op.name.endswith(".if_then_else"):
            return tvm_ffi.WalkResult.SKIP
        arg = node.args[0] if len(node.args) == 1 else None
        if isinstance(node.op, ir.Op) and node.op.name.endswith(".address_of") and isinstance(arg, ir.TensorLoad):
            found.append((arg, True))   # a pointer: the compiler cannot make it read 0
            for i in arg.indices:
                found.extend(_unguarded_loads(i))
            return tvm_ffi.WalkResult.SKIP
        return None

    def on_load(node):
        found.append((node, False))
        return None

    tvm_ffi.structural_walk(expr, [(ir.Call, on_call), (ir.TensorLoad, on_load)], order="pre")
    return found


def _scalar_index(expr) -> bool:
    """A scalar integer expression reading no memory (what the analyzer may substitute)."""
    dtype = getattr(getattr(expr, "ty", None), "dtype", None)
    return dtype is not None and dtype.lanes == 1 and dtype.type_code in (0, 1) and not _has_load(expr)


def _has_load(expr) -> bool:
    """Whether ``expr`` reads memory anywhere (guarded or not)."""
    return not isinstance(expr, (int, float)) and has_load(expr)


def _single_assignments(k) -> dict:
    """Scalar locals stored exactly once, with a value that reads no memory: buffer -> value."""
    stores = {}

    def visit(s):
        if isinstance(s, tirx.BufferStore) and s.buffer in k.allocs and k.scope(s.buffer) == "local":
            stores.setdefault(s.buffer, []).append(s)

    walk_stmts(k.info.body, visit)
    out = {}
    for buf, items in stores.items():
        shape = [const_int(x) for x in buf.shape]
        if len(items) == 1 and shape in ([1], []) and not _has_load(items[0].value):
            out[buf] = items[0].value
    return out
