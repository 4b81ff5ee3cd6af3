"""transform/fuse_clear.py and the unswitched length mask on the GPU: a wgmma whose first k-step
clears at run time (scale-d = 0 off the causal diagonal) and a mask stored uniformly on the tiles
it does not bite, against torch."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))


def _masked_scores(M=128, N=64, D=64, threads=256):
    """Out[k] = Q K[k*N:(k+1)*N]^T with the columns past n at -inf, one tile per k."""
    import tilelang.language as T

    n = T.dynamic("n")

    @T.prim_func
    def main(Q: T.Tensor((M, D), T.float16), K: T.Tensor((n, D), T.float16),
             Out: T.Tensor((T.ceildiv(n, N), M, N), T.float32)):
        with T.Kernel(1, threads=threads) as bx:
            Q_s = T.alloc_shared((M, D), T.float16)
            K_s = T.alloc_shared((N, D), T.float16)
            acc = T.alloc_fragment((M, N), T.float32)
            T.copy(Q, Q_s)
            for k in T.Pipelined(T.ceildiv(n, N), num_stages=2):
                T.copy(K[k * N:(k + 1) * N, :], K_s)
                for i, j in T.Parallel(M, N):
                    acc[i, j] = T.if_then_else(k * N + j >= n, -T.infinity(T.float32), 0)
                T.gemm(Q_s, K_s, acc, transpose_B=True)
                T.copy(acc, Out[k, :, :])

    return main


@pytest.mark.parametrize("n", [1000, 1024, 37])
def test_a_length_mask_unswitched_on_full_tiles_matches_torch(n):
    import tilelang

    kernel = tilelang.compile(_masked_scores(), out_idx=[2])
    q = torch.randn(128, 64, device="cuda", dtype=torch.float16)
    k = torch.randn(n, 64, device="cuda", dtype=torch.float16)
    out = kernel(q, k)
    tiles = (n + 63) // 64
    ref = torch.full((tiles * 64, 128), float("-inf"), device="cuda")
    ref[:n] = (k.float() @ q.float().T)
    ref = ref.view(tiles, 64, 128).transpose(1, 2)
    torch.testing.assert_close(out, ref, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("S", [1024, 1000])
def test_causal_attention_with_a_run_time_clear_matches_torch(fused, S):
    """Off the diagonal the first HGMMA of S = Q K^T clears (scale-d = 0 from ``0 < bx - k``);
    on it the mask is built and accumulated onto; the same kernel with the fills kept."""
    import flash_attention as fa
    import tilelang

    B, H, D = 2, 4, 128
    func = fa.flashattn.get_prim_func(B, H, S, D, True, 1, "bhsd", block_M=128, block_N=128, num_stages=2,
                                      threads=256)
    configs = {"tl.enable_fast_math": True}
    if not fused:
        configs["tl.disable_clear_fusion"] = True
    kernel = tilelang.compile(func, out_idx=[3], pass_configs=configs)
    assert ("? 0 : 1)" in kernel.artifact.source) == fused
    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.float16) for _ in range(3))
    torch.testing.assert_close(kernel(q, k, v), fa.ref_program(q, k, v, True, 1, "bhsd"), rtol=1e-2, atol=1e-2)
