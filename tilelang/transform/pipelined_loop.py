"""The model of a ``T.Pipelined(n, num_stages=S)`` loop: its stages, producers and consumers.

One home for what every reader of such a loop must agree on: the software pipeliner
(``pipeline``), warp specialisation (``warp_specialize``), the shared-memory sizes
(``plan_stages``, read by the Lowerer and the resource checks) and the hover data
(``pipelined_loops``).

* ``stages``: S, the loop's ``tl.num_stages`` annotation (0 when it has none);
* ``producers``: the top-level statements of the loop body that are ``T.copy`` from a global
  tensor into shared memory; they are issued ahead of the consumers into S-deep buffers;
* ``consumers``: every other top-level statement of the body, in order;
* ``staged``: the shared buffers the producers fill;
* ``guard``: for a body that is one ``if c:`` (no else) around producers and consumers (a
  block-sparse main loop: ``if BlockMask[by, bx, k]: T.copy(...); T.gemm(...)``), ``c``; the
  producers and consumers are then those of its branch, and the software pipeliner issues each
  iteration's producers and runs its consumers under ``c`` of that iteration. ``c`` reads no
  buffer the body writes, and only global memory or registers (it is evaluated iterations ahead,
  where no barrier orders a shared read). None
  otherwise; warp specialisation takes a guarded GEMM main loop whose ``c`` reads global memory
  only (its ring slots counted: ``warp_specialize._TileCounter``), the other schedules leave a
  guarded loop alone;
* ``REFILL_ATTR`` on the loop: a one-stage loop the software pipeliner refills tile by tile;
* ``gathers``: top-level ``T.Parallel`` nests that copy a gathered global tile into shared memory
  (``S[i, d] = KV[Indices[i], d]``, ``gather_width``), which the software pipeliner issues
  ahead as cp.async like the producers (S >= 2). They stay in ``consumers`` too: warp
  specialisation and the other readers of the model see them as they always did.

Contract: reads the IR only, never rewrites it; no state is kept between calls.
"""

from __future__ import annotations

from dataclasses import dataclass

import tvm
from tvm import ir, tirx

from tilelang.language.loops import STAGES_ATTR
from tilelang.language.dtypes import nbytes
from tilelang.tir_utils import ExprRewriter, any_expr, const_int, tensor_loads, uses_vars, walk_stmts
from tilelang.transform.kernel import (SHARED_SCOPES, decode_region, is_parallel_nest, op_name, parallel_nest,
                                       scope_of)
from tilelang.transform.thread_sync import buffer_rw


# Set by ``attention_schedule`` on a one-stage loop that the software pipeliner is to lower with
# per-tile cp.async groups, each tile refilled for the next iteration right after its last use
# (``pipeline._lower_split_groups`` with S = 1).
REFILL_ATTR = "tl.refill_next_iteration"


def is_pipelined(stmt) -> bool:
    """``stmt`` is a ``T.Pipelined`` loop (annotated with its stage count)."""
    return isinstance(stmt, tirx.For) and STAGES_ATTR in stmt.annotations


def num_stages(loop) -> int:
    value = loop.annotations.get(STAGES_ATTR)
    return int(value) if value is not None else 0


def body_list(loop) -> list:
    """The top-level statements of a loop body."""
    return list(loop.body.seq) if isinstance(loop.body, tirx.SeqStmt) else [loop.body]


def is_producer(stmt) -> bool:
    """A global-to-shared ``T.copy`` (or ``T.im2col`` gather): issued ahead when it sits at the top
    of a pipelined body."""
    if op_name(stmt) not in ("copy", "im2col"):
        return False
    src, dst = decode_region(stmt.value.args[0]), decode_region(stmt.value.args[1])
    return scope_of(src.buffer) == "global" and scope_of(dst.buffer) in SHARED_SCOPES


def gather_width(stmt) -> int:
    """For a ``T.Parallel`` nest that is one gathered global-to-shared copy, the elements each
    cp.async moves (16 bytes' worth, halved until they divide the innermost extent; at least 4
    bytes); 0 for anything else. Such a nest: constant extents; its body one store
    ``S[..., d] = G[..., d + c]`` of a shared ``S`` from a global ``G`` of the same type, ``d``
    the innermost loop variable, the store's last index exactly ``d`` and the load's ``d`` plus
    something free of the loop variables, ``d`` in no other index; some other index reads a
    global tensor (``Indices[b, i]``: the gather), and the indices read nothing but global tensors
    and per-thread scalars (``bos = Offsets[b]`` before the loop: a one-element local buffer)."""
    nest = gather_nest(stmt)
    if nest is None:
        return 0
    loop_vars, extents, body = nest
    ext = [const_int(e) for e in extents]
    if None in ext or not isinstance(body, tirx.BufferStore) or scope_of(body.buffer) not in SHARED_SCOPES:
        return 0
    load, d = body.value, loop_vars[-1]
    if not isinstance(load, ir.TensorLoad) or scope_of(load.source) != "global" or \
            str(load.source.dtype) != str(body.buffer.dtype) or getattr(body, "predicate", None) is not None:
        return 0
    store_idx, load_idx = list(body.indices), list(load.indices)
    if not store_idx or not load_idx or not (isinstance(store_idx[-1], tirx.Var) and store_idx[-1].same_as(d)):
        return 0
    if any(uses_vars(i, [d]) for i in store_idx[:-1] + load_idx[:-1]):
        return 0
    offset = tvm.arith.Analyzer().simplify(load_idx[-1] - d)
    if uses_vars(offset, loop_vars) or any_expr(offset, lambda e: isinstance(e, ir.TensorLoad)):
        return 0
    reads = [e for idx in load_idx + store_idx for e in tensor_loads(idx)]   # (the loads in the indices)
    if not all(scope_of(e.source) == "global" or thread_scalar(e.source) for e in reads):
        return 0
    if not any(scope_of(e.source) == "global" for e in reads):
        return 0    # no index read from memory: a plain copy written as a loop (left as it was)
    e = nbytes(str(body.buffer.dtype))
    vec = max(1, 16 // e)
    while vec > 1 and ext[-1] % vec:
        vec //= 2
    return vec if vec * e >= 4 else 0


def gather_nest(stmt):
    """(loop_vars, extents, store) of a ``T.Parallel`` nest whose body is one store, possibly after
    ``let`` bindings (``idx = Indices[b, i]; S[i, d] = KV[idx, d]``), which are substituted into
    the store; None for any other statement."""
    if not is_parallel_nest(stmt):
        return None
    loop_vars, extents, body = parallel_nest(stmt)
    stmts = list(body.seq) if isinstance(body, tirx.SeqStmt) else [body]
    inline = _Inline()
    for st in stmts[:-1]:
        if isinstance(st, tirx.Bind):
            inline.values[st.var] = inline.visit(st.value)
        elif isinstance(st, tirx.AllocBuffer) and scope_of(st.buffer) == "local" and \
                [const_int(x) for x in st.buffer.shape] == [1]:
            inline.locals.append(st.buffer)     # a per-thread scalar (``idx = Indices[...]`` in the body)
        elif isinstance(st, tirx.BufferStore) and any(st.buffer.same_as(b) for b in inline.locals) and \
                not any(st.buffer.same_as(b) for b in inline.stored):
            inline.stored[st.buffer] = inline.visit(st.value)
        else:
            return None
    store = stmts[-1]
    if not isinstance(store, tirx.BufferStore) or any(store.buffer.same_as(b) for b in inline.locals):
        return None
    if len(stmts) > 1:
        store = tirx.BufferStore(store.buffer, inline.visit(store.value), [inline.visit(i) for i in store.indices])
        if inline.unknown:
            return None     # a per-thread scalar read before it is written
    return loop_vars, extents, store


class _Inline(ExprRewriter):
    """Substitutes a gather body's bindings and per-thread scalars into its store."""

    def __init__(self):
        self.values, self.locals, self.stored, self.unknown = {}, [], {}, False

    def visit_var(self, var):
        return next((v for k, v in self.values.items() if k.same_as(var)), var)

    def visit_load(self, load, indices):
        if any(load.source.same_as(b) for b in self.locals):
            value = next((v for k, v in self.stored.items() if k.same_as(load.source)), None)
            if value is None:
                self.unknown = True
                return load
            return value
        return super().visit_load(load, indices)


def thread_scalar(buf) -> bool:
    """A one-element per-thread buffer (``x = T.alloc_var(...)``, a scalar assigned in the body)."""
    return scope_of(buf) in ("local", "local.var") and [const_int(x) for x in buf.shape] == [1]


def plain_consumer(stmt, in_flight) -> bool:
    """Whether ``stmt``'s shared-memory accesses all happen within it and it issues no cp.async
    group of its own: its calls are tile ops among gemm, fill, reduce, cumsum, atomic,
    annotate_layout and copies other than global -> shared (which may be cp.async groups; a
    ``T.async_copy`` stays in flight), no raw calls; ``in_flight(gemm)`` says whether a gemm is
    left running past its statement (an asynchronous wgmma)."""
    ok = [True]

    def visit(s):
        if not ok[0] or not isinstance(s, tirx.Evaluate):
            return
        name = op_name(s)
        if name is None:
            ok[0] = False       # a raw call: its accesses are not known
        elif name == "gemm":
            ok[0] = not in_flight(s)
        elif name == "copy":
            src, dst = decode_region(s.value.args[0]), decode_region(s.value.args[1])
            ok[0] = not (scope_of(src.buffer) == "global" and scope_of(dst.buffer) in SHARED_SCOPES)
        elif name not in ("fill", "reduce", "cumsum", "atomic", "annotate_layout"):
            ok[0] = False

    walk_stmts(stmt, visit)
    return ok[0]


def produced_buffer(stmt):
    """The shared buffer a producer (a ``T.copy`` or a gather nest) fills."""
    if is_parallel_nest(stmt):
        return gather_nest(stmt)[2].buffer
    return decode_region(stmt.value.args[1]).buffer


@dataclass(frozen=True)
class PipelinedLoop:
    loop: object          # the T.Pipelined For
    stages: int
    producers: tuple      # top-level global-to-shared copies of the body
    consumers: tuple      # every other top-level statement, in order
    gathers: tuple = ()   # top-level gather nests issued ahead too (also in consumers; S >= 2)
    guard: object = None  # the condition of a body that is one ``if`` around everything (see above)

    @classmethod
    def of(cls, loop) -> "PipelinedLoop":
        guard, stmts = _guarded_body(loop)
        ahead = _ahead(stmts)
        if guard is not None and not ahead:     # nothing to issue early: the body as written
            guard, stmts = None, body_list(loop)
            ahead = _ahead(stmts)
        gathers = tuple(s for s in stmts if num_stages(loop) >= 2 and guard is None and _gather_ahead(s, stmts))
        return cls(loop, num_stages(loop), tuple(ahead), tuple(s for s in stmts if not any(s is a for a in ahead)),
                   gathers, guard)

    @property
    def staged(self) -> list:
        """The shared buffers the producers fill, in producer order."""
        return [decode_region(p.value.args[1]).buffer for p in self.producers]

    @property
    def gathered(self) -> list:
        """The shared buffers the gathers fill."""
        return [produced_buffer(g) for g in self.gathers]

    def single_wgmma(self, layouts):
        """The one wgmma gemm (shared A and B, float accumulator, no clear) that is the whole
        consumer side (the GEMM main loop), or None. ``layouts``: the kernel's ``Layouts``."""
        return single_wgmma(layouts, self.consumers)

    def async_wgmma(self, layouts):
        """The gemm that ``pipeline`` issues asynchronously with one wgmma in flight
        (``single_wgmma``, and S >= 3), or None."""
        return self.single_wgmma(layouts) if self.stages >= 3 else None


def _ahead(stmts) -> list:
    """The producers among ``stmts``: global-to-shared copies whose region reads nothing the body
    binds or writes (``_defined_in``) and whose tile no earlier statement of the body reads (such a
    read sees the tile of the previous iteration, or the one set before the loop: the copy refills
    it for the next iteration, so issuing it ahead would overwrite what is still to be read)."""
    local = _defined_in(stmts)
    out = []
    for k, s in enumerate(stmts):
        if not is_producer(s) or (local and uses_vars(s.value.args[0], local)):
            continue
        tile = decode_region(s.value.args[1]).buffer
        if any(tile in buffer_rw(st, SHARED_SCOPES)[0] for st in stmts[:k]):
            continue
        out.append(s)
    return out


def _guarded_body(loop):
    """(guard, statements): for a body that is one ``if c:`` without else, whose condition reads
    only global tensors or registers the body does not write, ``c`` and the branch's top-level
    statements; else (None, the body's statements)."""
    stmts = body_list(loop)
    if len(stmts) != 1 or not isinstance(stmts[0], tirx.IfThenElse) or stmts[0].else_case is not None:
        return None, stmts
    cond, inner = stmts[0].condition, stmts[0].then_case
    inner = list(inner.seq) if isinstance(inner, tirx.SeqStmt) else [inner]
    reads = [e.source for e in tensor_loads(cond)]
    if any(scope_of(b) not in ("global", "local", "local.var", "local.fragment") for b in reads):
        return None, stmts      # (registers and global memory only: no barrier orders an early read)
    written = _written(inner)
    if any(b.same_as(w) for b in reads for w in written):
        return None, stmts
    return cond, inner


def _gather_ahead(stmt, stmts) -> bool:
    """A gather (``gather_width``) that can be issued iterations ahead: it reads no variable the
    body binds, no tensor the body writes, and fills a shared buffer no other statement of the
    body writes (nor another producer)."""
    if not gather_width(stmt):
        return False
    others = [s for s in stmts if not s.same_as(stmt)]
    local = _defined_in(others)
    store = gather_nest(stmt)[2]
    if local and uses_vars(store, [v for v in local if isinstance(v, tirx.Var)]):
        return False
    written = _written(others)
    reads = [e.source for e in tensor_loads(store)]
    return not any(b.same_as(w) for b in reads + [store.buffer] for w in written)


def _written(stmts) -> list:
    """Buffers any of ``stmts`` writes (stores, and tile operands a tile op writes)."""
    out = []

    def visit(st):
        if isinstance(st, tirx.BufferStore):
            out.append(st.buffer)
        elif isinstance(st, tirx.Evaluate) and isinstance(st.value, ir.Call):
            for arg in st.value.args:
                if isinstance(arg, ir.Call) and getattr(arg.op, "name", "") == "tl.region":
                    r = decode_region(arg)
                    if r.access & 2:
                        out.append(r.buffer)

    for st in stmts:
        walk_stmts(st, visit)
    return out


def _defined_in(stmts) -> list:
    """Variables and buffers the loop body itself binds, allocates or writes: a copy whose region
    reads one (``offset = idx[0]; T.copy(A[offset], S)``) needs this iteration's value, so it is
    not issued ahead (it stays a consumer, in order)."""
    out = []

    def visit(st):
        if isinstance(st, tirx.Bind):
            out.append(st.var)
        elif isinstance(st, tirx.BufferStore):
            out.append(st.buffer)
        elif isinstance(st, (tirx.AllocBuffer, tirx.DeclBuffer)):
            buf = st.buffer
            out.append(getattr(buf, "data", buf))

    for st in stmts:
        if not is_producer(st):
            walk_stmts(st, visit)
    return out


def single_wgmma(layouts, consumers):
    """The one wgmma gemm (shared A and B, float accumulator, no clear) that is the whole of
    ``consumers``, or None."""
    if len(consumers) != 1 or op_name(consumers[0]) != "gemm":
        return None
    stmt = consumers[0]
    plan = layouts.gemms.get(stmt)
    args = stmt.value.args
    a, c = decode_region(args[0]), decode_region(args[2])
    if plan is None or plan.kind != "wgmma" or scope_of(a.buffer) not in SHARED_SCOPES:
        return None
    if str(c.buffer.dtype) != "float32" or const_int(args[6]) != 0:
        return None
    return stmt


def pipelined_loops(body) -> list:
    """A ``PipelinedLoop`` for every ``T.Pipelined`` loop under ``body``, in program order
    (whatever its stage count: a loop of fewer than two stages is not pipelined)."""
    out = []
    walk_stmts(body, lambda s: out.append(PipelinedLoop.of(s)) if is_pipelined(s) else None)
    return out


# Internal lowering config (not a user key): False keeps the gathers as consumers with one buffer
# each (engine.pipeline, where staging them would not fit shared memory).
GATHERS_KEY = "tl.pipeline_gathers"


def plan_stages(info, gathers: bool = True) -> dict:
    """Shared buffer -> number of copies, for buffers filled by pipelined producers (and by the
    gathers, unless ``gathers`` is False: a warp-specialised kernel keeps them as consumers)."""
    from tilelang.transform.user_ws import staged_copies   # (pipelined loops of T.ws blocks)

    stages = staged_copies(info.body)
    for pl in pipelined_loops(info.body):
        if pl.stages >= 2:
            for buf in pl.staged + (pl.gathered if gathers else []):
                stages[buf] = max(stages.get(buf, 1), pl.stages)
    return stages


__all__ = ["PipelinedLoop", "body_list", "gather_width", "is_pipelined", "is_producer", "num_stages",
           "pipelined_loops", "plan_stages", "produced_buffer", "single_wgmma"]
