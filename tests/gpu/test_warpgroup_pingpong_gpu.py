"""Attention forward with its two consumer warpgroups taking turns at the tensor cores (opt-in
``tl.enable_warpgroup_pingpong``; tests/transform/test_warpgroup_pingpong.py checks the barrier
protocol on CPU) against torch: causal (paired persistent tiles) and not, persistent grids forced
down to 1 and 3 blocks and the whole GPU, 1 to 12 KV iterations a tile (a partial last one)."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability() < (9, 0),
                                reason="needs an sm_90 GPU")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
KEY = {"tl.enable_fast_math": True, "tl.enable_warpgroup_pingpong": True}


@pytest.mark.parametrize("sms", [1, 3, None])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("num_stages,S", [(2, 128), (2, 1000), (3, 1536)])
def test_pingpong_attention(monkeypatch, sms, causal, num_stages, S):
    import flash_attention as fa
    import tilelang
    from tilelang.jit import adapter_args

    if sms is not None:
        monkeypatch.setitem(adapter_args._SM_COUNTS, torch.cuda.current_device(), sms)
    B, H, D = 2, 3, 128
    func = fa.flashattn.get_prim_func(B, H, S, D, causal, 1, "bhsd", block_M=128, block_N=128,
                                      num_stages=num_stages, threads=256)
    kernel = tilelang.compile(func, out_idx=[3], pass_configs=KEY)
    assert "tl::named_barrier_arrive" in kernel.get_kernel_source()
    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.float16) for _ in range(3))
    torch.testing.assert_close(kernel(q, k, v), fa.ref_program(q, k, v, causal, 1, "bhsd"), rtol=1e-2, atol=1e-2)
