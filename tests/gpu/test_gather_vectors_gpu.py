"""Gathered rows in 16-byte vectors against torch: rows through an index tensor, out-of-range
indices (the bounds guard gives zero rows), with and without the guard. CPU side:
tests/codegen/test_gather_vectors.py."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "codegen"))
pytestmark = pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9,
                                reason="needs an sm_90 GPU")


@pytest.mark.parametrize("safe", [True, False], ids=["guarded", "unguarded"])
def test_gather_matches_torch(safe):
    import tilelang

    from test_gather_vectors import gather

    kernel = tilelang.compile(gather(), pass_configs={"tl.disable_safe_memory_access": not safe})
    assert "*(uint4*)(KV" in kernel.get_kernel_source()
    torch.manual_seed(0)
    kv = torch.randn(8192, 576, device="cuda").to(torch.bfloat16)
    idx = torch.randint(0, 8192, (64,), device="cuda", dtype=torch.int32)
    if safe:
        idx[5] = -1
        idx[40] = 9000
    q = torch.randn(64, 512, device="cuda").to(torch.bfloat16)
    o = torch.empty(64, 32, device="cuda")
    kernel(kv, idx, q, o)
    rows = kv[idx[32:].clamp(0, 8191).long(), :512].float()
    if safe:
        rows[40 - 32] = 0
    torch.testing.assert_close(o, q.float() @ rows.T, rtol=2e-2, atol=2e-1)


def test_row_guarded_store_matches_torch():
    import tilelang

    from test_gather_vectors import row_guarded_store

    kernel = tilelang.compile(row_guarded_store())
    assert "*(uint4*)(O + " in kernel.get_kernel_source()
    x = torch.randn(4096, 128, device="cuda").half()
    for seqlen in (4096, 1369, 0):
        o = torch.full_like(x, -7.0)
        kernel(x, torch.tensor([seqlen], device="cuda", dtype=torch.int32), o)
        want = torch.full_like(x, -7.0)
        want[:seqlen] = x[:seqlen]
        torch.testing.assert_close(o, want, rtol=0, atol=0)
