"""Early stage release in a warp-specialised general loop body (``tl.enable_ws_early_release``, on
by default; ``warp_specialize._early_release_at``): each consumer warp gives its ring slot back
right after the last statement that reads a staged tile (a synchronous wgmma here) instead of at the
end of the body, so the producer refills the slot while the rest of the body runs (DeepGEMM's
block-scaled accumulation, upstream's schedule). With the key false the release stays at the end of
the body."""

import re

import tilelang
import tilelang.language as T

SM90 = "cuda -arch=sm_90a"
KEY = "tl.enable_ws_early_release"


def scaled_gemm(M=256, N=256, K=1024, bm=64, bn=128, bk=128, stages=4, tail_reads_tile=False):
    """C = sum over k-blocks of (A_k B_k^T) * scale[k]: a gemm into a fresh accumulator, then
    registers-only work on it (``tail_reads_tile``: the last statement reads the staged A tile)."""
    @T.prim_func
    def kernel(A: T.Tensor((M, K), "float16"), B: T.Tensor((N, K), "float16"), S: T.Tensor((K // bk,), "float32"),
               C: T.Tensor((M, N), "float32")):
        with T.Kernel(N // bn, M // bm, threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bn, bk), "float16")
            acc = T.alloc_fragment((bm, bn), "float32")
            total = T.alloc_fragment((bm, bn), "float32")
            T.clear(total)
            for k in T.Pipelined(K // bk, num_stages=stages):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[bx * bn, k * bk], B_s)
                T.gemm(A_s, B_s, acc, transpose_B=True, clear_accum=True)
                for i, j in T.Parallel(bm, bn):
                    total[i, j] += acc[i, j] * S[k]
                if tail_reads_tile:
                    for i, j in T.Parallel(bm, bn):
                        total[i, j] += A_s[i, j % bk]
            T.copy(total, C[by * bm, bx * bn])
    return kernel


def source(func, **configs):
    return tilelang.compile(func, target=SM90, pass_configs=configs).get_kernel_source()


def consumer_loop(src):
    body = src[src.index("for (int k = 0;"):]
    depth = 0
    for i in range(body.index("{"), len(body)):
        depth += {"{": 1, "}": -1}.get(body[i], 0)
        if depth == 0:
            return body[:i + 1]
    raise AssertionError("unbalanced loop")


def release_and_gemm(src):
    loop = consumer_loop(src)
    arrives = [m.start() for m in re.finditer(r"tl::mbarrier_arrive\(", loop)]
    assert len(arrives) == 1, loop
    return loop, arrives[0], loop.index("wgmma_gemm_ss")


def test_switched_off_the_stage_goes_back_at_the_end_of_the_body():
    src = source(scaled_gemm(), **{KEY: False})
    loop, arrive, gemm = release_and_gemm(src)
    assert "tma_load" in src                       # warp-specialised: a TMA producer feeds the ring
    assert arrive > loop.index("S[")               # after the scaling that follows the gemm


def test_early_release_gives_the_stage_back_after_the_last_read_of_a_staged_tile():
    src = source(scaled_gemm())                    # on by default
    assert src == source(scaled_gemm(), **{KEY: True})
    loop, arrive, gemm = release_and_gemm(src)
    assert gemm < arrive < loop.index("S[")        # right after the wgmma, before the scaling
    assert "tl_ws_stage_release_here" not in src
    # the same code otherwise: only the release moved
    base = source(scaled_gemm(), **{KEY: False})
    strip = lambda s: re.sub(r"cse_v\d+", "v", re.sub(r"\s*tl::mbarrier_arrive\([^;]*;", "", s))
    assert strip(src) == strip(base)


def test_no_early_release_when_the_last_statement_reads_a_staged_tile():
    src = source(scaled_gemm(tail_reads_tile=True), **{KEY: True})
    loop, arrive, gemm = release_and_gemm(src)
    assert arrive > loop.rindex("*(float2*)(total + ")       # after the read of A_s at the end
