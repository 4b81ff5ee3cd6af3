"""``tl.enable_thread_widening`` on the GPU (tests/test_widen_threads.py checks the CUDA on the CPU):
upstream's one-stage 128x128 attention written for 128 threads, run as written (the key false) and
widened to two warpgroups (the default), against torch."""

import math
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "transform"))

import tilelang  # noqa: E402
from test_lowering import _one_stage_attention  # noqa: E402


@pytest.mark.parametrize("configs", [{"tl.enable_thread_widening": False}, {}])
def test_one_stage_attention(configs):
    S, D = 2048, 128
    kernel = tilelang.compile(_one_stage_attention(128, D, S=S), pass_configs=configs)
    threads = 128 if configs else 256        # widened unless switched off
    assert f"__launch_bounds__({threads}" in kernel.get_kernel_source()
    torch.manual_seed(0)
    Q, K, V = (torch.randn(S, D, dtype=torch.float16, device="cuda") for _ in range(3))
    O = torch.empty(S, D, dtype=torch.float16, device="cuda")
    kernel(Q, K, V, O)
    # the kernel's softmax is base 2 with a 0.125 scale: exp2(x * 0.125) = exp(x * 0.125 * ln 2)
    P = torch.softmax(Q.float() @ K.float().T * (0.125 * math.log(2.0)), dim=-1)
    torch.testing.assert_close(O.float(), P @ V.float(), atol=2e-2, rtol=2e-2)
