"""transform/deepen_stages.py on the GPU: a one-wave GEMV-style loop run with the stages shared
memory holds (six of 32 KiB on sm_90a; as many as its trips when fewer) against torch, and the
written two stages beside it."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "transform"))


@pytest.mark.parametrize("n", [4096, 512, 640])
@pytest.mark.parametrize("deepen", [None, False])
def test_deepened_gemv_matches_torch(n, deepen):
    import tilelang
    from test_deepen_stages import KEY, _gemv

    configs = {} if deepen is None else {KEY: deepen}
    kernel = tilelang.compile(_gemv(n=n), pass_configs=configs)
    src = kernel.get_kernel_source()
    assert ("cp_async_wait<1>" in src) == (deepen is False)
    A = torch.randn(128 * 32, n, device="cuda", dtype=torch.float16)
    x = torch.randn(n, device="cuda", dtype=torch.float16)
    o = torch.empty(128 * 32, device="cuda", dtype=torch.float32)
    for _ in range(2):      # the ring runs on from the first launch's phase into the second's
        o.zero_()
        kernel(A, x, o)
        torch.cuda.synchronize()
        # the products rounded to fp16 before the fp32 sum, as the kernel multiplies
        ref = (A * x).float().sum(dim=1)
        torch.testing.assert_close(o, ref, atol=0.25, rtol=1e-2)
