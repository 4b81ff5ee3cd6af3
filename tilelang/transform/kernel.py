"""What the passes need to know about one kernel: its launch, its buffers and its tile ops.

``analyze_kernel`` peels the ``thread_extent`` attributes that ``T.Kernel`` produced and indexes
every buffer by scope. ``Region`` is the decoded form of a ``tl.region`` operand.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from tvm import ir, tirx

from tilelang.language._ops import is_tl_call
from tilelang.language.dtypes import nbytes
from tilelang.tir_utils import children, const_int, i32, simplify, walk_stmts

SHARED_SCOPES = ("shared", "shared.dyn")
FRAGMENT_SCOPE = "local.fragment"


class LoweringError(Exception):
    """A user-facing compile error: message plus the span of the offending statement."""

    def __init__(self, code: str, message: str, span=None, notes=None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.span = span
        self.notes = notes or []


@dataclass
class Region:
    buffer: object
    starts: list
    extents: list
    access: int

    @property
    def scope(self) -> str:
        return scope_of(self.buffer)

    @property
    def dtype(self) -> str:
        return str(self.buffer.dtype)

    def nonunit(self):
        """(dims, extents) of the dimensions whose extent is not the constant 1."""
        dims = [d for d, e in enumerate(self.extents) if const_int(e) != 1]
        return dims, [self.extents[d] for d in dims]

    def is_whole(self) -> bool:
        return all(const_int(s) == 0 for s in self.starts) and all(
            const_int(e) == const_int(n) for e, n in zip(self.extents, self.buffer.shape))


def scope_of(buffer) -> str:
    return str(buffer.scope())


def decode_region(call) -> Region:
    load = call.args[0]
    access = int(call.args[1].value)
    return Region(load.source, list(load.indices), list(call.args[2:]), access)


@dataclass
class KernelInfo:
    func: object
    launch: list                 # [(iter_var, extent)] outer to inner
    body: object                 # the statement inside the innermost thread_extent
    block_vars: dict             # tag -> Var
    thread_vars: dict            # tag -> Var
    threads: list                # extents of threadIdx.x/y/z
    buffers: dict = field(default_factory=dict)   # Var -> scope for every allocated buffer

    @property
    def num_threads(self) -> int:
        return math.prod(self.threads)

    @property
    def tid(self):
        """The flat thread index within the block."""
        x = self.thread_vars.get("threadIdx.x")
        expr = x if x is not None else i32(0)
        if "threadIdx.y" in self.thread_vars:
            expr = expr + self.thread_vars["threadIdx.y"] * self.threads[0]
        if "threadIdx.z" in self.thread_vars:
            expr = expr + self.thread_vars["threadIdx.z"] * (self.threads[0] * self.threads[1])
        return expr

    def launch_dims(self) -> dict:
        """{thread tag: (its Var, its extent)} of the kernel's launch."""
        return {str(iv.thread_tag): (iv.var, e) for iv, e in self.launch}

    def shared_buffers(self):
        return [b for b, s in self.buffers.items() if s in SHARED_SCOPES]

    def fragment_buffers(self):
        return [b for b, s in self.buffers.items() if s == FRAGMENT_SCOPE]


def analyze_kernel(func) -> KernelInfo:
    launch, stmt = [], func.body
    block_vars, thread_vars, threads = {}, {}, []
    while isinstance(stmt, tirx.AttrStmt) and stmt.attr_key == "thread_extent":
        iv = stmt.node
        tag = str(iv.thread_tag)
        launch.append((iv, stmt.value))
        if tag.startswith("threadIdx"):
            thread_vars[tag] = iv.var
            threads.append(const_int(stmt.value))
        else:
            block_vars[tag] = iv.var
        stmt = stmt.body
    if not thread_vars:
        kernels = _launch_sites(func.body)
        if len(kernels) > 1:
            lines = ", ".join(str(int(s.span.line)) for s in kernels if getattr(s, "span", None) is not None)
            raise LoweringError(
                "TL0002", f"this prim_func opens {len(kernels)} `with T.Kernel(...)` blocks"
                + (f" (lines {lines})" if lines else "") + ": one prim_func launches one kernel here",
                getattr(kernels[1], "span", None),
                notes=["Split it into one @T.prim_func per T.Kernel (each its own jit kernel) and call them in "
                       "order from Python."])
        raise LoweringError("TL0002", "the kernel body must be inside `with T.Kernel(...)`",
                            getattr(func.body, "span", None))
    info = KernelInfo(func, launch, stmt, block_vars, thread_vars, threads)

    def visit(s):
        if isinstance(s, tirx.AllocBuffer):
            info.buffers[s.buffer] = scope_of(s.buffer)

    walk_stmts(stmt, visit)
    return info


def _launch_sites(body) -> list:
    """The outermost ``thread_extent`` attributes (one per ``with T.Kernel``) under ``body``."""
    out = []

    def go(s):
        if isinstance(s, tirx.AttrStmt) and s.attr_key == "thread_extent":
            out.append(s)
            return
        for c in children(s):
            go(c)

    go(body)
    return out


def tile_calls(stmt):
    """All ``tl.*`` calls (Evaluate statements) under ``stmt``, in program order."""
    out = []

    def visit(s):
        if isinstance(s, tirx.Evaluate) and is_tl_call(s.value):
            out.append(s)

    walk_stmts(stmt, visit)
    return out


def op_name(stmt) -> str | None:
    if isinstance(stmt, tirx.Evaluate) and is_tl_call(stmt.value):
        return stmt.value.op.name[3:]
    return None


def buffer_bytes(buffer) -> int:
    return math.prod(const_int(s) for s in buffer.shape) * nbytes(str(buffer.dtype))


def is_parallel_nest(stmt) -> bool:
    return isinstance(stmt, tirx.For) and "tl.parallel" in stmt.annotations


def parallel_nest(stmt):
    """(loop_vars, extents, body) of a T.Parallel nest starting at ``stmt``."""
    depth = int(stmt.annotations["tl.parallel"])
    loop_vars, extents, s = [], [], stmt
    for _ in range(depth):
        loop_vars.append(s.loop_var)
        extents.append(s.extent)
        s = s.body
    return loop_vars, extents, s


def buffer_accesses(stmt):
    """[(buffer, indices, is_store)] of every element access under ``stmt`` (pre-order)."""
    out = []

    def on_expr(e):
        if isinstance(e, ir.TensorLoad):
            out.append((e.source, list(e.indices), False))

    import tvm_ffi

    def on_stmt(s):
        if isinstance(s, tirx.BufferStore):
            out.append((s.buffer, list(s.indices), True))

    walk_stmts(stmt, on_stmt)
    tvm_ffi.structural_walk(stmt, [(ir.TensorLoad, lambda e: (on_expr(e), None)[1])], order="pre")
    return out
