"""The model of a ``T.Pipelined(n, num_stages=S)`` loop: its stages, producers and consumers.

One home for what every reader of such a loop must agree on: the software pipeliner
(``pipeline``), warp specialisation (``warp_specialize``), the shared-memory sizes
(``plan_stages``, read by the Lowerer and the resource checks) and the hover data
(``pipelined_loops``).

* ``stages``: S, the loop's ``tl.num_stages`` annotation (0 when it has none);
* ``producers``: the top-level statements of the loop body that are ``T.copy`` from a global
  tensor into shared memory; they are issued ahead of the consumers into S-deep buffers;
* ``consumers``: every other top-level statement of the body, in order;
* ``staged``: the shared buffers the producers fill.

Contract: reads the IR only, never rewrites it; no state is kept between calls.
"""

from __future__ import annotations

from dataclasses import dataclass

from tvm import tirx

from tilelang.language.loops import STAGES_ATTR
from tilelang.tir_utils import const_int, uses_vars, walk_stmts
from tilelang.transform.kernel import SHARED_SCOPES, decode_region, op_name, scope_of


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


@dataclass(frozen=True)
class PipelinedLoop:
    loop: object          # the T.Pipelined For
    stages: int
    producers: tuple      # top-level global-to-shared copies of the body
    consumers: tuple      # every other top-level statement, in order

    @classmethod
    def of(cls, loop) -> "PipelinedLoop":
        stmts = body_list(loop)
        local = _defined_in(stmts)
        ahead = [s for s in stmts if is_producer(s) and not (local and uses_vars(s.value.args[0], local))]
        return cls(loop, num_stages(loop), tuple(ahead), tuple(s for s in stmts if not any(s is a for a in ahead)))

    @property
    def staged(self) -> list:
        """The shared buffers the producers fill, in producer order."""
        return [decode_region(p.value.args[1]).buffer for p in self.producers]

    def single_wgmma(self, layouts):
        """The one wgmma gemm (shared A and B, float accumulator, no clear) that is the whole
        consumer side (the GEMM main loop), or None. ``layouts``: the kernel's ``Layouts``."""
        return single_wgmma(layouts, self.consumers)

    def async_wgmma(self, layouts):
        """The gemm that ``pipeline`` issues asynchronously with one wgmma in flight
        (``single_wgmma``, and S >= 3), or None."""
        return self.single_wgmma(layouts) if self.stages >= 3 else None


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


def plan_stages(info) -> dict:
    """Shared buffer -> number of copies, for buffers filled by pipelined producers."""
    stages = {}
    for pl in pipelined_loops(info.body):
        if pl.stages >= 2:
            for buf in pl.staged:
                stages[buf] = max(stages.get(buf, 1), pl.stages)
    return stages


__all__ = ["PipelinedLoop", "body_list", "is_pipelined", "is_producer", "num_stages",
           "pipelined_loops", "plan_stages", "single_wgmma"]
