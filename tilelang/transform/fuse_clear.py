"""Accumulator clears under a branch folded into the wgmma that follows them (sm_90a, after
lowering).

Kernels clear an accumulator right before the gemm that fills it. Unconditionally (``T.clear(acc)``,
a ``T.Parallel`` store of 0) that costs nothing: ptxas sees the zeros and issues the first HGMMA
with RZ inputs and scale-d off. Under a branch it does not: the causal mask
``T.if_then_else(q >= k, 0, -inf)``, which ``Lowerer._unswitch_select`` turns into
``if c: acc_s = 0 else: the mask``, keeps one store per register in every off-diagonal iteration
(32 CS2R a thread for a 64-register tile). wgmma can do it for free: an instruction issued with
scale-d = 0 writes A B into its accumulators instead of adding it.

``fuse(body, acc_regs)``: in every statement sequence, ``if c: <zero fill> else:
other`` (or the branches the other way round; other may be absent), the fill covering every
element of a float register array once, followed, with nothing in between touching the array, by
a ``tl::wgmma_gemm_{ss,rs}[_async]`` call whose accumulator is that array and covers all of it
(``acc_regs``: the array -> the accumulator registers a thread of its wgmma holds, as
``Lowerer.lower_gemm`` recorded them), becomes ``if not c: other`` and the gemm takes ``c ? 0 : 1``
as the scale-d of its first k-step (src/tl/gemm_sm90.h's trailing ``scale_d0`` argument), provided
``c`` reads nothing the statements in between write. Only in kernels whose consumers take their
registers with setmaxnreg (``sets_registers``): the accumulator's stale values then stay live into
the gemm, which elsewhere can cost a block per SM (upstream's varlen attention: 127 -> 138
registers; the attention-sink forward 127 -> 144). mma.sync and the CUDA-core gemm have
no such operand and are left alone; so are gemms whose accumulator a fill covers only in part.
"""

from __future__ import annotations

import itertools

from tvm import ir, tirx

from tilelang.tir_utils import any_expr, const_int, eval_int, extern_name, is_zero_const, map_sequences, walk_stmts

DISABLE_KEY = "tl.disable_clear_fusion"
_GEMMS = ("tl::wgmma_gemm_ss<", "tl::wgmma_gemm_rs<", "tl::wgmma_gemm_ss_async<", "tl::wgmma_gemm_rs_async<")
_FALSE = ", false>"
_MAX_POINTS = 4096      # fills enumerated element by element at most this long


def fuse(body, acc_regs: dict):
    """``body`` with the clears described in the module docstring folded into their gemms."""
    if not acc_regs or not sets_registers(body):
        return body

    def step(out, x):
        out.append(x)
        _try_fold(out, acc_regs)

    return map_sequences(body, step)


def sets_registers(body) -> bool:
    """Whether the kernel raises a role's registers with setmaxnreg (a warp-specialised consumer):
    then, not the register count, decides its occupancy."""
    found = []
    walk_stmts(body, lambda s: found.append(1) if (extern_name(s) or "").startswith("tl::setmaxnreg_inc") else None)
    return bool(found)


def _try_fold(out: list, acc_regs: dict) -> None:
    """``out[-1]`` just joined the sequence: where it is a gemm a clear earlier in ``out`` feeds,
    fold that clear into it (editing ``out`` in place)."""
    gemm = out[-1]
    name = extern_name(gemm)
    if not name or not name.startswith(_GEMMS) or not name.endswith(_FALSE) or len(gemm.value.args) != 4:
        return
    acc = _acc_var(gemm.value.args[3])
    regs = next((n for v, n in acc_regs.items() if acc is not None and acc.same_as(v)), 0)
    if not regs:
        return
    for i in range(len(out) - 2, -1, -1):
        fill = _fill(out[i], acc, regs)
        if fill is None:
            if _touches(out[i], acc):
                return
            continue
        cond, other = fill
        if cond is None or any(_writes_read_by(s, cond) for s in out[i + 1:-1]):
            return      # (an unconditional fill: ptxas issues the first HGMMA with RZ itself)
        scale_d0 = tirx.Select(cond, tirx.IntImm("int32", 0), tirx.IntImm("int32", 1))
        out[-1] = _with_call(gemm, name, [scale_d0])
        if other is None:
            del out[i]
        else:
            out[i] = tirx.IfThenElse(tirx.Not(cond), other, None, span=out[i].span)
        return


def _acc_var(arg):
    """The register array of ``&acc[0]``, else None."""
    if isinstance(arg, tirx.Call) and getattr(arg.op, "name", "") == "tirx.address_of" and arg.args:
        load = arg.args[0]
        if isinstance(load, ir.TensorLoad) and len(load.indices) == 1 and const_int(load.indices[0]) == 0:
            return load.source
    return None


def _fill(st, acc, regs):
    """(None, None) where ``st`` zero-fills every element of ``acc`` (a register array of
    ``regs`` elements); (c, other) where it is ``if c: <that> else: other`` (other may be None;
    the branches the other way round give ``not c``); else None."""
    if isinstance(st, tirx.IfThenElse):
        if _whole_zero_fill(st.then_case, acc, regs):
            return st.condition, st.else_case
        if st.else_case is not None and _whole_zero_fill(st.else_case, acc, regs):
            return tirx.Not(st.condition), st.then_case
        return None
    return (None, None) if _whole_zero_fill(st, acc, regs) else None


def _whole_zero_fill(st, acc, regs) -> bool:
    loops = []
    while isinstance(st, tirx.For):
        loops.append(st)
        st = st.body
    if not isinstance(st, tirx.BufferStore) or not st.buffer.same_as(acc):
        return False
    buf = st.buffer
    if str(buf.dtype) != "float32" or len(buf.shape) != 1 or const_int(buf.shape[0]) != regs:
        return False
    if len(st.indices) != 1 or not is_zero_const(st.value):
        return False
    extents = [const_int(lp.extent) for lp in loops]
    if any(e is None or e <= 0 or const_int(lp.min) != 0 for e, lp in zip(extents, loops)):
        return False
    index = st.indices[0]
    lanes, base, stride = 1, index, None
    if isinstance(index, tirx.Ramp):
        lanes, base, stride = const_int(index.lanes), index.base, index.stride
        if lanes is None or const_int(stride) is None:
            return False
    points = 1
    for e in extents:
        points *= e
    if points * lanes != regs or points > _MAX_POINTS:
        return False
    seen = set()
    names = [lp.loop_var for lp in loops]
    for values in itertools.product(*(range(e) for e in extents)):
        try:
            b = eval_int(base, dict(zip(names, values)))
        except (ValueError, KeyError, TypeError):
            return False
        for lane in range(lanes):
            seen.add(b + lane * (const_int(stride) if stride is not None else 0))
    return seen == set(range(regs))


def _touches(st, buf) -> bool:
    """Whether statement ``st`` mentions the buffer ``buf`` at all (stores, loads, its data)."""
    found = []

    def visit(s):
        if isinstance(s, tirx.BufferStore) and s.buffer.same_as(buf):
            found.append(s)

    walk_stmts(st, visit)
    return bool(found) or any_expr(st, lambda e: isinstance(e, ir.TensorLoad) and e.source.same_as(buf)
                                   or _names_data(e, buf))


def _names_data(e, buf) -> bool:
    """Whether expression ``e`` is ``buf``'s data pointer (0.27: a ``tirx.buffer_data`` call)."""
    return isinstance(e, tirx.Call) and getattr(e.op, "name", "") == "tirx.buffer_data" and bool(e.args) \
        and e.args[0].same_as(buf)


def _writes_read_by(st, cond) -> bool:
    """Whether ``st`` may write something ``cond`` reads: a register array it loads that ``st``
    mentions at all; a load from any other memory is taken to change under it."""
    read = []
    any_expr(cond, lambda e: isinstance(e, ir.TensorLoad) and read.append(e.source) and False)
    if any(b.scope() != "local" for b in read):
        return True
    return any(_touches(st, b) for b in read)


def _with_call(stmt, name, extra):
    call = stmt.value
    args = [tirx.StringImm(name)] + list(call.args[1:]) + list(extra)
    return tirx.Evaluate(tirx.Call(call.dtype, call.op, args, span=call.span), span=stmt.span)
