"""Gathered global-to-shared copies of a pipelined loop as cp.async.

Input: a ``T.Parallel`` nest that ``pipelined_loop.gather_width`` accepts (one store
``S[..., d] = G[..., idx(...), d + c]``, the other indices possibly reading global tensors, such
as the top-k ``Indices`` of sparse attention), lowered while the software pipeliner issues it
ahead (``Lowerer.in_producer``; the pipeline commits and waits). Output: each thread moves
vectors of ``w`` elements (``w * element bytes`` <= 16, ``gather_width``) of the tile in
row-major order, vector ``q = it * T + tid`` in iteration ``it``, as
``tl::cp_async_gs<w * E>(&S[...], &G[...])``; where the analyzer cannot prove the source element
in bounds (a gathered row index), ``tl::cp_async_gs_conditional`` with that bound check, which
fills the vector with zeros (the safe value of an out-of-bounds read inside T.Parallel) instead
of reading. An index read from a global tensor is guarded as inside any T.Parallel.

``lower_gather`` returns None where it does not apply and the nest is lowered as any other
(plain stores into the same stage): a shared buffer with a user layout (``T.Layout``), a source
whose vectors the analyzer cannot prove aligned (or, along the last dimension, within a row), a
safe value other than 0, or a destination row that is not whole vectors.
"""

from __future__ import annotations

import types

from tvm import tirx

from tilelang.language.dtypes import nbytes
from tilelang.layout import SharedLayout
from tilelang.tir_utils import const_int, evaluate_extern, i32
from tilelang.transform.kernel import safe_value
from tilelang.transform.lower_copy import _vector_walk
from tilelang.transform.pipelined_loop import gather_nest, gather_width


def _flat(buf, indices):
    """Row-major flat element offset of ``buf[indices]`` (None when the rank disagrees)."""
    if len(indices) == 1:
        return indices[0]
    if len(indices) != len(buf.shape):
        return None
    flat, stride = i32(0), i32(1)
    for i, n in zip(reversed(indices), reversed(list(buf.shape))):
        flat = flat + i * stride
        stride = stride * n
    return flat


def lower_gather(lw, stmt):
    """The cp.async lowering of a gathered copy ``stmt`` (module docstring), or None."""
    vec = gather_width(stmt)
    if not vec:
        return None
    loop_vars, extents, store = gather_nest(stmt)
    ext = [const_int(e) for e in extents]
    dst, load = store.buffer, store.value
    src = load.source
    layout = lw.layouts.shared.get(dst)
    if not isinstance(layout, SharedLayout) or vec > layout.vector or const_int(dst.shape[-1]) is None \
            or const_int(dst.shape[-1]) % vec:
        return None
    zero = safe_value(lw.info, src, str(src.dtype))
    if not isinstance(zero, (tirx.IntImm, tirx.FloatImm)) or zero.value != 0:
        return None     # (cp.async fills with zeros)
    it, iters, q, total, pos = _vector_walk(ext, vec, lw.T, lw.tid)
    if iters > 1:
        lw.bind_loop(it, i32(iters))
    saved = dict(lw.vmap)
    for var, p in zip(loop_vars, pos):
        lw.vmap[var] = p
    # (a context of the T.Parallel kind, so that reads of global tensors in the indices are
    # guarded as in any T.Parallel; the nest touches no fragment)
    ctx = types.SimpleNamespace(loop_vars=loop_vars, idx=pos, layout=None, v=None)
    try:
        d_idx = [lw.rewrite(i, ctx) for i in store.indices]
        s_idx = [lw.rewrite(i, ctx) for i in load.indices]
    finally:
        lw.vmap = saved
    an = lw.an
    n_last = i32(src.shape[-1]) if isinstance(src.shape[-1], int) else src.shape[-1]
    if not an.can_prove(tirx.floormod(n_last, tirx.const(vec, n_last.dtype)) == 0):
        return None     # a vector could run past the end of a row
    view, flat_idx = lw.element(src, s_idx)
    flat = _flat(view, flat_idx)
    if flat is None or not an.can_prove(tirx.floormod(flat, tirx.const(vec, flat.dtype)) == 0):
        return None
    guard = lw.global_guard(src, s_idx)
    bytes_ = vec * nbytes(str(src.dtype))
    d_ptr = lw.shared_ptr(dst, d_idx)
    s_ptr = tirx.address_of(tirx.BufferLoad(view, flat_idx))
    if guard is None:
        one = evaluate_extern(f"tl::cp_async_gs<{bytes_}>", d_ptr, s_ptr, span=stmt.span)
    else:
        one = evaluate_extern(f"tl::cp_async_gs_conditional<{bytes_}>", d_ptr, s_ptr, guard, span=stmt.span)
    if total % lw.T:
        one = tirx.IfThenElse(tirx.LT(q, i32(total)), one, None)
    if iters == 1:
        return one
    return tirx.For(it, i32(0), i32(iters), tirx.ForKind.SERIAL, one, annotations={"pragma_unroll": True},
                    span=stmt.span)


__all__ = ["lower_gather"]
