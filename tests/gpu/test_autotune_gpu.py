"""@tilelang.autotune on the GPU: real timing and checking, and the winner against torch."""

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")

import tilelang  # noqa: E402
import tilelang.language as T  # noqa: E402
from tilelang.autotuner import tuner  # noqa: E402


@pytest.fixture(autouse=True)
def isolated(isolated_autotune):
    yield


def gemm(M, N, K, block_M=128, block_N=128, block_K=32, num_stages=2, threads=128, short_k=False):
    """A float16 gemm; ``short_k`` drops the last K tile, so its result is wrong on purpose."""

    @T.prim_func
    def kernel(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), "float16")
            B_shared = T.alloc_shared((block_K, block_N), "float16")
            C_local = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K) - (1 if short_k else 0), num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return kernel


def ref_program(A, B):
    return (A.float() @ B.float()).half()


GOOD = [dict(block_M=bm, block_N=bn, num_stages=2) for bm in (64, 128) for bn in (64, 128)]
WRONG = dict(block_M=64, block_N=64, short_k=True)
BROKEN = dict(block_K=24)  # T.gemm needs a multiple of 16


def tuned_gemm():
    return tilelang.autotune(configs=GOOD + [WRONG, BROKEN], warmup=5, rep=10,
                             ref_prog=ref_program)(tilelang.jit(out_idx=[-1])(gemm))


def test_tunes_a_gemm_and_the_winner_matches_torch():
    kernel = tuned_gemm()(512, 512, 512)
    a = torch.randn(512, 512, device="cuda", dtype=torch.float16)
    b = torch.randn(512, 512, device="cuda", dtype=torch.float16)
    torch.testing.assert_close(kernel(a, b).float(), a.float() @ b.float(), rtol=1e-2, atol=1e-2)

    result = kernel.autotune_result
    assert kernel.config in GOOD and 0 < kernel.latency < 10 and result.ref_latency > 0
    rows = {tuple(sorted(r.config.items())): r for r in result.results}
    assert all(rows[tuple(sorted(c.items()))].latency > 0 for c in GOOD)
    assert rows[tuple(sorted(WRONG.items()))].error.startswith("check: output 'C':")
    assert rows[tuple(sorted(BROKEN.items()))].error.startswith("compile: error[TL0101]")
    assert kernel.latency == min(rows[tuple(sorted(c.items()))].latency for c in GOOD)


def test_a_second_wrapper_reuses_the_stored_result():
    first = tuned_gemm()(256, 256, 256)
    tuner._MEMO.clear()
    again = tuned_gemm()(256, 256, 256)
    assert again.autotune_result.from_cache and again.config == first.config
    a = torch.randn(256, 256, device="cuda", dtype=torch.float16)
    b = torch.randn(256, 256, device="cuda", dtype=torch.float16)
    torch.testing.assert_close(again(a, b), first(a, b))
