"""Fragment layouts: bijectivity, the mma accumulator mapping, reductions, swizzle banks."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tilelang.tir_utils import eval_int
from tilelang.layout import (LayoutError, SharedLayout, default_fragment, drop_dim, mma_accumulator,
                             mma_operand_a, project)


def _covers_each_once(frag):
    owners = frag.owners()
    counts = np.bincount(owners.ravel(), minlength=int(np.prod(frag.shape)))
    return counts


@pytest.mark.parametrize("M,N,wm,wn", [(128, 128, 2, 2), (64, 64, 2, 2), (128, 256, 2, 4), (16, 8, 1, 1)])
def test_mma_accumulator_is_a_bijection(M, N, wm, wn):
    frag = mma_accumulator(M, N, wm, wn, 32 * wm * wn)
    assert (_covers_each_once(frag) == 1).all()
    assert frag.local_size == M * N // (32 * wm * wn)


def test_mma_accumulator_matches_ptx_m16n8():
    frag = mma_accumulator(16, 8, 1, 1, 32)
    owners = frag.owners()
    # c0,c1: row lane/4, cols (lane%4)*2 + {0,1}; c2,c3: row lane/4 + 8.
    for lane in range(32):
        r, c = lane // 4, (lane % 4) * 2
        assert list(owners[lane]) == [r * 8 + c, r * 8 + c + 1, (r + 8) * 8 + c, (r + 8) * 8 + c + 1]


def test_operand_a_replicated_over_warp_n():
    frag = mma_operand_a(64, 32, 2, 2, 128)
    assert frag.replication == 2
    assert (_covers_each_once(frag) == 2).all()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([1, 2, 3, 4, 8, 16, 64, 100, 128]), min_size=1, max_size=3),
       st.sampled_from([32, 64, 128, 256]), st.sampled_from([1, 2, 4, 8]))
def test_default_fragment_covers_every_element_equally(shape, threads, vec):
    frag = default_fragment(shape, threads, vec)
    counts = _covers_each_once(frag)
    assert (counts == frag.replication).all()


def test_drop_dim_replicates_reduced_threads():
    acc = mma_accumulator(128, 128, 2, 2, 128)
    rows = drop_dim(acc, 1)
    assert rows.shape == (128,)
    assert rows.replication == 8  # 4 lanes of a quad x 2 warps along N
    assert (_covers_each_once(rows) == 8).all()
    assert rows.local_size == 8


def test_project_keeps_the_row_owners():
    acc = mma_accumulator(64, 64, 2, 2, 128)
    rows = project(acc, [0])
    assert rows.same_as(drop_dim(acc, 1))


def test_inconsistent_axes_rejected():
    from tilelang.layout import Axis, Fragment

    with pytest.raises(LayoutError):
        Fragment((8,), 32, (Axis("t", "thread", 32, 1, 0, 1),), "bad")


@pytest.mark.parametrize("rows,cols", [(128, 32), (32, 128), (64, 64), (64, 16)])
def test_swizzle_makes_ldmatrix_rows_conflict_free(rows, cols):
    from tvm import tirx

    layout = SharedLayout((rows, cols), 2)
    assert layout.group > 1
    r, c = tirx.Var("r", "int32"), tirx.Var("c", "int32")
    expr = layout.offset([r, c])
    for chunk in range(cols // 8):
        banks = set()
        for row in range(8):
            off = eval_int(expr, {"r": row, "c": chunk * 8})
            banks.add((off * 2 // 16) % 8)
        assert len(banks) == 8, (chunk, banks)
