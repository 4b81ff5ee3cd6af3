"""Integer bindings that divide by a run-time value stay bindings in the CUDA.

Contract. ``keep_dividing_binds(func)`` (engine/pipeline._emit, before ``emit_cuda``, unless
``tl.disable_kept_binds``) returns ``func`` with the value of every integer ``Bind``
that still divides (or takes a remainder) by a non-constant once simplified under the launch
extents wrapped in ``tl::opaque`` (an identity, ``src/tl/common.h``); every other statement is
left as it is. apache-tvm's simplifier substitutes each pure integer binding into the statements
after it (``StmtSimplify``), so the CUDA would repeat the division wherever the variable is used.
nvcc does not take a division by a run-time value (it may trap) out of a loop whose iterations
first wait on a barrier (a ``mbarrier.try_wait`` spin it cannot prove to end): in a
warp-specialised loop that reads ``scales[bx_swz, k]``, ``T.use_swizzle``'s panel width
(``min(gy - first, panel)``) cost a ``div.s32`` (some 30 SASS instructions, a dependent chain)
every iteration, ahead of the wgmma issue. Behind the opaque call the binding is computed once,
where the lowering put it. Divisions by constants are left to TVM: nvcc turns them into
multiplications, which it hoists.
"""

from __future__ import annotations

import tvm
from tvm import tirx

from tilelang.tir_utils import any_expr, dtype_of, map_stmts, walk_stmts

OPAQUE = "tl::opaque"
KEPT_BINDS_OFF = "tl.disable_kept_binds"     # pass config: leave every binding to TVM (engine/pipeline._emit)
_DIVISIONS = (tirx.Div, tirx.Mod, tirx.FloorDiv, tirx.FloorMod)


def _divides_by_runtime_value(expr) -> bool:
    return any_expr(expr, lambda e: isinstance(e, _DIVISIONS) and not isinstance(e.b, tirx.IntImm))


def _launch_analyzer(body):
    """An analyzer that knows the range of every thread and block index of ``body``."""
    an = tvm.sym.Analyzer()

    def bind(st):
        if isinstance(st, tirx.AttrStmt) and st.attr_key == "thread_extent":
            an.bind(st.node.var, tvm.ir.Range(0, st.value))

    walk_stmts(body, bind)
    return an


def keep_dividing_binds(func):
    an = None

    def keep(st):
        nonlocal an
        if not isinstance(st, tirx.Bind) or not dtype_of(st.var).startswith("int"):
            return None
        if not _divides_by_runtime_value(st.value):
            return None
        an = an or _launch_analyzer(func.body)
        if not _divides_by_runtime_value(an.simplify(st.value)):
            return None     # (a panel as tall as the grid: TVM folds the division away)
        return tirx.Bind(st.var, tirx.call_extern(dtype_of(st.var), OPAQUE, st.value), span=st.span)

    body = map_stmts(func.body, pre=keep)
    return func if body.same_as(func.body) else func.with_body(body)
