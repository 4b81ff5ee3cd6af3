"""Kernel factories shared by the autotune tests (CPU, fresh-process and GPU)."""

import tilelang
import tilelang.language as T


def gemm_factory(M, N, K, block_M=128, block_N=128, block_K=32, num_stages=3, threads=128, dtype="float16",
                 accum_dtype="float"):
    @T.prim_func
    def kernel(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return kernel


matmul = tilelang.jit(out_idx=[-1])(gemm_factory)

# Four configs that compile and one that cannot (T.gemm needs block_K to be a multiple of 16).
CONFIGS = [dict(block_M=bm, block_N=64, block_K=bk, num_stages=2, threads=128)
           for bm in (64, 128) for bk in (32, 64)] + [dict(block_M=64, block_N=64, block_K=24, num_stages=2)]


class FakeRunner:
    """Stands in for the GPU: a made-up latency per config, optional check failures, call log."""

    def __init__(self, latency=None, bad=(), crash=()):
        self.latency = latency or (lambda c: 1.0 / c.get("block_M", 1) + c.get("block_K", 0) / 1e4)
        self.bad, self.crash = list(bad), list(crash)
        self.checked, self.benched = [], []

    def require(self):
        pass

    def check(self, kernel, config):
        self.checked.append(dict(config))
        if config in self.bad:
            raise AssertionError("output 'C': 40 of 4096 elements (0.98%) differ from ref_prog")

    def bench(self, kernel, config, warmup, rep):
        self.benched.append(dict(config))
        if config in self.crash:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return self.latency(config)

    def ref_latency(self, warmup, rep):
        return 0.5


class NoRunner:
    """A runner that must never be used (a stored result is expected)."""

    def require(self, *args):
        raise AssertionError("tuning ran although a stored result was expected")

    check = bench = ref_latency = require
