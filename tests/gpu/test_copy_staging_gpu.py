"""Lone cp.async copies whose waits go before their first readers (thread_sync._place_waits),
against torch. CPU side (the generated CUDA): tests/test_copy_staging.py."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
pytestmark = pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9,
                                reason="needs an sm_90 GPU")


def test_deferred_waits_match_torch():
    import tilelang

    from test_copy_staging import three_copies_then_readers

    kernel = tilelang.compile(three_copies_then_readers())
    assert "tl::cp_async_wait<2>();" in kernel.get_kernel_source()
    torch.manual_seed(0)
    a, b, d = (torch.randn(256, 256, device="cuda").half() for _ in range(3))
    c = torch.empty(256, 256, device="cuda").half()
    kernel(a, b, d, c)
    want = (0.5 * a.float()) @ (b.float() + d.float())
    torch.testing.assert_close(c.float(), want, rtol=2e-2, atol=2e-1)


def test_attention_like_loop_matches_torch():
    """K and V lone copies in a one-stage loop (each waited for before its gemm)."""
    import tilelang

    from test_copy_staging import attention_like

    kernel = tilelang.compile(attention_like(128, 1))
    torch.manual_seed(0)
    q, k, v = (torch.randn(1024, 128, device="cuda").half() * 0.1 for _ in range(3))
    o = torch.empty(1024, 128, device="cuda").half()
    kernel(q, k, v, o)
    want = (q.float() @ k.float().T).half().float() @ v.float()
    torch.testing.assert_close(o.float(), want, rtol=3e-2, atol=3e-2)
