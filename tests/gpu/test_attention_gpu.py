"""The attention family and the issue-5 examples against torch on the GPU."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))


@pytest.mark.parametrize("layout", ["bshd", "bhsd"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("B,H,S,D,groups", [(2, 4, 256, 64, 1), (1, 8, 1000, 128, 4), (1, 2, 64, 128, 2)])
def test_flash_attention(B, H, S, D, groups, causal, layout):
    import flash_attention as fa

    fa.run(B, H, S, D, causal, groups, layout)


@pytest.mark.parametrize("sms", [1, 3, 7])
@pytest.mark.parametrize("num_stages,S", [(2, 256), (3, 1000), (2, 64)])
def test_persistent_flash_attention_blocks_loop_over_many_tiles(monkeypatch, sms, num_stages, S):
    """Non-causal attention runs persistent: grids of 1, 3 and 7 blocks (the launcher's SM count
    forced down) take many (batch, head, row block) tiles each, the K and V barrier rings
    running on across tiles with 1, 4 and 8 KV iterations per tile (a partial last one)."""
    import flash_attention as fa
    import tilelang
    from tilelang.jit import adapter_args

    monkeypatch.setitem(adapter_args._SM_COUNTS, torch.cuda.current_device(), sms)
    B, H, D = 2, 3, 128
    func = fa.flashattn.get_prim_func(B, H, S, D, False, 1, "bhsd", block_M=128, block_N=128,
                                      num_stages=num_stages, threads=256)
    kernel = tilelang.compile(func, out_idx=[3], pass_configs={"tl.enable_fast_math": True})
    assert "NUM_SMS" in kernel.artifact.grid[0]
    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.float16) for _ in range(3))
    torch.testing.assert_close(kernel(q, k, v), fa.ref_program(q, k, v, False, 1, "bhsd"), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("sms", [1, 3, 7, 132])
@pytest.mark.parametrize("num_stages,S", [(2, 256), (3, 1000), (2, 1536)])
def test_causal_flash_attention_runs_persistent_in_pairs_of_row_blocks(monkeypatch, sms, num_stages, S):
    """Causal attention's KV loop runs bx + 1 times: a persistent block takes row blocks x and
    gx - 1 - x together, the ring slots counted per role across tiles of unequal length (2, 8
    and 12 row blocks; 1, 3, 7 and 132 blocks)."""
    import flash_attention as fa
    import tilelang
    from tilelang.jit import adapter_args

    monkeypatch.setitem(adapter_args._SM_COUNTS, torch.cuda.current_device(), sms)
    B, H, D = 2, 3, 128
    func = fa.flashattn.get_prim_func(B, H, S, D, True, 1, "bhsd", block_M=128, block_N=128,
                                      num_stages=num_stages, threads=256)
    kernel = tilelang.compile(func, out_idx=[3], pass_configs={"tl.enable_fast_math": True})
    assert "NUM_SMS" in kernel.artifact.grid[0] and "slots_done" in kernel.artifact.source
    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.float16) for _ in range(3))
    torch.testing.assert_close(kernel(q, k, v), fa.ref_program(q, k, v, True, 1, "bhsd"), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("B,H,HK,S,D", [(2, 32, 2, 1000, 128), (1, 8, 1, 4096, 64), (1, 16, 16, 300, 64)])
def test_flash_decoding(B, H, HK, S, D):
    import flash_decoding as fd

    q = torch.randn(B, H, D, device="cuda", dtype=torch.float16)
    k = torch.randn(B, S, HK, D, device="cuda", dtype=torch.float16)
    v = torch.randn(B, S, HK, D, device="cuda", dtype=torch.float16)
    torch.testing.assert_close(fd.flash_decode(q, k, v), fd.ref_program(q, k, v), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("B,H,S,D", [(1, 2, 256, 64), (2, 4, 1000, 64), (1, 1, 64, 64)])
def test_linear_attention(B, H, S, D):
    import linear_attention as la

    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.float16) * 0.1 for _ in range(3))
    torch.testing.assert_close(la.linear_attention(B, H, S, D)(q, k, v), la.ref_program(q, k, v),
                               rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("M,N", [(1001, 1024), (4096, 4096), (3, 512)])
def test_layernorm(M, N):
    import layernorm as ln

    x = torch.randn(M, N, device="cuda", dtype=torch.float16)
    w = torch.randn(N, device="cuda", dtype=torch.float16)
    b = torch.randn(N, device="cuda", dtype=torch.float16)
    torch.testing.assert_close(ln.layernorm(M, N)(x, w, b), ln.ref_program(x, w, b), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("M,N,K,s", [(512, 512, 4096, 4), (256, 384, 2048, 8), (200, 130, 1000, 3)])
def test_gemm_splitk(M, N, K, s):
    import gemm_splitk as gs

    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    c = torch.zeros(M, N, device="cuda")
    gs.matmul_splitk(M, N, K, s)(a, b, c)
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-2, atol=5e-2)


def test_gemm_dynamic_m():
    import gemm_dynamic as gd

    kernel = gd.matmul_dynamic_m(512, 256)
    b = torch.randn(256, 512, device="cuda", dtype=torch.float16)
    for M in (1, 17, 128, 1000):
        a = torch.randn(M, 256, device="cuda", dtype=torch.float16)
        torch.testing.assert_close(kernel(a, b), (a.float() @ b.float()).half(), rtol=1e-2, atol=1e-1)
