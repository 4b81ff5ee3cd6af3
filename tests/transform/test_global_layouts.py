"""``transform/global_layouts.py`` on CPU: ``T.annotate_layout`` on a global tensor addresses it
through the layout (upstream's ``make_dq_layout``: a warp's atomics of one accumulator register
land in one 128-byte line), tile copies and atomics of it become element loops, and what cannot
be honoured is a located TL0201 error."""

import re

import pytest

import tilelang
import tilelang.language as T
from tilelang.diagnostics import TileLangCompileError


def dq_layout(A):
    """upstream's make_dq_layout for a [L, D] tensor."""
    return T.Layout(A.shape, lambda l, d: [l // 8, d // 8, d % 2, 4 * (l % 8) + (d % 8) // 2])


def offset(l, d, D):
    """Where dq_layout puts element (l, d) of a [L, D] tensor, as a flat index."""
    return (((l // 8) * (D // 8) + d // 8) * 2 + d % 2) * 32 + 4 * (l % 8) + (d % 8) // 2


def laid_copy(L=64, D=64, layout=dq_layout, into=True):
    """``into``: Y (laid out) = X; else Y = X (laid out) read back."""
    @T.prim_func
    def k(X: T.Tensor((L, D), "float32"), Y: T.Tensor((L, D), "float32")):
        with T.Kernel(1, threads=128):
            T.annotate_layout({(Y if into else X): layout(Y if into else X)})
            t = T.alloc_fragment((L, D), "float32")
            T.copy(X[0:L, 0:D], t)
            T.copy(t, Y[0:L, 0:D])
    return k


def laid_atomic(L=32, D=64):
    """dQ (laid out) += X through a gemm-shaped accumulator fragment, twice."""
    @T.prim_func
    def k(X: T.Tensor((L, D), "float16"), W: T.Tensor((D, D), "float16"), dQ: T.Tensor((L, D), "float32")):
        with T.Kernel(1, threads=128):
            T.annotate_layout({dQ: dq_layout(dQ)})
            xs = T.alloc_shared((L, D), "float16")
            ws = T.alloc_shared((D, D), "float16")
            acc = T.alloc_fragment((L, D), "float32")
            T.copy(X, xs)
            T.copy(W, ws)
            T.clear(acc)
            T.gemm(xs, ws, acc)
            T.atomic_add(dQ[0:L, 0:D], acc)
            T.atomic_add(dQ[0:L, 0:D], acc)
    return k


def _src(func, arch="sm_90a"):
    return tilelang.lower(func, target=arch).source


def test_offset_matches_upstream_order():
    # lanes of one m16n8 accumulator register: row = lane / 4, column = 2 * (lane % 4)
    assert [offset(lane // 4, 2 * (lane % 4), 64) for lane in range(32)] == list(range(32))


def _c_expr(text):
    """A CUDA index expression of the kernels above as a Python function of (tid, v, w)."""
    text = text.replace("((int)threadIdx.x)", "tid")
    return eval("lambda tid, v=0, w=0: " + text)  # noqa: S307 - our own generated integer arithmetic


def test_copy_into_a_laid_out_tensor_is_addressed_through_the_layout():
    src = _src(laid_copy())
    # t[w * 4 + j] = X[load(tid, w) + j]; Y[store(tid, v)] = t[v]: element (l, d) of X must land at
    # offset(l, d) of Y's storage
    load = _c_expr(re.search(r"\(float4\*\)\(X \+ (.*)\);", src).group(1))
    store = _c_expr(re.search(r"\n\s*Y\[(.*)\] = t\[v\];", src).group(1))
    for tid in range(128):
        for v in range(32):
            l, d = divmod(load(tid, w=v // 4) + v % 4, 64)
            assert store(tid, v) == offset(l, d, 64)


def test_atomics_of_an_accumulator_take_one_line_per_warp_instruction():
    for arch in ("sm_90a", "sm_80"):
        src = _src(laid_atomic(), arch)
        adds = [line for line in src.splitlines() if "atomic_add" in line and "dQ[" in line]
        assert adds, src
        assert all("(((int)threadIdx.x) & 31)" in line for line in adds), adds
        assert "atomic_addx4" not in src


def test_identity_layout_changes_nothing():
    plain = _src(laid_copy(layout=lambda A: T.Layout(A.shape, lambda l, d: [l, d])))
    assert "Y_laid" not in plain


@pytest.mark.parametrize("why", ["not onto", "tile op"])
def test_what_cannot_be_honoured_is_a_located_error(why):
    if why == "not onto":
        func = laid_copy(layout=lambda A: T.Layout(A.shape, lambda l, d: [l, d * 2]))   # gaps: 64 x 127
        words = "output space"
    else:
        @T.prim_func
        def func(X: T.Tensor((64, 64), "float32"), Y: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=128):
                T.annotate_layout({X: dq_layout(X)})
                s = T.alloc_fragment((64,), "float32")
                T.reduce_sum(X, s, dim=1)
                T.copy(s, Y)
        words = "only T.copy and T.atomic_"
    with pytest.raises(TileLangCompileError) as err:
        _src(func)
    text = str(err.value)
    assert "TL0201" in text and words in text


def test_aliasing_layout_is_refused_at_the_annotation():
    with pytest.raises(ValueError, match="global tensor `Y`: the forward map must be injective"):
        laid_copy(layout=lambda A: T.Layout(A.shape, lambda l, d: [l, d // 2]))


def test_parallel_coalesced_width_sets_the_vector_width():
    def copy(width):
        @T.prim_func
        def k(X: T.Tensor((64, 64), "float32"), Y: T.Tensor((64, 64), "float32")):
            with T.Kernel(1, threads=128):
                for i, j in T.Parallel(64, 64, coalesced_width=width):
                    Y[i, j] = X[i, j]
        return _src(k)

    assert "float4" in copy(None)
    one = copy(1)
    assert "float4" not in one and "float2" not in one
    assert "float2" in copy(2) and "float4" not in copy(2)


def test_a_loop_bound_read_from_a_laid_out_tensor_is_addressed_through_the_layout():
    @T.prim_func
    def k(N: T.Tensor((64, 64), "int32"), Y: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128):
            T.annotate_layout({N: dq_layout(N)})
            acc = T.alloc_var("float32")
            acc = 0.0
            for i in T.serial(N[0, 1]):
                acc += 1.0
            Y[0] = acc
    src = _src(k)
    assert f"N[{offset(0, 1, 64)}]" in src, src     # element (0, 1) lives at offset 32
