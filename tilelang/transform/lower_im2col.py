"""Lowering of ``T.im2col`` (``tl.im2col``): a convolution's input patches gathered into a shared tile.

Contract (semantics in ``tilelang.language.im2col``): the ``(block_M, block_K)`` tile is spread over
the block's threads in runs of ``vec`` consecutive columns, thread ``tid`` taking runs
``it * T + tid`` in row-major order. A run is one 16-byte vector (8 fp16 channels) when the channel
count ``C`` and ``block_K`` are multiples of it, so a run never crosses a ``(kh, kw)`` position;
otherwise narrower, down to single elements. Each run is read from global memory with an ordinary
vector load (``tl::copy_vec``) when it lies inside the image, and written as zeros when it falls in
the padding or past the last output pixel / reduction column. At the top of a ``T.Pipelined`` body
it is a producer (``pipelined_loop.is_producer``): issued stages ahead into the staged tile as
``cp.async`` of 4 to 16 bytes, zero-filling invalid runs (src-size 0), the pipeline committing and
waiting; runs narrower than 4 bytes stay plain stores. It never becomes a TMA load
(``tma.copy_spec`` refuses it), so a warp-specialised loop does not take such a body. The destination is reached through
``Lowerer.element`` (swizzle and pipeline stage included). Bad operands (an image that is not a
4-D global tensor, a destination that is not a 2-D shared tile, differing dtypes, non-constant
tile extents) are TL0002 errors at the statement.
"""

from __future__ import annotations

from tvm import tirx

from tilelang.language.dtypes import nbytes
from tilelang.layout import CustomSharedLayout
from tilelang.tir_utils import const_int, evaluate_extern, i32, simplify
from tilelang.transform.kernel import SHARED_SCOPES, LoweringError, decode_region, scope_of


def _check(img, col, span):
    if scope_of(img.buffer) != "global" or len(img.buffer.shape) != 4:
        raise LoweringError("TL0002", f"T.im2col: the image '{img.buffer.name}' must be a 4-D (N, H, W, C) "
                            f"global tensor, got a {len(img.buffer.shape)}-D {scope_of(img.buffer)} buffer", span)
    if scope_of(col.buffer) not in SHARED_SCOPES:
        raise LoweringError("TL0002", f"T.im2col: the column tile '{col.buffer.name}' must be in shared memory, "
                            f"got a {scope_of(col.buffer)} buffer", span,
                            notes=["allocate it with T.alloc_shared((block_M, block_K), dtype)"])
    dims = [d for d, e in enumerate(col.extents) if const_int(e) != 1]
    if len(col.extents) < 2 or any(d < len(col.extents) - 2 for d in dims):
        raise LoweringError("TL0002", f"T.im2col: the column tile '{col.buffer.name}' must be a 2-D "
                            "(block_M, block_K) tile", span)
    if img.dtype != col.dtype:
        raise LoweringError("TL0002", f"T.im2col: the image '{img.buffer.name}' is {img.dtype} but the column "
                            f"tile '{col.buffer.name}' is {col.dtype}; they must match", span)


def lower_im2col(lw, stmt):
    args = stmt.value.args
    img, col = decode_region(args[0]), decode_region(args[1])
    span = stmt.span
    _check(img, col, span)
    nhw_step, c_step = lw.rewrite(args[2]), lw.rewrite(args[3])
    kernel, stride, dilation, pad = (const_int(a) for a in args[4:8])
    bm, bk = (const_int(lw.rewrite(e)) for e in col.extents[-2:])
    if bm is None or bk is None:
        raise LoweringError("TL0002", f"T.im2col: the extents of '{col.buffer.name}' must be compile-time "
                            "constants", span)
    n_dim, h_dim, w_dim, c_dim = img.buffer.shape
    out_h = simplify(tirx.floordiv(h_dim + 2 * pad - (kernel - 1) * dilation - 1, i32(stride)) + 1)
    out_w = simplify(tirx.floordiv(w_dim + 2 * pad - (kernel - 1) * dilation - 1, i32(stride)) + 1)

    vec = _vector_width(lw, img, col, bk)
    runs = bk // vec
    total = bm * runs
    iters = -(-total // lw.T)
    it = tirx.Var("it", "int32")
    q = it * lw.T + lw.tid if iters > 1 else lw.tid
    i = tirx.floordiv(q, i32(runs))
    j = tirx.floormod(q, i32(runs)) * vec
    m = nhw_step * bm + i
    k = c_step * bk + j
    n = tirx.floordiv(m, out_h * out_w)
    oh = tirx.floordiv(tirx.floormod(m, out_h * out_w), out_w)
    ow = tirx.floormod(m, out_w)
    c = tirx.floormod(k, c_dim)
    kw = tirx.floormod(tirx.floordiv(k, c_dim), i32(kernel))
    kh = tirx.floordiv(k, c_dim * kernel)
    h = simplify(oh * stride + kh * dilation - pad)
    w = simplify(ow * stride + kw * dilation - pad)
    conds = [tirx.LT(m, n_dim * out_h * out_w), tirx.LT(k, c_dim * kernel * kernel),
             tirx.GE(h, 0), tirx.LT(h, h_dim), tirx.GE(w, 0), tirx.LT(w, w_dim)]
    valid = None
    for cond in conds:
        if not lw.prove(cond):
            valid = cond if valid is None else tirx.And(valid, cond)

    d_idx = [lw.rewrite(s) for s in col.starts]
    d_idx[-2], d_idx[-1] = simplify(d_idx[-2] + i), simplify(d_idx[-1] + j)
    s_idx = [simplify(n), h, w, simplify(c)]
    dst_buf, dst_flat = lw.element(col.buffer, d_idx)
    src_buf, src_flat = lw.element(img.buffer, s_idx)
    vec_bytes = vec * nbytes(col.dtype)
    if lw.in_producer and vec_bytes in (4, 8, 16) and not lw.configs.get("tl.disable_async_copy", False):
        # issued ahead by T.Pipelined, which commits and waits: cp.async, zero-filled where invalid
        d_ptr = tirx.address_of(tirx.BufferLoad(dst_buf, dst_flat))
        s_ptr = tirx.address_of(tirx.BufferLoad(src_buf, src_flat))
        one = (evaluate_extern(f"tl::cp_async_gs<{vec_bytes}>", d_ptr, s_ptr, span=span) if valid is None else
               evaluate_extern(f"tl::cp_async_gs_conditional<{vec_bytes}>", d_ptr, s_ptr, valid, span=span))
    elif vec == 1:
        load = tirx.BufferLoad(src_buf, src_flat)
        one = tirx.BufferStore(dst_buf, load if valid is None else
                               tirx.if_then_else(valid, load, tirx.const(0, col.dtype)),
                               dst_flat, span=span)
    else:
        one = evaluate_extern(f"tl::copy_vec<{vec_bytes}>",
                              tirx.address_of(tirx.BufferLoad(dst_buf, dst_flat)),
                              tirx.address_of(tirx.BufferLoad(src_buf, src_flat)), span=span)
        if valid is not None:
            zero = tirx.BufferStore(dst_buf, tirx.Broadcast(tirx.const(0, col.dtype), vec),
                                    [tirx.Ramp(dst_flat[-1], 1, vec)] if len(dst_flat) == 1 else
                                    dst_flat[:-1] + [tirx.Ramp(dst_flat[-1], 1, vec)], span=span)
            one = tirx.IfThenElse(valid, one, zero, span=span)
    if total % lw.T:
        one = tirx.IfThenElse(tirx.LT(q, i32(total)), one, None, span=span)
    if iters == 1:
        return one
    return tirx.For(it, i32(0), i32(iters), tirx.ForKind.SERIAL, one, annotations={"pragma_unroll": True},
                    span=span)


def _vector_width(lw, img, col, bk):
    """Columns per run: 16 bytes when C, block_K and the destination's column start allow it."""
    if isinstance(lw.layouts.shared.get(col.buffer), CustomSharedLayout):
        return 1
    c_dim = const_int(img.buffer.shape[3])
    if c_dim is None or img.buffer.strides:
        return 1
    vec = max(1, 16 // nbytes(col.dtype))
    start = lw.an.modular_set(lw.rewrite(col.starts[-1]))
    row = const_int(col.buffer.shape[-1])
    while vec > 1:
        if (c_dim % vec == 0 and bk % vec == 0 and row is not None and row % vec == 0
                and start.coeff % vec == 0 and start.base % vec == 0):
            break
        vec //= 2
    return vec


__all__ = ["lower_im2col"]
