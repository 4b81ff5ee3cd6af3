"""Stage promotion on the GPU: a one-stage attention loop written as upstream's BSHD examples write
it (num_stages=1, 128 threads) in a grid of more than one wave compiles to the two-stage,
warp-specialised, persistent path (attention_schedule.promote_stages; causal: pairs of row
blocks, warp_specialize.paired_rows), and its output matches torch's, as the one-stage kernel
the key's false value keeps does."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))


@pytest.mark.parametrize("promote", [True, False])
@pytest.mark.parametrize("causal", [False, True])
def test_one_stage_bshd_attention_promoted_matches_torch(causal, promote):
    import flash_attention as fa
    import tilelang

    B, H, S, D = 2, 8, 2048, 128       # 16 x 8 x 2 = 256 blocks of 128 rows: two waves
    func = fa.flashattn.get_prim_func(B, H, S, D, causal, 1, "bshd", block_M=128, block_N=128, num_stages=1,
                                      threads=128)
    kernel = tilelang.compile(func, out_idx=[3], pass_configs={"tl.enable_fast_math": True,
                                                               "tl.enable_stage_promotion": promote})
    assert ("NUM_SMS" in kernel.artifact.grid[0]) == promote
    assert ("slots_done" in kernel.artifact.source) == (promote and causal)
    q, k, v = (torch.randn(B, S, H, D, device="cuda", dtype=torch.float16) for _ in range(3))
    torch.testing.assert_close(kernel(q, k, v), fa.ref_program(q, k, v, causal, 1, "bshd"), rtol=1e-2, atol=1e-2)
