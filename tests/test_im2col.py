"""T.im2col / T.c2d_im2col: the lowering's index math against a numpy im2col (interpreting the
lowered statement for every thread, no GPU), the compiled conv kernel, warnings and errors."""

from __future__ import annotations

import types
import warnings

import numpy as np
import pytest
import tvm
from tvm import tirx

import tilelang
import tilelang.language as T
from tilelang.diagnostics import TileLangCompileError
from tilelang.language._ops import region
from tilelang.tir_utils import const_int, simplify, substitute
from tilelang.transform.lower_im2col import lower_im2col


# ----- the lowering's semantics, interpreted ---------------------------------------------------

def _reference(img, bm, bk, nhw_step, c_step, k, s, d, p):
    n, h, w, c = img.shape
    oh = (h + 2 * p - d * (k - 1) - 1) // s + 1
    ow = (w + 2 * p - d * (k - 1) - 1) // s + 1
    out = np.zeros((bm, bk), img.dtype)
    for i in range(bm):
        m = nhw_step * bm + i
        if m >= n * oh * ow:
            continue
        b, y, x = m // (oh * ow), (m % (oh * ow)) // ow, m % ow
        for j in range(bk):
            kk = c_step * bk + j
            if kk >= k * k * c:
                continue
            kh, kw, ch = kk // (k * c), (kk // c) % k, kk % c
            hy, wx = y * s + kh * d - p, x * s + kw * d - p
            if 0 <= hy < h and 0 <= wx < w:
                out[i, j] = img[b, hy, wx, ch]
    return out


class _FakeLowerer:
    """What lower_im2col reads of a Lowerer: row-major storage, a thread index, an analyzer."""

    def __init__(self, threads, in_producer=False):
        self.T = threads
        self.in_producer = in_producer
        self.configs = {}
        self.tid = tirx.Var("tid", "int32")
        self.an = tvm.sym.Analyzer()
        self.an.bind(self.tid, tvm.ir.Range(0, threads))
        self.layouts = types.SimpleNamespace(shared={})

    def rewrite(self, e):
        return e

    def prove(self, cond):
        return bool(self.an.can_prove(cond))

    def element(self, buf, idx):
        return buf, list(idx)


def _value(expr, env):
    v = const_int(simplify(substitute(expr, env)))
    assert v is not None, expr
    return v


def _interpret(stmt, env, img, col, bufs):
    """Run the lowered statement for one thread; ``col`` is written in place."""
    if isinstance(stmt, tirx.For):
        for v in range(_value(stmt.extent, env)):
            _interpret(stmt.body, {**env, stmt.loop_var: tirx.IntImm("int32", v)}, img, col, bufs)
    elif isinstance(stmt, tirx.SeqStmt):
        for s in stmt.seq:
            _interpret(s, env, img, col, bufs)
    elif isinstance(stmt, tirx.IfThenElse):
        if _value(stmt.condition, env):
            _interpret(stmt.then_case, env, img, col, bufs)
        elif stmt.else_case is not None:
            _interpret(stmt.else_case, env, img, col, bufs)
    elif isinstance(stmt, tirx.Evaluate):          # tl::copy_vec<BYTES>(&dst[..], &src[..])
        call = stmt.value
        name = str(call.args[0].value)
        kind, size = name[:-1].split("<")
        assert kind in ("tl::copy_vec", "tl::cp_async_gs", "tl::cp_async_gs_conditional"), name
        vec = int(size) // img.itemsize
        dst, src = call.args[1].args[0], call.args[2].args[0]
        if kind == "tl::cp_async_gs_conditional" and not _value(call.args[3], env):   # zero-fill
            di = [_value(i, env) for i in dst.indices]
            col[di[0], di[1]:di[1] + vec] = 0
            return
        di = [_value(i, env) for i in dst.indices]
        si = [_value(i, env) for i in src.indices]
        assert si[3] + vec <= img.shape[3], "a vector crosses a (kh, kw) position"
        col[di[0], di[1]:di[1] + vec] = img[si[0], si[1], si[2], si[3]:si[3] + vec]
    elif isinstance(stmt, tirx.BufferStore):
        idx = stmt.indices
        if isinstance(idx[-1], tirx.Ramp):         # a vector of zeros
            lanes = int(idx[-1].lanes)
            di = [_value(i, env) for i in idx[:-1]] + [_value(idx[-1].base, env)]
            col[di[0], di[1]:di[1] + lanes] = 0
        else:
            di = [_value(i, env) for i in idx]
            col[di[0], di[1]] = _eval_value(stmt.value, env, img)
    else:
        raise AssertionError(type(stmt))


def _eval_value(e, env, img):
    if isinstance(e, tirx.Call):                   # if_then_else(valid, img[...], 0)
        return _eval_value(e.args[1], env, img) if _value(e.args[0], env) else 0
    if isinstance(e, tvm.ir.TensorLoad):
        return img[tuple(_value(i, env) for i in e.indices)]
    return _value(e, env)


CASES = [
    # N, H, W, C, K, S, D, P, bm, bk, threads
    (1, 8, 8, 32, 3, 1, 1, 1, 16, 32, 128),      # upstream's fallback test shape
    (2, 7, 9, 16, 3, 2, 1, 1, 32, 32, 64),       # stride 2, odd sizes, tail rows
    (1, 9, 8, 8, 3, 1, 2, 2, 16, 16, 32),        # dilation 2, pad 2
    (2, 5, 6, 12, 3, 2, 2, 1, 16, 24, 64),       # C = 12: 4-element runs, columns past K*K*C
    (1, 6, 5, 3, 2, 1, 1, 0, 8, 8, 32),          # C = 3: single elements, no padding
    (1, 4, 4, 64, 1, 1, 1, 0, 16, 64, 128),      # a 1x1 convolution
]


@pytest.mark.parametrize("producer", [False, True], ids=["sync", "cp_async"])
@pytest.mark.parametrize("case", CASES)
def test_lowering_matches_numpy(case, producer):
    n, h, w, c, k, s, d, p, bm, bk, threads = case
    img_buf = tirx.decl_buffer((n, h, w, c), "float16", "img")
    col_buf = tirx.decl_buffer((bm, bk), "float16", "col", scope="shared.dyn")
    nhw, cst = tirx.Var("nhw", "int32"), tirx.Var("cst", "int32")
    call = tvm.ir.Call(_op("im2col"), [region(img_buf, [0] * 4, [n, h, w, c], 1),
                                   region(col_buf, [0, 0], [bm, bk], 2), nhw, cst,
                                   *(tirx.IntImm("int32", v) for v in (k, s, d, p, 0))], ret_ty="handle")
    lw = _FakeLowerer(threads, in_producer=producer)
    stmt = lower_im2col(lw, tirx.Evaluate(call))
    rng = np.random.default_rng(0)
    img = rng.standard_normal((n, h, w, c)).astype(np.float16)
    oh = (h + 2 * p - d * (k - 1) - 1) // s + 1
    ow = (w + 2 * p - d * (k - 1) - 1) // s + 1
    for step_m in range(-(-(n * oh * ow) // bm)):
        for step_k in range(-(-(k * k * c) // bk)):
            col = np.full((bm, bk), np.nan, np.float16)
            for t in range(threads):
                env = {lw.tid: tirx.IntImm("int32", t), nhw: tirx.IntImm("int32", step_m),
                       cst: tirx.IntImm("int32", step_k)}
                _interpret(stmt, env, img, col, None)
            np.testing.assert_array_equal(col, _reference(img, bm, bk, step_m, step_k, k, s, d, p))


def _op(name):
    from tilelang.language._ops import get_op
    return get_op(name)


# ----- the whole kernel ------------------------------------------------------------------------

def _conv(N=1, C=32, H=8, W=8, F=32, K=3, S=1, D=1, P=1, bm=64, bn=32, bk=32, threads=128, alias=False,
          col_scope="shared"):
    KH = KW = K
    OH = (H + 2 * P - D * (K - 1) - 1) // S + 1
    OW = (W + 2 * P - D * (K - 1) - 1) // S + 1
    dt = "float16"

    @T.prim_func
    def conv(data: T.Tensor((N, H, W, C), dt), weight: T.Tensor((KH, KW, C, F), dt),
             out: T.Tensor((N, OH, OW, F), dt)):
        with T.Kernel(T.ceildiv(F, bn), T.ceildiv(N * OH * OW, bm), threads=threads) as (bx, by):
            data_shared = T.alloc_shared((bm, bk), dt) if col_scope == "shared" else T.alloc_fragment((bm, bk), dt)
            weight_shared = T.alloc_shared((bk, bn), dt)
            out_local = T.alloc_fragment((bm, bn), "float32")
            weight_flat = T.Tensor((KH * KW * C, F), dt, weight.data)
            out_flat = T.Tensor((N * OH * OW, F), dt, out.data)
            T.clear(out_local)
            for k_iter in T.Pipelined(T.ceildiv(KH * KW * C, bk), num_stages=2):
                if alias:
                    T.c2d_im2col(data, data_shared, by, k_iter, KH, S, D, P)
                else:
                    T.im2col(data, data_shared, by, k_iter, KH, S, D, P)
                T.copy(weight_flat[k_iter * bk, bx * bn], weight_shared)
                T.gemm(data_shared, weight_shared, out_local)
            T.copy(out_local, out_flat[by * bm, bx * bn])

    return conv


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_conv_kernel_compiles(arch):
    with warnings.catch_warnings():
        warnings.simplefilter("error")     # no TL0402: out is written through its T.Tensor view
        art = tilelang.lower(_conv(), target=arch, out_idx=[2])
    src = art.kernel_source
    # a pipelined producer: 8 fp16 channels per cp.async, zero-filled in the padding
    assert "tl::cp_async_gs_conditional<16>" in src and "data[" in src
    assert "tl::copy_vec" not in src.split("for (int k_iter")[1].split("gemm")[0]


def test_c2d_im2col_alias_warns():
    with pytest.warns(DeprecationWarning, match="T.c2d_im2col is deprecated"):
        func = _conv(alias=True)
    assert "tl_im2col" in func.script()


def test_im2col_into_fragment_is_located_error():
    with pytest.raises(TileLangCompileError, match="must be in shared memory") as err:
        tilelang.lower(_conv(col_scope="fragment"), target="sm_80", out_idx=[2])
    assert "TL0002" in str(err.value)


def test_bad_arguments():
    with pytest.raises(TypeError, match="kernel must be a Python int"):
        @T.prim_func
        def f(data: T.Tensor((1, 8, 8, 32), "float16")):
            with T.Kernel(1, threads=128):
                s = T.alloc_shared((16, 32), "float16")
                T.im2col(data, s, 0, 0, 1.5, 1, 1, 1)
    with pytest.raises(ValueError, match="eviction_policy"):
        @T.prim_func
        def g(data: T.Tensor((1, 8, 8, 32), "float16")):
            with T.Kernel(1, threads=128):
                s = T.alloc_shared((16, 32), "float16")
                T.im2col(data, s, 0, 0, 3, 1, 1, 1, eviction_policy="evict_sometimes")


def test_analyzer_counts_the_column_tile():
    from tilelang.carver.arch import CUDA
    from tilelang.tools import Analyzer

    res = Analyzer.analysis(_conv(), CUDA("sm_90a"))
    # grid 1 x 1, 9 k-steps: im2col 64x32 and the weight tile 32x32 per step, output 64x32, fp16
    assert res.total_global_bytes == (9 * (64 * 32 + 32 * 32) + 64 * 32) * 2
    assert res.total_flops == 2 * 64 * 32 * 32 * 9
