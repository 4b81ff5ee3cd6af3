"""Index arithmetic mixing int32 and int64, and T.fill of a region sized at run time:

* the bounds guard of a global access in T.Parallel compares in the wider type (an int64 index
  into an int32 extent, an int32 index into an int64 symbolic extent);
* ``T.fill(x[a:b], v)`` with ``a``, ``b`` variables strides the threads over ``b - a`` elements.
"""

from __future__ import annotations

import tilelang
import tilelang.language as T


def _body(source):
    return source[source.index('extern "C" __global__'):]


def test_int64_index_into_int32_extent():
    @T.prim_func
    def main(pos: T.Tensor([10], "int64"), value: T.Tensor([10, 2], "float32"), cache: T.Tensor([10, 2], "float32")):
        with T.Kernel(10, threads=128) as bx:
            slot = pos[bx]
            for i in T.Parallel(2):
                cache[slot, i] = value[bx, i]

    body = _body(tilelang.lower(main, "sm_90a").source)
    assert "slot < (int64_t)10" in body


def test_int32_index_into_int64_symbolic_extent():
    n = T.symbolic("n", "int64")

    @T.prim_func
    def main(x: T.Tensor[n, "bfloat16"]):
        with T.Kernel(T.ceildiv(n, 512), threads=128) as bx:
            for i in T.Parallel(512):
                x[bx * 512 + i] = 1.0

    body = _body(tilelang.lower(main, "sm_90a").source)
    assert "< n)" in body and "int64_t" in body


def test_fill_of_a_runtime_region():
    n = T.symbolic("n")

    @T.prim_func
    def main(x: T.Tensor[(n,), "int64"]):
        with T.Kernel(n, threads=128):
            a, b = T.alloc_var(T.int), T.alloc_var(T.int)
            T.fill(x[a:b], 0)

    body = _body(tilelang.lower(main, "sm_90a").source)
    assert "for (int it = 0; it <" in body and ">> 7)" in body   # ceildiv(b - a, 128) rounds
    assert "< n)" in body                                          # the tensor's bound still guarded
