"""A defect inside a ``@T.macro`` body is reported at the macro call, with a note at the statement
in the macro's body (the statement's span is the call's followed by its own line in the body)."""

from __future__ import annotations

import tilelang.language as T
from tilelang.analysis import CheckContext, check


@T.macro
def step(A_s, B_s, C_l):
    T.gemm(A_s, B_s, C_l)


def kernel(M=256, N=256, K=256, bm=128, bn=128, bk=32):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk * 2, bn), "float16")
            C_l = T.alloc_fragment((bm, bn), "float32")
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[k * bk, bx * bn], B_s[0:bk, :])
                step(A_s, B_s, C_l)
            T.copy(C_l, C[by * bm, bx * bn])

    return main


def test_a_gemm_mismatch_inside_a_macro_points_at_the_call_and_the_macro_line():
    src = open(__file__, encoding="utf-8").read()
    ctx = CheckContext(sources={__file__: src})
    diags = [d for d in check(kernel(), "sm_90a", ctx) if d.code == "TL0101"]
    assert len(diags) == 1
    lines = src.splitlines()
    call_line = next(i for i, l in enumerate(lines, 1) if "step(A_s, B_s, C_l)" in l and "def" not in l)
    body_line = next(i for i, l in enumerate(lines, 1) if l.strip() == "T.gemm(A_s, B_s, C_l)")
    d = diags[0]
    assert d.span.line == call_line
    inside = [n for n in d.notes if n.span is not None and n.span.line == body_line]
    assert inside and "inside the macro" in inside[0].message
