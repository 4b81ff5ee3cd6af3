"""A T.Parallel loop that runs on every replica (a loop over fewer elements than threads, e.g.
``for i in T.Parallel(blk_m)`` with blk_m = 1 after a reduction) and both writes replicated
registers and stores to memory: every thread computes the registers (later loops read them on
every thread), only the first replica stores. (Upstream's layernorm example: ``mean_row[i] = ...;
Mean[bx + i] = mean_row[i]``, then every thread reads mean_row.) GPU: tests/gpu/test_replicated_loop_effects_gpu.py."""

from __future__ import annotations

import re

import tilelang
import tilelang.language as T


def row_center(N=64, D=1024, blk_m=1, threads=256):
    @T.prim_func
    def main(X: T.Tensor((N, D), "float32"), Y: T.Tensor((N, D), "float32"), Mean: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, blk_m), threads=threads) as bx:
            X_local = T.alloc_fragment((blk_m, D), "float32")
            sum_row = T.alloc_fragment((blk_m,), "float32")
            mean_row = T.alloc_fragment((blk_m,), "float32")
            T.copy(X[bx * blk_m, 0], X_local)
            T.reduce_sum(X_local, sum_row, dim=1)
            for i in T.Parallel(blk_m):
                mean_row[i] = sum_row[i] / D
                Mean[bx * blk_m + i] = mean_row[i]
            for i, j in T.Parallel(blk_m, D):
                X_local[i, j] = X_local[i, j] - mean_row[i]
            T.copy(X_local, Y[bx * blk_m, 0])

    return main


def test_registers_of_a_replicated_loop_are_written_on_every_thread():
    src = tilelang.compile(row_center(), target="cuda -arch=sm_90a").get_kernel_source()
    body = src[src.index("main_kernel(float* __restrict__ Mean, const float* __restrict__ X, float* __restrict__ Y) {"):]
    # the register store is not under the thread guard; the global store is
    assert re.search(r"\n  mean_row\[0\] = \(sum_row / ", body)
    assert re.search(r"if \(\(\(int\)threadIdx\.x\) == 0\) \{\n    Mean\[\(\(int\)blockIdx\.x\)\] = mean_row\[0\];\n  \}",
                     body)


def test_a_loop_that_only_stores_keeps_one_guard_around_the_body():
    @T.prim_func
    def main(X: T.Tensor((64, 256), "float32"), S: T.Tensor((64,), "float32")):
        with T.Kernel(64, threads=128) as bx:
            x = T.alloc_fragment((256,), "float32")
            s = T.alloc_fragment((1,), "float32")
            T.copy(X[bx, 0], x)
            T.reduce_sum(x, s, dim=0)
            for i in T.Parallel(1):
                S[bx + i] = s[i] * 2.0

    src = tilelang.compile(main, target="cuda -arch=sm_90a").get_kernel_source()
    assert re.search(r"if \(\(\(int\)threadIdx\.x\) == 0\) \{\n    S\[", src)
