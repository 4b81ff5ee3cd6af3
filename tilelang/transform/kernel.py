"""What the passes need to know about one kernel: its launch, its buffers and its tile ops.

``analyze_kernel`` peels the ``thread_extent`` attributes that ``T.Kernel`` produced and indexes
every buffer by scope, after normalising the body: views resolved (``resolve_views``), global
tensors with a ``T.annotate_layout`` addressed through it (``apply_global_layouts``), partial
fragment copies as element loops (``expand_fragment_copies``), loops writing a fragment block at
constant offsets counted from its origin (``widen_fragment_blocks``). ``Region`` is the decoded
form of a ``tl.region`` operand.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import tvm
from tvm import DataType, ir, tirx

from tilelang.diagnostics import TileLangCompileError
from tilelang.language._ops import is_tl_call
from tilelang.language.alloc import TFLOAT32
from tilelang.language.dtypes import nbytes
from tilelang.layout.layout import unpack_layout_expr
from tilelang.tir_utils import (ExprRewriter, children, const_int, dtype_of, free_vars, i32, map_stmts, seq, simplify,
                                substitute, substitute_stmt, uses_vars, walk_stmts)

SHARED_SCOPES = ("shared", "shared.dyn")
FRAGMENT_SCOPE = "local.fragment"
REGISTER_SCOPES = ("local", FRAGMENT_SCOPE, "local.var")   # a thread's own registers
ALL_SCOPES = ("global",) + SHARED_SCOPES + REGISTER_SCOPES
SAFE_VALUE_ATTR = "tl.safe_value"   # T.annotate_safe_value (tilelang.language.annotate)
CUDA_SOURCE_ATTR = "tl.cuda_source_kernel"   # T.CUDASourceCodeKernel (tilelang.language.source_kernel)


class LoweringError(Exception):
    """A user-facing compile error: message plus the span of the offending statement."""

    def __init__(self, code: str, message: str, span=None, notes=None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.span = span
        self.notes = notes or []


# Errors upstream raises as ``tvm.error.InternalError`` (its tests match that type): a compile
# error whose message starts with one of these is also an InternalError (``compile_error``).
INTERNAL_ERROR_PREFIXES = ("T.wgmma_gemm() requires Hopper WGMMA lowering",
                           "T.async_copy only supports global->shared/shared.dyn copies",
                           "SIMT copy from packed global float4_e2m1fn")


class CompileInternalError(TileLangCompileError, tvm.error.InternalError):
    """A ``TileLangCompileError`` that is also the ``tvm.error.InternalError`` upstream raises."""

    def __init__(self, diagnostics, sources=None):
        TileLangCompileError.__init__(self, diagnostics, sources)

    def __str__(self) -> str:
        return TileLangCompileError.__str__(self)


def compile_error(diagnostics) -> TileLangCompileError:
    """The compile error for ``diagnostics`` (a ``CompileInternalError`` where upstream's type is
    ``InternalError``, see ``INTERNAL_ERROR_PREFIXES``)."""
    diagnostics = list(diagnostics)
    internal = any(d.message.startswith(INTERNAL_ERROR_PREFIXES) for d in diagnostics)
    return (CompileInternalError if internal else TileLangCompileError)(diagnostics)


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


def static_shape(buffer) -> bool:
    """Whether every extent of ``buffer`` is a compile-time constant."""
    return all(const_int(x) is not None for x in buffer.shape)


def _scope_level(region: Region) -> int:
    """How local a copy's side is: global 0, shared 1, fragment / local 2."""
    scope = scope_of(region.buffer)
    return 0 if scope == "global" else 1 if scope in SHARED_SCOPES else 2


def copy_base_extents(src: Region, dst: Region, se, de):
    """The tile of a T.copy whose regions pair up dimension by dimension but differ in extent, as
    upstream sizes it: the extents of the more local side (the source's on a tie), provided none
    is smaller than the source's (that copy would drop elements: None, an error). The checker
    warns about such a copy (TL0601)."""
    if len(se) != len(de):
        return None
    base = de if _scope_level(dst) > _scope_level(src) else se
    return None if any(b < s for b, s in zip(base, se)) else list(base)


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
    safe_values: dict = field(default_factory=dict)   # tensor Var -> what an out-of-bounds read gives
    tfloat32: set = field(default_factory=set)   # tiles allocated as T.tfloat32 (their values are tf32)

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
    aliases = {}   # an explicit T.launch_thread of a tag T.Kernel already bound: the same index
    while isinstance(stmt, tirx.AttrStmt) and stmt.attr_key == "thread_extent":
        iv = stmt.node
        tag = str(iv.thread_tag)
        known = next(((v, e) for v, e in launch if str(v.thread_tag) == tag), None)
        if known is not None:
            if const_int(known[1]) != const_int(stmt.value):
                raise LoweringError(
                    "TL0002", f"T.launch_thread(\"{tag}\", {stmt.value}) inside a T.Kernel that launches "
                    f"{known[1]} along {tag}", getattr(stmt, "span", None),
                    notes=["An explicit launch_thread of a tag the kernel already binds names the same index: "
                           "give it the same extent."])
            aliases[iv.var] = known[0].var
            stmt = stmt.body
            continue
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
    if aliases:
        stmt = substitute_stmt(stmt, aliases)
    _check_unrolled_breaks(stmt)
    stmt = widen_fragment_blocks(expand_fragment_copies(apply_global_layouts(resolve_views(stmt))))
    if None not in threads:
        stmt = chunk_unbounded_parallel(expand_unbounded_copies(stmt), math.prod(threads))
    stmt, safe = _strip_safe_values(stmt)
    info = KernelInfo(func, launch, stmt, block_vars, thread_vars, threads, safe_values=safe)
    sizes = _size_symbols(func)

    def visit(s):
        if isinstance(s, tirx.AllocBuffer):
            info.buffers[s.buffer] = scope_of(s.buffer)
            if s.annotations is not None and TFLOAT32 in s.annotations:
                info.tfloat32.add(s.buffer)
            if scope_of(s.buffer) in (FRAGMENT_SCOPE, "local") and not static_shape(s.buffer):
                raise LoweringError(
                    "TL0002", f"'{s.buffer.name}' is allocated with shape {list(s.buffer.shape)}: register buffers "
                    "(fragments, locals) need compile-time extents (a shared buffer may have run-time ones)",
                    getattr(s, "span", None) or getattr(s.buffer, "span", None),
                    notes=["Allocate the largest tile the kernel handles (a constant, or a bound of the symbol) and "
                           "copy only the part in use (T.copy of a run-time extent guards the rest)."])
            if scope_of(s.buffer) not in (FRAGMENT_SCOPE, "local") and not static_shape(s.buffer):
                _check_launch_sized(s, sizes)
            if scope_of(s.buffer) == "shared.tmem":   # T.alloc_tmem (tilelang/language/tmem.py)
                raise LoweringError(
                    "TL0002", f"'{s.buffer.name}' is sm_100 tensor memory (T.alloc_tmem): this TileLang does not "
                    "generate tcgen05 / tensor-memory code (targets: sm_80, sm_90a)",
                    getattr(s, "span", None) or getattr(s.buffer, "span", None),
                    notes=["On sm_90a accumulate into T.alloc_fragment and multiply with T.gemm (wgmma)."])

    walk_stmts(stmt, visit)
    return info


@dataclass
class KernelSplit:
    """A prim_func cut at its top-level ``with T.Kernel`` blocks (``split_kernels``)."""
    funcs: list          # one PrimFunc per kernel, in launch order: the original params + workspaces
    workspaces: list     # the T.alloc_global buffers (Vars), appended to every part's params


def _size_symbols(func) -> set:
    """The variables a launch knows: the scalar parameters and the symbols of the tensors' shapes
    and strides."""
    out = set()
    for p in func.params:
        if tirx.is_buffer_var(p):
            for e in list(p.shape) + list(p.strides or []):
                out |= set(free_vars(e))
        else:
            out.add(p)
    return out


def _check_launch_sized(alloc, sizes):
    """A shared buffer of run-time extent is sized at launch (``Lowerer._plan_tail``), so its
    extents may use only what the launch knows: not a loop variable, a block index or a value
    computed in the kernel."""
    for e in alloc.buffer.shape:
        other = [v for v in free_vars(e) if v not in sizes]
        if other:
            raise LoweringError(
                "TL0002", f"'{alloc.buffer.name}' is allocated with shape {list(alloc.buffer.shape)}, which varies "
                f"with '{other[0].name}' inside the kernel: a shared buffer's run-time extents may use only the "
                "kernel's parameters and tensor size symbols (the launch sizes its dynamic shared memory)",
                getattr(alloc, "span", None) or getattr(alloc.buffer, "span", None),
                notes=["Allocate the largest tile the kernel handles (a constant) and copy only the part in use "
                       "(T.copy of a run-time extent guards the rest)."])


def split_kernels(func):
    """Cut ``func`` into the kernels it launches, in order, or return None when it is one kernel
    already (its body starts with the launch).

    The top level of the body may hold, besides the ``with T.Kernel`` blocks: ``T.alloc_global``
    buffers (scratch memory the launcher allocates and passes to every part), name bindings
    (substituted into the kernels after them), evaluated calls such as ``T.assume`` and views of
    global memory (``T.Tensor(shape, dtype, x.data)``), repeated at the start of every kernel
    after them. Anything else is a located TL0002 error."""
    body = func.body
    if isinstance(body, tirx.AttrStmt) and body.attr_key == "thread_extent":
        return None
    stmts, kernels, workspaces, binds, preludes = _flatten(body), [], [], {}, []
    host_locals = []   # thread-local scalars written at host level (``shape = [batch, ...]``)
    for s in stmts:
        if isinstance(s, tirx.AllocBuffer) and scope_of(s.buffer) == "local":
            host_locals.append(s)
    for s in stmts:
        if isinstance(s, tirx.AttrStmt) and s.attr_key == "thread_extent":
            kernel = substitute_stmt(s, dict(binds)) if binds else s
            kernels.append(_with_prelude(kernel, preludes))
        elif isinstance(s, tirx.AllocBuffer) and scope_of(s.buffer) == "global":
            workspaces.append(s.buffer)
        elif isinstance(s, tirx.Bind):
            binds[s.var] = substitute(s.value, dict(binds)) if binds else s.value
        elif isinstance(s, tirx.Evaluate) or (isinstance(s, tirx.DeclBuffer) and scope_of(s.buffer) == "global"):
            preludes.append(s)     # (T.Tensor(shape, dtype, x.data): a view of a parameter, TileOPs' conv)
        elif any(s.same_as(a) for a in host_locals) or (
                isinstance(s, tirx.BufferStore) and any(s.buffer.same_as(a.buffer) for a in host_locals)):
            continue   # only kept out of the kernels when no kernel reads it (checked below)
        elif isinstance(s, tirx.AllocBuffer):
            raise LoweringError("TL0002", f"'{s.buffer.name}' (scope '{scope_of(s.buffer)}') is allocated outside "
                                "`with T.Kernel(...)`: only T.alloc_global buffers live there",
                                getattr(s, "span", None))
        else:
            raise LoweringError("TL0002", "the kernel body must be inside `with T.Kernel(...)`",
                                getattr(s, "span", None) or getattr(body, "span", None))
    if not kernels:
        raise LoweringError("TL0002", "the kernel body must be inside `with T.Kernel(...)`",
                            getattr(body, "span", None))
    for a in host_locals:
        if any(uses_vars(k, [a.buffer]) for k in kernels):
            raise LoweringError("TL0002", f"'{a.buffer.name}' (scope 'local') is written outside "
                                "`with T.Kernel(...)` and read inside it: compute it inside the kernel",
                                getattr(a, "span", None))
    params = list(func.params) + workspaces
    attrs = func.attrs
    funcs = [tirx.PrimFunc(params, k, attrs=attrs, span=func.span) if (len(kernels) > 1 or workspaces)
             else func.with_body(k) for k in kernels]
    return KernelSplit(funcs, workspaces)


HOST_LOOP_LIMIT = 64     # launches a host-level `for` around `with T.Kernel` may unroll into


def _flatten(stmt) -> list:
    """The top-level statements of a prim_func body; a host-level ``for`` of constant extent whose
    body launches kernels (``for s in range(stages): with T.Kernel(...)``, TileOPs' FFT) unrolled,
    its variable a constant in each copy: those kernels launch in that order, as upstream's host
    loop launches them."""
    if isinstance(stmt, tirx.SeqStmt):
        return [x for c in stmt.seq for x in _flatten(c)]
    if isinstance(stmt, tirx.For) and _launch_sites(stmt.body):
        lo, n = const_int(stmt.min), const_int(stmt.extent)
        if lo is None or n is None or n > HOST_LOOP_LIMIT or stmt.kind not in (tirx.ForKind.SERIAL,
                                                                              tirx.ForKind.UNROLLED):
            raise LoweringError(
                "TL0002", f"a host-level loop around `with T.Kernel(...)` launches its kernels once per iteration "
                f"here only for a constant trip count of at most {HOST_LOOP_LIMIT} (got {stmt.extent})",
                getattr(stmt, "span", None),
                notes=["Launch the kernel from a Python loop instead (one jit kernel, called once per step), "
                       "or pass the step as a kernel argument."])
        return [x for k in range(n) for x in _flatten(substitute_stmt(stmt.body, {stmt.loop_var: i32(lo + k)}))]
    return [stmt]


def _with_prelude(kernel, preludes):
    """``kernel`` with the statements ``preludes`` first inside its innermost launch attribute."""
    if not preludes:
        return kernel
    chain, s = [], kernel
    while isinstance(s, tirx.AttrStmt) and s.attr_key == "thread_extent":
        chain.append(s)
        s = s.body
    inner = tirx.SeqStmt(list(preludes) + [s])
    for attr in reversed(chain):
        inner = tirx.AttrStmt(attr.node, attr.attr_key, attr.value, inner, attr.span)
    return inner


def _check_unrolled_breaks(body):
    """A ``T.loop_break()`` (or ``continue``) that leaves a loop expanded in the IR
    (``T.unroll(..., explicit=True)``) has no loop left to leave: a located error (nvcc's
    "a break statement may only be used within a loop" otherwise)."""
    def own_exits(stmt):
        found = []

        def visit(s):
            if isinstance(s, (tirx.Break, tirx.Continue)) or (
                    isinstance(s, tirx.Evaluate) and isinstance(s.value, ir.Call)
                    and getattr(s.value.op, "name", "") in ("tirx.break_loop", "tirx.continue_loop")):
                found.append(s)
            elif isinstance(s, (tirx.For, tirx.While)):
                return      # (exits of an inner loop leave that loop)
            for c in children(s):
                visit(c)

        for c in children(stmt):
            visit(c)
        return found

    def check(s):
        exits = own_exits(s) if isinstance(s, tirx.For) and s.kind == tirx.ForKind.UNROLLED else []
        if exits:
            exit_ = exits[0]
            word = "continue" if isinstance(exit_, tirx.Continue) or "continue" in str(
                getattr(getattr(exit_, "value", None), "op", "")) else "T.loop_break()"
            raise LoweringError("TL0002", f"{word} inside a loop unrolled in the IR (T.unroll(..., explicit=True)): "
                                "the unrolled copies have no loop to leave", getattr(exit_, "span", None) or s.span,
                                notes=["use T.unroll(...) without explicit=True (nvcc unrolls it and keeps the "
                                       "exit) or T.serial(...)"])

    walk_stmts(body, check)


def resolve_views(body):
    """``T.reshape``/``T.view`` of a shared or fragment buffer: every element access to the view
    becomes an access to its buffer at the same row-major position (a view of a shared buffer as
    another element type, or of a register buffer as another type of the same width, reads or
    writes the same bytes through the buffer's elements, see
    ``_ViewRewriter``; the address of such an element is its first byte's, as a pointer to the
    view's type; a row-major ``T.annotate_layout`` of such a view is dropped), and a
    ``T.copy`` of the whole view becomes the element-wise ``T.Parallel`` loop it means, so the
    buffer keeps the one layout the compiler gives it. A reduction, scan, fill or gemm of a view
    runs on a staged copy of it (``_staged_view_op``: a gemm on a (B, D) fp8 view of a page's
    bytes). Other tile ops on such a view are a located TL0002 error. A view with explicit strides
    (``T.view(x, shape, strides=...)``) places its elements at those strides instead of row-major;
    a global tensor's strided view is resolved the same way (same element type only). Other views
    of global tensors are kept (their declaration shares the storage)."""
    views = {}

    def collect(s):
        # (a view of a global tensor with explicit strides too: TVM 0.27 flattens such a
        # declaration as if it had none)
        if isinstance(s, tirx.DeclBuffer) and (scope_of(s.buffer) != "global" or list(s.buffer.strides)):
            data = s.data
            if isinstance(data, ir.Call) and data.args and tirx.is_buffer_var(data.args[0]):
                src = data.args[0]
                if scope_of(s.buffer) == "global" and str(src.dtype) != str(s.buffer.dtype):
                    raise LoweringError("TL0002", f"T.view of the tensor '{src.name}' as {s.buffer.dtype} with "
                                        "strides is not supported: view it with strides in its own type",
                                        getattr(s, "span", None))
                if str(src.dtype) != str(s.buffer.dtype):
                    why = _reinterpret_blocker(src, s.buffer)
                    if why:
                        raise LoweringError("TL0002", f"T.view of '{src.name}' (scope '{scope_of(src)}') as "
                                            f"{s.buffer.dtype}: {why}", getattr(s, "span", None))
                views[s.buffer] = src

    walk_stmts(body, collect)
    if not views:
        return body
    # A view of a view reads the bytes of the first one's buffer in the same row-major order, so it
    # is a view of that buffer (``T.view(T.view(f, (2, 64)), (128,))``).
    def root(buf):
        while True:
            up = next((src for v, src in views.items() if v.same_as(buf)), None)
            if up is None:
                return buf
            buf = up

    for v in list(views):
        base = root(views[v])
        if not base.same_as(views[v]):
            why = _reinterpret_blocker(base, v) if str(base.dtype) != str(v.dtype) else None
            if why:
                raise LoweringError("TL0002", f"T.view of '{views[v].name}', itself a view of '{base.name}', "
                                    f"as {v.dtype}: {why}", None)
            views[v] = base
    rw = _ViewRewriter(views)

    def view_of(buf):
        return next((v for v in views if v.same_as(buf)), None)

    def go(s):
        if isinstance(s, tirx.SeqStmt):
            return seq([x for x in (go(c) for c in s.seq) if x is not None])
        if isinstance(s, tirx.DeclBuffer) and view_of(s.buffer) is not None:
            return None
        if isinstance(s, tirx.Evaluate) and is_tl_call(s.value, "annotate_layout"):
            v = view_of(s.value.args[0].source)
            if v is not None and str(v.dtype) != str(views[v].dtype):
                return _reinterpreting_view_annotation(s, v, views[v])
        if isinstance(s, tirx.Evaluate) and is_tl_call(s.value):
            regions = [a for a in s.value.args if isinstance(a, ir.Call) and getattr(a.op, "name", "") == "tl.region"]
            touched = [r for r in regions if view_of(r.args[0].source) is not None]
            if not touched:
                return s
            if s.value.op.name == "tl.copy":
                src, dst = decode_region(s.value.args[0]), decode_region(s.value.args[1])
                (_, se), (_, de) = src.nonunit(), dst.nonunit()
                if len(se) == len(de) and all(const_int(a) is not None and const_int(a) == const_int(b)
                                              for a, b in zip(se, de)):
                    return go(_copy_loop(src, dst, s.span))
            if s.value.op.name in _STAGEABLE:
                return go(_staged_view_op(s, regions, view_of))
            name = touched[0].args[0].source.name
            raise LoweringError("TL0002", f"{s.value.op.name[3:]} of the view '{name}' of a shared or fragment "
                                "buffer is not supported yet: copy the whole view, or index it element-wise in "
                                "T.Parallel", s.span)
        if isinstance(s, tirx.BufferStore):
            value, indices = rw.visit(s.value), [rw.visit(i) for i in s.indices]
            v = view_of(s.buffer)
            if v is not None and str(v.dtype) != str(views[v].dtype):
                return rw.reinterpreting_store(v, indices, value, s.span)
            if v is not None:
                return tirx.BufferStore(views[v], value, rw.remap(v, indices), span=s.span)
            return tirx.BufferStore(s.buffer, value, indices, span=s.span)
        if isinstance(s, tirx.Evaluate):
            return tirx.Evaluate(rw.visit(s.value), span=s.span)
        if isinstance(s, tirx.Bind):
            return tirx.Bind(s.var, rw.visit(s.value), span=s.span)
        if isinstance(s, tirx.IfThenElse):
            return tirx.IfThenElse(rw.visit(s.condition), go(s.then_case) or tirx.Evaluate(i32(0)),
                                   go(s.else_case) if s.else_case is not None else None, span=s.span)
        if isinstance(s, tirx.For):
            return tirx.For(s.loop_var, s.min, s.extent, s.kind, go(s.body) or tirx.Evaluate(i32(0)),
                            thread_binding=s.thread_binding, annotations=s.annotations,
                            step=getattr(s, "step", None), span=s.span)
        if isinstance(s, tirx.AttrStmt):
            return tirx.AttrStmt(s.node, s.attr_key, s.value, go(s.body) or tirx.Evaluate(i32(0)), span=s.span)
        if isinstance(s, tirx.While):
            return tirx.While(rw.visit(s.condition), go(s.body) or tirx.Evaluate(i32(0)), span=s.span)
        return s

    return go(body)


def _view_offset(view, indices):
    """The element offset of ``view[indices]`` in the view's own storage order: its explicit
    strides (``T.view(..., strides=...)``) or row-major."""
    if list(view.strides):
        flat = i32(0)
        for i, st in zip(indices, view.strides):
            flat = flat + i * st
        return flat
    flat = i32(0)
    for i, n in zip(indices, view.shape):
        flat = flat * n + i
    return flat


class _ViewRewriter(ExprRewriter):
    """Loads of a view read its buffer at the same row-major position."""

    def __init__(self, views):
        self.views = views

    def remap(self, view, indices):
        src = self.views[view]
        flat = _view_offset(view, indices)
        out = []
        for n in reversed(list(src.shape)):
            out.append(tirx.floormod(flat, n))
            flat = tirx.floordiv(flat, n)
        return [simplify(x) for x in reversed(out)]

    def visit_Call(self, e):
        # ``&view[i]`` of a view of another element type: the address of its first byte in the
        # buffer (the element there when the view is as wide or wider), as a pointer to the
        # view's type (``T.atomic_addx4(dst, view[i, j * 4])`` of a float32 view of bf16 bytes)
        if getattr(e.op, "name", "") == "tirx.address_of" and isinstance(e.args[0], ir.TensorLoad):
            load = e.args[0]
            v = next((k for k in self.views if k.same_as(load.source)), None)
            if v is not None and str(v.dtype) != str(self.views[v].dtype):
                src, vbits, sbits, flat = self._pieces(v, [self.visit(i) for i in load.indices])
                ctype = _VIEW_CTYPES.get(str(v.dtype))
                if vbits < sbits or ctype is None:
                    raise LoweringError("TL0002", f"the address of an element of '{v.name}', a {v.dtype} view of "
                                        f"the {src.dtype} buffer '{src.name}', is not supported", None)
                first = tirx.BufferLoad(src, self._src_indices(src, flat * (vbits // sbits)))
                return tirx.call_extern("handle", f"tl::ptr_as<{ctype}>", tirx.address_of(first))
        return super().visit_Call(e)

    def visit_load(self, load, indices):
        v = next((k for k in self.views if k.same_as(load.source)), None)
        if v is not None and str(v.dtype) != str(self.views[v].dtype):
            return self.reinterpreting_load(v, indices)
        if v is not None:
            return tirx.BufferLoad(self.views[v], self.remap(v, indices))
        return super().visit_load(load, indices)

    # A view of a shared buffer as another element type reads the same bytes: view element f
    # (row-major) is bytes [f*vb, (f+1)*vb) of the buffer's row-major byte image. Each of those
    # bytes is addressed through the buffer's own element (so its layout, swizzle included, applies
    # per element): a narrower view takes bits of one buffer element, a wider one joins several
    # (little-endian, as the GPU stores them).
    def _pieces(self, view, indices):
        src = self.views[view]
        vbits, sbits = DataType(str(view.dtype)).bits, DataType(str(src.dtype)).bits
        return src, vbits, sbits, _view_offset(view, indices)

    def _src_indices(self, src, flat):
        out = []
        for n in reversed(list(src.shape)):
            out.append(simplify(tirx.floormod(flat, n)))
            flat = tirx.floordiv(flat, n)
        return list(reversed(out))

    def reinterpreting_load(self, view, indices):
        src, vbits, sbits, flat = self._pieces(view, indices)
        if vbits < sbits:
            k = sbits // vbits
            word = bits_as(tirx.BufferLoad(src, self._src_indices(src, tirx.floordiv(flat, k))), f"uint{sbits}")
            shift = tirx.Cast(f"uint{sbits}", simplify(tirx.floormod(flat, k) * vbits))
            piece = tirx.Cast(_uint(vbits), tirx.shift_right(word, shift))
            return _from_bits(piece, str(view.dtype))
        k = vbits // sbits
        if k == 1:      # the same width: the element's bits as the view's type
            return bits_as(tirx.BufferLoad(src, self._src_indices(src, flat)), str(view.dtype))
        word = None
        for j in range(k):
            part = tirx.Cast(f"uint{vbits}", _bits_of(tirx.BufferLoad(src, self._src_indices(src, flat * k + j)),
                                                      sbits))
            if j:
                part = tirx.shift_left(part, tirx.const(j * sbits, f"uint{vbits}"))
            word = part if word is None else tirx.bitwise_or(word, part)
        return bits_as(word, str(view.dtype))

    def reinterpreting_store(self, view, indices, value, span):
        src, vbits, sbits, flat = self._pieces(view, indices)
        if vbits < sbits:
            raise LoweringError("TL0002", f"a store through '{view.name}', a {view.dtype} view of the {src.dtype} "
                                f"shared buffer '{src.name}', would rewrite part of an element shared with "
                                "other threads' stores; write the buffer itself (or through a view at least as "
                                f"wide as {src.dtype})", span)
        k = vbits // sbits
        word = bits_as(value, f"uint{vbits}")
        stores = []
        for j in range(k):
            part = tirx.Cast(_uint(sbits), tirx.shift_right(word, tirx.const(j * sbits, f"uint{vbits}")) if j
                             else word)
            stores.append(tirx.BufferStore(src, _from_bits(part, str(src.dtype)),
                                           self._src_indices(src, flat * k + j), span=span))
        return seq(stores)


_VIEW_CTYPES = {"float64": "double", "float32": "float", "float16": "half", "bfloat16": "__nv_bfloat16",
                "int64": "int64_t", "int32": "int", "uint32": "unsigned", "int16": "short", "uint16": "unsigned short",
                "int8": "signed char", "uint8": "unsigned char"}


def bits_as(value, dtype):
    """``value``'s bits as ``dtype`` of the same width (a cast between integers, else a reinterpret)."""
    have = str(value.dtype)
    if have == dtype:
        return value
    if have.startswith(("int", "uint")) and dtype.startswith(("int", "uint")):
        return tirx.Cast(dtype, value)
    return tirx.reinterpret(dtype, value)


def _uint(bits: int) -> str:
    """The unsigned type holding ``bits`` bits (a 4-bit element's in the low half of a byte)."""
    return f"uint{max(bits, 8)}"


def _bits_of(value, bits):
    """``value``'s ``bits`` bits as ``_uint(bits)``: a float4_e2m1fn element's code in a byte."""
    if bits == 4:
        return tirx.call_extern("uint8", "tl::fp4_bits", value)
    return bits_as(value, f"uint{bits}")


def _from_bits(word, dtype):
    """The ``dtype`` value whose bits are the low bits of the unsigned ``word`` (``_uint`` wide)."""
    if dtype == "float4_e2m1fn":
        return tirx.call_extern(dtype, "tl::fp4_from_bits", word)
    return bits_as(word, dtype)


def _reinterpret_blocker(src, view) -> str | None:
    """Why ``view`` (another element type over ``src``'s storage) cannot be resolved (None: it can)."""
    vb, sb = DataType(str(view.dtype)), DataType(str(src.dtype))
    if scope_of(src) not in ("shared", "shared.dyn"):
        # a register buffer's element and its view's are the same bits of the same thread
        if vb.bits == sb.bits and vb.lanes == sb.lanes == 1:
            return None
        return (f"a view of the register buffer '{src.name}' ({src.dtype}) may change the element type only to "
                f"one of the same width ({sb.bits} bits), not to {view.dtype}; shared buffers can be viewed as "
                "any type of 8 to 64 bits (or float4_e2m1fn)")
    # (4-bit: float4_e2m1fn packed two to a byte, viewed as or through a type of whole bytes)
    fp4 = [str(t) == "float4_e2m1fn" for t in (src.dtype, view.dtype)]
    narrow = [b.bits < 8 and not f for b, f in zip((sb, vb), fp4)]
    if vb.lanes != 1 or sb.lanes != 1 or any(narrow) or all(fp4) or max(vb.bits, sb.bits) > 64:
        return (f"a shared view between {src.dtype} and {view.dtype} (element types of 8 to 64 bits, or "
                "float4_e2m1fn and one of those) is not supported")
    if any(const_int(n) is None for n in list(src.shape) + list(view.shape)):
        return "a view of another element type needs constant shapes"
    return None


def _reinterpreting_view_annotation(stmt, view, src):
    """``T.annotate_layout`` on a view of another element type: the row-major map (the view's bytes
    in the buffer's order) says nothing beyond the buffer's own layout and is dropped; any other
    map would have to be carried over to the buffer in bytes, which is not supported."""
    args = stmt.value.args
    kind = str(args[1].value)
    if kind == "row_major":
        return None
    if kind == "custom":
        n = int(args[2].value)
        outs = list(args[3:])
        identity = len(outs) == n
        for k, e in enumerate(outs):
            variables = []
            for _ in range(n):
                variables.append(e.var)
                e = e.body
            identity = identity and isinstance(e, tirx.Var) and e.same_as(variables[k])
        if identity:
            return None
    raise LoweringError("TL0002", f"T.annotate_layout on '{view.name}', a {view.dtype} view of the {src.dtype} "
                        f"shared buffer '{src.name}': only the row-major layout can be given to a view of another "
                        f"element type; annotate '{src.name}' itself", stmt.span)


def expand_fragment_copies(body):
    """``T.copy`` between parts of fragments (``T.copy(lse[k, :], row)``) as the element-wise
    ``T.Parallel`` loop it means, whose layouts inference then places like any other, and a
    one-element ``T.copy`` inside ``T.Parallel`` as the store it means; copies of whole fragments
    (and every other copy) are kept. The body is rebuilt only if it has one of those."""
    found = []

    def look(s, in_parallel=False):
        if _partial_fragment_copy(s) is not None or (in_parallel and _element_copy(s) is not None):
            found.append(s)
        for c in children(s):
            look(c, in_parallel or is_parallel_nest(s))

    look(body)
    if not found:
        return body

    def go(s, in_parallel=False):
        if isinstance(s, tirx.SeqStmt):
            return tirx.SeqStmt([go(x, in_parallel) for x in s.seq])
        if isinstance(s, tirx.Evaluate):
            pair = _partial_fragment_copy(s)
            if pair is not None:
                return _copy_loop(*pair, s.span)
            pair = _element_copy(s) if in_parallel else None
            return s if pair is None else _copy_loop(*pair, s.span)
        if isinstance(s, tirx.IfThenElse):
            return tirx.IfThenElse(s.condition, go(s.then_case, in_parallel),
                                   go(s.else_case, in_parallel) if s.else_case is not None else None, span=s.span)
        if isinstance(s, tirx.For):
            return tirx.For(s.loop_var, s.min, s.extent, s.kind, go(s.body, in_parallel or is_parallel_nest(s)),
                            thread_binding=s.thread_binding, annotations=s.annotations,
                            step=getattr(s, "step", None), span=s.span)
        if isinstance(s, tirx.AttrStmt):
            return tirx.AttrStmt(s.node, s.attr_key, s.value, go(s.body, in_parallel), span=s.span)
        if isinstance(s, tirx.While):
            return tirx.While(s.condition, go(s.body, in_parallel), span=s.span)
        return s

    return go(body)


def widen_fragment_blocks(body):
    """A ``T.Parallel`` loop writing a block of a fragment at constant offsets
    (``f[32 + i, j] = ...`` over (32, 32) of a (64, 64) fragment) as the loop over the block's
    rows and columns counted from the fragment's origin, its iterations before the block guarded
    off (``for p, q in T.Parallel(64, 32): if p >= 32: f[p, q] = ...``): the fragment's own layout
    then runs it, each element on its threads, where a block that lives on part of the threads
    (a quarter of a gemm operand: two of its four warps) has no loop layout of its own. What
    upstream does by predication (TileOPs' mamba chunk scan fills a gemm operand so)."""
    def widen(loop):
        if not is_parallel_nest(loop):
            return None
        loop_vars, extents, inner = parallel_nest(loop)
        ext = [const_int(e) for e in extents]
        outer = nest_loops(loop, len(loop_vars))
        # (a user's loop layout or vector width is given for the extents as written)
        if None in ext or any(const_int(f.min) != 0 or set(f.annotations) - {"tl.parallel"} for f in outer):
            return None
        offsets, accesses = None, buffer_accesses(inner)
        for buf, idx, store in accesses:
            if not store or scope_of(buf) != FRAGMENT_SCOPE or len(idx) != len(loop_vars):
                continue
            shape = [const_int(n) for n in buf.shape]
            got = [_offset_of(i, v) for i, v in zip(idx, loop_vars)]
            if None in shape or None in got or not any(got):
                continue
            if all(c + e <= n for c, e, n in zip(got, ext, shape)):
                offsets, target = got, buf
                break
        if offsets is None:
            return None
        # (another fragment read through the loop's variables would be read at shifted indices in
        # the guarded-off iterations too, as the layout analyses enumerate them: such a loop keeps
        # its own layout, which serves it wherever the fragments' elements live on every thread)
        if any(scope_of(b) == FRAGMENT_SCOPE and not b.same_as(target) for b, _, _ in accesses):
            return None
        new_vars = [tirx.Var(v.name, dtype_of(v)) for v in loop_vars]
        vmap = {v: nv - c if c else nv for v, nv, c in zip(loop_vars, new_vars, offsets)}
        cond = functools.reduce(tirx.And, [tirx.GE(nv, i32(c)) for nv, c in zip(new_vars, offsets) if c])
        stmt = tirx.IfThenElse(cond, _simplified_indices(substitute_stmt(inner, vmap)), None, span=inner.span)
        for f, nv, c, e in reversed(list(zip(outer, new_vars, offsets, ext))):
            stmt = tirx.For(nv, f.min, i32(c + e), f.kind, stmt, thread_binding=f.thread_binding,
                            annotations=f.annotations, step=f.step, span=f.span)
        return stmt

    return map_stmts(body, pre=widen)


def _offset_of(index, var):
    """``c`` where ``index`` is ``var + c`` (``c`` a constant >= 0), else None."""
    diff = const_int(simplify(index - var))
    return diff if diff is not None and diff >= 0 else None


def nest_loops(loop, depth):
    """The ``depth`` ``For`` statements of the loop nest starting at ``loop``, outermost first."""
    out = []
    for _ in range(depth):
        out.append(loop)
        loop = loop.body
    return out


def _simplified_indices(stmt):
    """``stmt`` with every buffer index simplified (``(p - 32) + 32`` back to ``p``)."""
    class _Simplify(ExprRewriter):
        def visit_load(self, load, indices):
            return tirx.BufferLoad(load.source, [simplify(i) for i in indices])

    rw = _Simplify()

    def pre(s):
        if isinstance(s, tirx.BufferStore):
            return tirx.BufferStore(s.buffer, rw.visit(s.value), [simplify(rw.visit(i)) for i in s.indices],
                                    span=s.span)
        if isinstance(s, tirx.Evaluate):
            return tirx.Evaluate(rw.visit(s.value), span=s.span)
        return None

    return map_stmts(stmt, pre=pre)


def _element_copy(s):
    """(src, dst) of a one-element ``T.copy(A[i, j], B[i, j])`` (inside ``T.Parallel``: a store)."""
    if not isinstance(s, tirx.Evaluate) or not is_tl_call(s.value) or s.value.op.name != "tl.copy":
        return None
    src, dst = decode_region(s.value.args[0]), decode_region(s.value.args[1])
    if any(const_int(e) != 1 for e in list(src.extents) + list(dst.extents)):
        return None
    return src, dst


def _strip_safe_values(body):
    """(body without its ``T.annotate_safe_value`` attributes, {tensor: value}): the first
    annotation of a tensor gives the kernel's value for it. An annotation of the same tensor with
    another value (in a ``T.sblock`` scope of its own, or further down the same one) stays in the
    body around the statements it covers, and the lowering reads its value there
    (``Lowerer._lower_stmt``): the innermost annotation wins, as upstream scopes them."""
    found = []
    walk_stmts(body, lambda s: found.append(s) if isinstance(s, tirx.AttrStmt)
               and s.attr_key == SAFE_VALUE_ATTR else None)
    if not found:
        return body, {}
    values = {}
    for a in found:
        if not any(a.node.same_as(k) for k in values):
            values[a.node] = a.value

    def kernel_value(a) -> bool:
        first = next(v for k, v in values.items() if k.same_as(a.node))
        return tvm.ir.structural_equal(first, a.value)

    def go(s):
        if isinstance(s, tirx.AttrStmt) and s.attr_key == SAFE_VALUE_ATTR:
            if not kernel_value(s):
                return tirx.AttrStmt(s.node, s.attr_key, s.value, go(s.body), span=s.span)
            return go(s.body)
        if isinstance(s, tirx.SeqStmt):
            return seq([go(x) for x in s.seq])
        if isinstance(s, tirx.IfThenElse):
            return tirx.IfThenElse(s.condition, go(s.then_case), go(s.else_case) if s.else_case is not None
                                   else None, span=s.span)
        if isinstance(s, tirx.For):
            return tirx.For(s.loop_var, s.min, s.extent, s.kind, go(s.body), thread_binding=s.thread_binding,
                            annotations=s.annotations, step=getattr(s, "step", None), span=s.span)
        if isinstance(s, tirx.AttrStmt):
            return tirx.AttrStmt(s.node, s.attr_key, s.value, go(s.body), span=s.span)
        if isinstance(s, tirx.While):
            return tirx.While(s.condition, go(s.body), span=s.span)
        return s

    return go(body), values


def safe_value(info, buffer, dtype):
    """What an out-of-bounds read of ``buffer`` gives, as ``dtype`` (``T.annotate_safe_value``, else 0)."""
    value = next((v for k, v in info.safe_values.items() if k.same_as(buffer)), None)
    if value is None:
        return tirx.const(0, dtype)
    return value if str(value.dtype) == dtype else tirx.Cast(dtype, value)


def _partial_fragment_copy(s):
    """(src, dst) regions of a fragment-to-fragment ``T.copy`` of parts of equal, static extents."""
    if not isinstance(s, tirx.Evaluate) or not is_tl_call(s.value) or s.value.op.name != "tl.copy":
        return None
    src, dst = decode_region(s.value.args[0]), decode_region(s.value.args[1])
    if src.scope != FRAGMENT_SCOPE or dst.scope != FRAGMENT_SCOPE or (src.is_whole() and dst.is_whole()):
        return None
    (_, se), (_, de) = src.nonunit(), dst.nonunit()
    if len(se) != len(de) or any(const_int(a) is None or const_int(a) != const_int(b) for a, b in zip(se, de)):
        return None
    return src, dst


VIEW_STAGING = "tl.view_staging"     # For annotation of the loop filling a staged view
# tile ops that run on staged copies of the views they touch: each needs its operand as a buffer
# of its own (a gemm's swizzled operand tile, a reduction's input layout), which the view's bytes
# in its buffer's layout are not
_STAGEABLE = ("tl.reduce", "tl.cumsum", "tl.gemm", "tl.gemm_sp", "tl.fill")


def _staged_view_op(stmt, regions, view_of):
    """A tile op (``_STAGEABLE``) over views of shared/fragment buffers: each view is staged in
    a buffer of its own shape, type and scope (filled element-wise from the view before the op,
    written back after it when the op writes it), and the op runs on those buffers, which take
    the layouts the op wants. The copy costs a pass over the view's bytes (a swizzled gemm tile:
    one 16-byte load and store per vector, ``vectorize_parallel._as_bit_copy``) and a barrier
    where other threads wrote them; upstream instead gives the viewed buffer the view's layout."""
    staged, before, after = {}, [], []
    for r in regions:
        v = view_of(r.args[0].source)
        if v is None:
            continue
        if v not in staged:
            tmp = tirx.decl_buffer(list(v.shape), str(v.dtype), f"{v.name}_staged", scope=scope_of(v))
            staged[v] = tmp
            whole = [i32(0)] * len(v.shape)
            fill = _copy_loop(Region(v, whole, list(v.shape), 1), Region(tmp, whole, list(v.shape), 2), stmt.span)
            if isinstance(fill, tirx.For):    # layout inference places the new buffer from this loop at once
                fill = tirx.For(fill.loop_var, fill.min, fill.extent, fill.kind, fill.body,
                                annotations={**fill.annotations, VIEW_STAGING: 1}, span=fill.span)
            before += [tirx.AllocBuffer(tmp), fill]
        if int(r.args[1].value) & 2 and not any(a is v for a in (x[0] for x in after)):
            whole = [i32(0)] * len(v.shape)
            after.append((v, _copy_loop(Region(staged[v], whole, list(v.shape), 1),
                                        Region(v, whole, list(v.shape), 2), stmt.span)))
    args = []
    for a in stmt.value.args:
        v = view_of(a.args[0].source) if a in regions else None
        if v is not None:
            a = ir.Call(a.op, [tirx.BufferLoad(staged[v], list(a.args[0].indices))] + list(a.args[1:]),
                        ret_ty=a.ty)
        args.append(a)
    op = tirx.Evaluate(ir.Call(stmt.value.op, args, ret_ty=stmt.value.ty), span=stmt.span)
    return seq(before + [op] + [loop for _, loop in after])


def _load_as(region, indices, dtype):
    """``region``'s buffer at ``indices``, cast to ``dtype`` where its elements differ."""
    value = tirx.BufferLoad(region.buffer, indices)
    return value if str(region.buffer.dtype) == str(dtype) else tirx.Cast(str(dtype), value)


def _copy_loop(src, dst, span, annotations=None):
    def store(di, si):
        return tirx.BufferStore(dst.buffer, _load_as(src, si, dst.buffer.dtype), di, span=span)

    return region_loop(dst, src, span, store, annotations)


def region_loop(dst, src, span, make, annotations=None):
    """The element-wise ``T.Parallel`` nest of a tile op between the regions ``dst`` and ``src`` of
    the same non-unit extents: ``make(dst_indices, src_indices)`` is its body (no loop when every
    extent is 1); ``annotations`` go on the outermost loop."""
    dd, extents = dst.nonunit()
    sd, _ = src.nonunit()
    loop_vars = [tirx.Var(f"i{k}", "int32") for k in range(len(extents))]

    def at(region, dims):
        idx = list(region.starts)
        for d, v in zip(dims, loop_vars):
            idx[d] = idx[d] + v
        return idx

    body = make(at(dst, dd), at(src, sd))
    for depth in reversed(range(len(loop_vars))):
        ann = {"tl.parallel": len(loop_vars) - depth, **(annotations or {} if depth == 0 else {})}
        body = tirx.For(loop_vars[depth], i32(0), i32(const_int(extents[depth])), tirx.ForKind.PARALLEL, body,
                        annotations=ann, span=span)
    return body


# ---- T.annotate_layout on global tensors

def _layout_error(msg, span):
    return LoweringError("TL0201", msg, span)


class _Placement:
    """Where the layout puts each element of ``buf``: ``offset(indices)`` in the flat view ``flat``."""

    def __init__(self, buf, outputs, span):
        shape = [const_int(n) for n in buf.shape]
        if any(n is None for n in shape):
            raise _layout_error(f"T.annotate_layout on the global tensor '{buf.name}': its shape {list(buf.shape)} "
                                "is not constant, so the layout's output space is unknown", span)
        self.buf, self.outputs = buf, outputs
        extents = []
        for variables, expr in outputs:
            an = tvm.sym.Analyzer()
            for v, n in zip(variables, shape):
                an.bind(v, tvm.ir.Range(0, n))
            bound = an.const_int_bound(expr)
            if bound.min_value < 0:
                raise _layout_error(f"T.annotate_layout on '{buf.name}': output index {expr} can be negative",
                                    span)
            extents.append(int(bound.max_value) + 1)
        if math.prod(extents) != math.prod(shape):
            raise _layout_error(f"T.annotate_layout on the global tensor '{buf.name}': the layout maps its "
                                f"{math.prod(shape)} elements ({shape}) into an output space of "
                                f"{math.prod(extents)} ({extents}); a global tensor's layout must place each "
                                "element at its own offset within the tensor's storage", span)
        self.extents = extents
        self.identity = len(outputs) == len(shape) and all(
            isinstance(expr, tirx.Var) and expr.same_as(variables[k]) for k, (variables, expr) in enumerate(outputs))
        self.flat = tirx.decl_buffer((math.prod(shape),), buf.dtype, f"{buf.name}_laid", data=buf.data,
                                     scope="global")

    def offset(self, indices):
        flat = i32(0)
        for (variables, expr), n in zip(self.outputs, self.extents):
            flat = flat * n + substitute(expr, dict(zip(variables, indices)))
        return simplify(flat)


class _PlacementRewriter(ExprRewriter):
    def __init__(self, placements):
        self.placements = placements

    def find(self, buf):
        return next((p for b, p in self.placements.items() if b.same_as(buf)), None)

    def visit_load(self, load, indices):
        p = self.find(load.source)
        if p is not None:
            return tirx.BufferLoad(p.flat, [p.offset(indices)])
        return super().visit_load(load, indices)


def apply_global_layouts(body):
    """``T.annotate_layout`` on a global tensor: the tensor's elements are stored where the layout
    says, as upstream places them.

    Upstream's attention backward examples annotate dQ with ``make_dq_layout`` (``[b, l // 8, h,
    d // 8, d % 2, 4 * (l % 8) + (d % 8) // 2]``) in the kernel that accumulates it and in the one
    that reads it back: the 32 lanes of a warp holding one register of an mma accumulator then add
    into 32 consecutive floats, one 128-byte line per atomic instruction, where row-major dQ would
    take eight. The element at logical index ``i`` lives at the row-major offset of ``layout(i)`` in
    the layout's output space. Returns ``body`` with each such tensor read and written through a
    flat view of its storage (a ``DeclBuffer`` over the same data): element accesses (loads,
    stores, element atomics' addresses) at the layout's offset; ``T.copy`` and ``T.atomic_*`` of a
    tile of it as the element-wise ``T.Parallel`` loops they mean; any other tile op on it is a
    located TL0201 error, as is a layout that does not put each element at an offset of its own
    within the tensor's storage, or a tensor without a constant shape. A row-major (identity)
    layout changes nothing."""
    placements = {}
    notes = []

    def collect(s):
        if isinstance(s, tirx.Evaluate) and is_tl_call(s.value, "annotate_layout"):
            args = s.value.args
            buf = args[0].source
            if scope_of(buf) == "global" and str(args[1].value) == "custom" and len(args) > 3:
                n = int(args[2].value)
                p = _Placement(buf, [unpack_layout_expr(e, n) for e in args[3:]], s.span)
                if not p.identity and not any(b.same_as(buf) for b in placements):
                    placements[buf] = p
                    notes.append(s)

    walk_stmts(body, collect)
    if not placements:
        return body
    rw = _PlacementRewriter(placements)

    def touched(call):
        return [decode_region(a) for a in call.args if isinstance(a, ir.Call)
                and getattr(a.op, "name", "") == "tl.region" and rw.find(a.args[0].source) is not None]

    def pre(s):
        if isinstance(s, tirx.Evaluate) and is_tl_call(s.value):
            name = s.value.op.name
            if name == "tl.annotate_layout" and any(s.same_as(n) for n in notes):
                return tirx.Evaluate(i32(0))
            regions = touched(s.value)
            if not regions:
                return tirx.Evaluate(rw.visit(s.value), span=s.span)
            if name == "tl.copy":
                # one element a thread, consecutive threads on consecutive elements of the tile (a
                # laid-out side is no longer contiguous along the tile's rows; upstream's order):
                # the default 16-byte layout would leave the row-major side's vectors unvectorised
                # and strided between lanes
                src, dst = decode_region(s.value.args[0]), decode_region(s.value.args[1])
                return map_stmts(_copy_loop(src, dst, s.span, {"tl.coalesced_width": 1}), pre=pre)
            if name == "tl.atomic":
                dst, src = decode_region(s.value.args[0]), decode_region(s.value.args[1])
                kind = str(s.value.args[2].value)
                dtype = str(dst.buffer.dtype)

                def make(di, si):
                    call = tirx.call_extern(dtype, f"tl::atomic_{kind}",
                                            tirx.address_of(tirx.BufferLoad(dst.buffer, di)), _load_as(src, si, dtype))
                    return tirx.Evaluate(call, span=s.span)

                return map_stmts(region_loop(dst, src, s.span, make), pre=pre)
            raise _layout_error(f"{name[3:]} of the global tensor '{regions[0].buffer.name}', which "
                                "T.annotate_layout lays out: only T.copy and T.atomic_* of its tiles, and element "
                                "accesses, are supported", s.span)
        if isinstance(s, tirx.Evaluate):
            return tirx.Evaluate(rw.visit(s.value), span=s.span)
        if isinstance(s, tirx.BufferStore):
            value = rw.visit(s.value)
            indices = [rw.visit(i) for i in s.indices]
            p = rw.find(s.buffer)
            if p is not None:
                return tirx.BufferStore(p.flat, value, [p.offset(indices)], span=s.span)
            return tirx.BufferStore(s.buffer, value, indices, span=s.span)
        if isinstance(s, tirx.Bind):
            return tirx.Bind(s.var, rw.visit(s.value), span=s.span)
        if isinstance(s, tirx.IfThenElse):
            cond = rw.visit(s.condition)
            then = map_stmts(s.then_case, pre=pre)
            other = None if s.else_case is None else map_stmts(s.else_case, pre=pre)
            return tirx.IfThenElse(cond, then, other, span=s.span)
        if isinstance(s, tirx.For):     # (bounds read from the tensor too)
            return tirx.For(s.loop_var, rw.visit(s.min), rw.visit(s.extent), s.kind, map_stmts(s.body, pre=pre),
                            thread_binding=s.thread_binding, annotations=s.annotations, step=s.step, span=s.span)
        if isinstance(s, tirx.While):
            return tirx.While(rw.visit(s.condition), map_stmts(s.body, pre=pre), span=s.span)
        return None

    decls = [tirx.DeclBuffer(p.flat, data=p.buf.data) for p in placements.values()]
    return seq(decls + [map_stmts(body, pre=pre)])


def source_kernel(func):
    """``(entry name, CUDA source, span)`` of a ``T.CUDASourceCodeKernel`` launch, or None."""
    found = []
    walk_stmts(func.body, lambda s: found.append(s) if isinstance(s, tirx.AttrStmt)
               and s.attr_key == CUDA_SOURCE_ATTR else None)
    if not found:
        return None
    return str(found[0].node.value), str(found[0].value.value), getattr(found[0], "span", None)


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


def chunk_unbounded_parallel(stmt, threads: int):
    """A ``T.Parallel(n)`` over a run-time ``n`` with no constant bound that touches no fragment
    (memory only: tilelang-debugger's ``y[i] = x[i] + 3`` over a symbolic ``n``; a nest such as
    ``T.Parallel(m, N)`` first flattened, ``_flatten_unbounded_nest``) runs as upstream runs it: the
    block's threads take ``threads`` iterations at a time, a serial loop over ``ceildiv(n, threads)``
    chunks around a ``T.Parallel(threads)`` guarded by the extent."""
    def pre(s):
        if not is_parallel_nest(s):
            return None
        if int(s.annotations["tl.parallel"]) > 1:
            s = _flatten_unbounded_nest(s)
            if s is None:
                return None
        if const_int(s.extent) is not None:
            return None
        hi = int(tvm.sym.Analyzer().const_int_bound(s.extent).max_value)
        if 0 < hi < (1 << 20) or any(scope_of(b) == FRAGMENT_SCOPE for b, _, _ in buffer_accesses(s.body)):
            return None     # (a bounded extent spans its bound; a fragment needs constant extents: TL0603)
        var, dtype = s.loop_var, dtype_of(s.loop_var)
        outer, inner = tirx.Var(f"{var.name}_chunk", var.ty), tirx.Var(var.name, var.ty)
        step, zero = tirx.IntImm(dtype, threads), tirx.IntImm(dtype, 0)
        body = tirx.IfThenElse(tirx.LT(outer * step + inner, s.extent),
                               substitute_stmt(s.body, {var: s.min + outer * step + inner}), None, span=s.span)
        loop = tirx.For(inner, zero, step, s.kind, body, annotations=s.annotations, span=s.span)
        return tirx.For(outer, zero, tirx.floordiv(s.extent + step - 1, step), tirx.ForKind.SERIAL, loop, span=s.span)

    return map_stmts(stmt, pre=pre)


UNBOUNDED = 1 << 20     # a run-time extent the analyzer bounds by no less: no tile can span it


def _flatten_unbounded_nest(s):
    """A ``T.Parallel(m, N)`` nest with an unbounded run-time extent that touches no fragment (so
    no layout ties its iterations to threads) as the 1-D ``T.Parallel`` over its flat index, the
    indices recovered by division (``chunk_unbounded_parallel`` then chunks it); else None."""
    loop_vars, extents, body = parallel_nest(s)
    if not any(_unbounded(e) for e in extents) or any(
            scope_of(b) in (FRAGMENT_SCOPE, "local") for b, _, _ in buffer_accesses(body)):
        return None
    mins, loop = [], s
    for _ in loop_vars:
        mins.append(loop.min)
        loop = loop.body
    flat = tirx.Var(f"{loop_vars[-1].name}_flat", "int32")
    pos, total = _unflatten(flat, extents)
    subst = {v: m + _as(dtype_of(v), p) for v, m, p in zip(loop_vars, mins, pos)}
    return tirx.For(flat, i32(0), total, tirx.ForKind.PARALLEL, substitute_stmt(body, subst),
                    annotations={**dict(s.annotations), "tl.parallel": 1}, span=s.span)


def _as(dtype, e):
    return e if dtype_of(e) == dtype else tirx.Cast(dtype, e)


def _unflatten(flat, extents):
    """(the row-major positions of the flat int32 index ``flat`` over ``extents``, their product):
    the outermost position is not wrapped (``flat`` stays below the product)."""
    pos, inner = [], i32(1)
    for k in reversed(range(len(extents))):
        e = _as("int32", extents[k])
        step = flat if k == len(extents) - 1 else tirx.floordiv(flat, inner)
        pos.insert(0, step if k == 0 else tirx.floormod(step, e))
        inner = inner * e
    return pos, inner


def _unbounded(extent) -> bool:
    if const_int(extent) is not None:
        return False
    hi = int(tvm.sym.Analyzer().const_int_bound(extent).max_value)
    return not 0 < hi < UNBOUNDED


def expand_unbounded_copies(stmt):
    """A ``T.copy`` of a run-time extent with no constant bound between global memory and a
    shared buffer of run-time shape (``T.copy(A[0:m, :], s)`` into ``T.alloc_shared((m, N))``), or
    within global memory (``T.copy(x[r:r + n, :], y[r:r + n, :])``), as one flat element-wise
    ``T.Parallel`` over its elements, which ``chunk_unbounded_parallel`` then runs in chunks of the
    block's threads, as upstream runs it (a tile op's tile has a compile-time extent: both were
    TL0601). Every other copy is kept (a static on-chip side sizes the tile)."""
    def pre(s):
        if not isinstance(s, tirx.Evaluate) or not is_tl_call(s.value) or s.value.op.name != "tl.copy":
            return None
        src, dst = decode_region(s.value.args[0]), decode_region(s.value.args[1])
        on_chip = [r for r in (src, dst) if r.scope != "global"]
        # (a static on-chip side sizes the tile: lower_copy._bounded_tile)
        if any(r.scope not in SHARED_SCOPES or static_shape(r.buffer) for r in on_chip):
            return None
        (sd, se), (dd, de) = src.nonunit(), dst.nonunit()
        if not any(_unbounded(e) for e in se + de) or len(se) != len(de):
            return None
        ana = tvm.sym.Analyzer()
        if not all(ana.can_prove_equal(a, b) for a, b in zip(se, de)):
            return None
        flat = tirx.Var("i_flat", "int32")
        pos, total = _unflatten(flat, de)

        def at(region, dims):
            idx = list(region.starts)
            for d, p in zip(dims, pos):
                idx[d] = idx[d] + _as(dtype_of(idx[d]), p)
            return idx

        body = tirx.BufferStore(dst.buffer, _load_as(src, at(src, sd), dst.buffer.dtype), at(dst, dd), span=s.span)
        return tirx.For(flat, i32(0), total, tirx.ForKind.PARALLEL, body, annotations={"tl.parallel": 1},
                        span=s.span)

    return map_stmts(stmt, pre=pre)


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
