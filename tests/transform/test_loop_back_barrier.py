"""Where the barrier of a loop's back edge goes (``thread_sync.lower_loop_body``) with
``tl.enable_loop_head_barrier`` (opt-in): just before the first statement of the body that races
with the previous iteration's last ones, as upstream's ThreadSync places it, not at the end of the
body. CPU only: the generated CUDA is inspected."""

import tilelang
import tilelang.language as T

TARGET = "cuda -arch=sm_90a"
CONFIGS = {"tl.disable_tma_lower": True, "tl.enable_loop_head_barrier": True}


def two_tiles(n=512, threads=128):
    """S1 is read only before the body's last barrier and S2 after it: the next iteration's copy
    into S1 races with nothing left of this one, the copy into S2 does."""

    @T.prim_func
    def main(A: T.Tensor((4, n), "float32"), C: T.Tensor((4, n), "float32"), B: T.Tensor((4, n), "float32")):
        with T.Kernel(4, threads=threads) as bx:
            S1 = T.alloc_shared((1, n), "float32")
            S2 = T.alloc_shared((1, n), "float32")
            S3 = T.alloc_shared((1, n), "float32")
            F = T.alloc_fragment((1, n), "float32")
            G = T.alloc_fragment((1, n), "float32")
            for k in range(2):
                T.copy(A[bx, 0], S1)
                T.copy(C[bx, 0], S2)
                for i, j in T.Parallel(1, n):
                    F[i, j] = S1[i, (j + 4) % n] + k
                T.copy(F, S3)
                for i, j in T.Parallel(1, n):
                    G[i, j] = S3[i, (j + 4) % n] + S2[i, (j + 8) % n]
                T.copy(G, B[bx, 0])

    return main


def braced(src, head):
    """(start, end) of the first statement of ``src`` opening with ``head``: from ``head`` to just
    past its block's closing brace."""
    start = src.index(head)
    depth, i = 1, src.index("{", start) + 1
    while depth:
        depth += {"{": 1, "}": -1}.get(src[i], 0)
        i += 1
    return start, i


def _loop_body(src):
    start, end = braced(src, "for (int k = 0; k < 2; ++k) {")
    return src[start:end - 1]


def test_the_loop_back_barrier_goes_before_the_first_statement_racing_with_the_last_ones():
    src = tilelang.compile(two_tiles(), target=TARGET, pass_configs=CONFIGS).get_kernel_source()
    body = _loop_body(src)
    into_s1, into_s2 = body.index("(&(A["), body.index("(&(C[")
    # the copy into S1 before the loop-back barrier, the one into S2 after it; then the two
    # barriers of the body (S1 read by other threads, S3 read by other threads), none at the end
    assert "__syncthreads" not in body[:into_s1]
    assert body[into_s1:into_s2].count("__syncthreads();") == 1
    assert body.count("__syncthreads();") == 3
    assert not body.rstrip().endswith("__syncthreads();")


def test_without_the_key_the_loop_back_barrier_ends_the_body():
    configs = {"tl.disable_tma_lower": True}
    body = _loop_body(tilelang.compile(two_tiles(), target=TARGET, pass_configs=configs).get_kernel_source())
    assert body.rstrip().endswith("__syncthreads();") and body.count("__syncthreads();") == 3
