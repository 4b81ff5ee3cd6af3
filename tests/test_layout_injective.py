"""A ``T.Layout`` annotated on a shared buffer must send distinct elements to distinct addresses:
a many-to-one map is a ``ValueError`` at the ``T.annotate_layout`` line naming the buffer and two
colliding coordinates (upstream's type and wording); injective maps, codomain-growing ones
included, keep compiling."""

import re

import pytest

import tilelang
import tilelang.language as T
from tilelang.layout import Layout

N = 128
REJECT = r"shared buffer `s`.*must be injective.*both map to physical coordinates"


def _kernel(fwd):
    @T.prim_func
    def main(A: T.Tensor((N,), "int32"), Out: T.Tensor((N,), "int32")):
        with T.Kernel(1, threads=N):
            s = T.alloc_shared((N,), "int32")
            T.annotate_layout({s: Layout((N,), fwd)})
            for i in T.Parallel(N):
                s[i] = A[i]
            for i in T.Parallel(N):
                Out[i] = s[i]

    return main


@pytest.mark.parametrize("fwd, clash", [
    (lambda i: i % 64, r"\(0,\) and \(64,\) both map to physical coordinates \(0,\)"),
    (lambda i: i * 0, r"\(0,\) and \(1,\)"),
    (lambda i: (i % 64) * 4, r"\(0,\) and \(64,\)"),
])
def test_many_to_one_shared_layout_is_a_located_value_error(fwd, clash):
    with pytest.raises(ValueError, match=REJECT) as err:
        tilelang.lower(_kernel(fwd), "sm_90a", out_idx=[1])
    assert re.search(clash, str(err.value))
    assert "test_layout_injective.py" in str(err.value)      # located at the user's annotate line


@pytest.mark.parametrize("fwd", [lambda i: i, lambda i: i ^ 1, lambda i: i * 2, lambda i: i + 10])
def test_injective_shared_layouts_still_compile(fwd):
    art = tilelang.lower(_kernel(fwd), "sm_90a", out_idx=[1])
    assert "smem" in art.source


def test_injectivity_violation_of_a_layout():
    assert Layout((8, 8), lambda i, j: [j, i]).injectivity_violation() is None
    msg = Layout((8, 8), lambda i, j: [i, j % 4]).injectivity_violation()
    assert msg == "logical coordinates (0, 0) and (0, 4) both map to physical coordinates (0, 0)"
