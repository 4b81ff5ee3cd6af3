"""Fragment B operands of ``T.gemm`` staged through shared memory.

mma.sync and wgmma read a gemm's B operand from shared memory only. A ``T.gemm(A, B, C)`` whose B
is a whole register fragment (upstream's kda ``chunk_bwd_intra``: ``kg_fragment``, computed in a
``T.Parallel``, is the B of two gemms; upstream reads such a B from registers with mma.sync and
skips that path on sm_90) is compiled as if its author had written the copy:

    B_smem = T.alloc_shared(B.shape, B.dtype)       # at the start of the kernel
    ...
    T.copy(B, B_smem)                               # right before the gemm
    T.gemm(A, B_smem, C)

Layout inference, shared-memory placement and the barrier planner then treat ``B_smem`` as a
user buffer. Gemms that follow one another in a sequence and read the same fragment share one
copy. Contract: ``stage(func) -> func``, the same object where no gemm reads a fragment B; a B
that is part of a fragment (a slice) is left for the checker's TL0002.
"""

from __future__ import annotations

from tvm import ir, tirx

from tilelang.language._ops import get_op, region
from tilelang.tir_utils import map_stmts, seq
from tilelang.transform.kernel import FRAGMENT_SCOPE, decode_region, op_name, scope_of

SHARED = "shared.dyn"


def _fragment_b(stmt):
    """The fragment a ``T.gemm`` statement reads whole as its B operand, or None."""
    if op_name(stmt) != "gemm":
        return None
    b = decode_region(stmt.value.args[1])
    return b.buffer if scope_of(b.buffer) == FRAGMENT_SCOPE and b.is_whole() else None


def _with_b(stmt, stage):
    """The gemm statement ``stmt`` reading ``stage`` (whole) as its B operand."""
    args = list(stmt.value.args)
    shape = list(stage.shape)
    args[1] = region(stage, [0] * len(shape), shape, 1)
    return tirx.Evaluate(ir.Call(stmt.value.op, args, ret_ty="handle"), span=stmt.span)


def stage(func):
    """``func`` with every whole-fragment B operand of a ``T.gemm`` read from a shared copy."""
    launch, body = [], func.body
    while isinstance(body, tirx.AttrStmt) and body.attr_key == "thread_extent":
        launch.append(body)
        body = body.body
    if not launch:
        return func
    stages, spans = {}, {}     # fragment -> its shared copy (first-use order), the first gemm's span

    def stage_of(frag, span=None):
        if frag not in stages:
            stages[frag] = tirx.decl_buffer(list(frag.shape), str(frag.dtype), f"{frag.name}_smem", scope=SHARED)
            spans[frag] = span
        return stages[frag]

    def pre(st):
        if isinstance(st, tirx.SeqStmt):
            return _sequence(st)
        frag = _fragment_b(st)
        return None if frag is None else seq(_staged(st, frag))

    def _staged(st, frag):
        smem = stage_of(frag, st.span)
        shape = list(frag.shape)
        copy = ir.Call(get_op("copy"), [region(frag, [0] * len(shape), shape, 1),
                                        region(smem, [0] * len(shape), shape, 2)], ret_ty="handle")
        return [tirx.Evaluate(copy, span=st.span), _with_b(st, smem)]

    def _sequence(st):
        out, copied, changed = [], None, False
        for x in st.seq:
            frag = _fragment_b(x)
            if frag is None:
                new = map_stmts(x, pre=pre)
                copied = None
                changed = changed or not new.same_as(x)
                out.append(new)
            elif copied is not None and copied.same_as(frag):    # the previous gemm's copy holds
                out.append(_with_b(x, stage_of(frag)))
                changed = True
            else:
                out.extend(_staged(x, frag))
                copied, changed = frag, True
        return seq(out) if changed else st

    new_body = map_stmts(body, pre=pre)
    if not stages:
        return func
    # (each allocation carries its first gemm's span: a diagnostic about the buffer points there)
    new_body = seq([tirx.AllocBuffer(smem, span=spans[frag]) for frag, smem in stages.items()] + [new_body])
    for attr in reversed(launch):
        new_body = tirx.AttrStmt(attr.node, attr.attr_key, attr.value, new_body, span=attr.span)
    return func.with_body(new_body)


__all__ = ["stage"]
