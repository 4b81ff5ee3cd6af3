"""One-stage attention refilling K and V for the next iteration after their last use
(``tl.enable_one_stage_refill``, opt-in) and with the loads at the top of each iteration, against
torch's SDPA: bench_launch.py's attention and upstream's example_mha_fwd_bshd at 64x64 tiles,
causal and not, also with the first tiles' loads moved in front of Q's (``tl.enable_early_prologue``) (tests/transform/test_one_stage_refill.py checks the generated code on CPU)."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
from upstream_paths import examples as upstream_examples  # noqa: E402

CONFIGS = [{"tl.enable_one_stage_refill": True}, {},
           {"tl.enable_one_stage_refill": True, "tl.enable_early_prologue": True}]


@pytest.mark.parametrize("configs", CONFIGS)
def test_bench_launch_attention_matches_sdpa(configs):
    import torch.nn.functional as F

    import tilelang

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_launch import build_kernels

    func = build_kernels()[2].get_prim_func(2, 4, 512, 64)
    kernel = tilelang.compile(func, out_idx=[3], pass_configs=configs)
    src = kernel.get_kernel_source()
    assert ("if (kb < 7)" in src) == bool(configs)
    q, k, v = (torch.randn(2, 4, 512, 64, device="cuda", dtype=torch.float16) for _ in range(3))
    torch.testing.assert_close(kernel(q, k, v).float(), F.scaled_dot_product_attention(q, k, v).float(),
                               rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("configs", CONFIGS)
def test_upstream_one_stage_bshd_matches_torch(causal, configs):
    import tilelang

    base = upstream_examples()
    folder = base / "flash_attention" if base is not None else None
    if folder is None or not (folder / "example_mha_fwd_bshd.py").is_file():
        pytest.skip("upstream's examples/flash_attention not found")
    sys.path.insert(0, str(folder))
    import example_mha_fwd_bshd as m

    B, H, S, D = 2, 4, 1024, 64
    func = m.flashattn._target.get_prim_func(B, H, S, D, causal, block_M=64, block_N=64, num_stages=1, threads=128)
    kernel = tilelang.compile(func, out_idx=[3], pass_configs={"tl.enable_fast_math": True, **configs})
    q, k, v = (torch.randn(B, S, H, D, device="cuda", dtype=torch.float16) for _ in range(3))
    torch.testing.assert_close(kernel(q, k, v).float(), m.ref_program(q, k, v, causal).float(), rtol=1e-2, atol=1e-2)
