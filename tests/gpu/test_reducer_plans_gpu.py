"""Narrow reducer plans against torch (the kernels tests/test_reducer_plans.py checks on the CPU)."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tilelang  # noqa: E402
import tilelang.language as T  # noqa: E402
import test_reducer_plans as rp  # noqa: E402


@pytest.mark.parametrize("configs", [None, rp.BASELINE])
@pytest.mark.parametrize("seed", [None, 100.0])
def test_scalar_sum_counts_each_iteration_once(seed, configs):
    k = tilelang.compile(rp._scalar(seed=seed), out_idx=-1, pass_configs=configs)
    a = torch.arange(1, 9, dtype=torch.float32, device="cuda")
    torch.testing.assert_close(k(a), (a.sum() + (seed or 0.0)).reshape(1), atol=0, rtol=0)


@pytest.mark.parametrize("dtype,op", [(T.float16, "sum"), (T.float32, "sum"), (T.bfloat16, "max")])
def test_row_reductions(dtype, op):
    k = tilelang.compile(rp._rowsum(32, 64, 128, dtype, op=op), out_idx=-1)
    tdt = {T.float16: torch.float16, T.float32: torch.float32, T.bfloat16: torch.bfloat16}[dtype]
    a = torch.randn(32, 64, dtype=tdt, device="cuda")
    ref = a.float().sum(dim=1).to(tdt) if op == "sum" else a.max(dim=1).values
    torch.testing.assert_close(k(a), ref, atol=1e-2, rtol=1e-2)


def test_older_form_gemv():
    k = tilelang.compile(rp._legacy_gemv(), out_idx=-1,
                         pass_configs={"tl.disable_tma_lower": True, "tl.disable_warp_specialized": True})
    a = torch.randn(1024, 1024, dtype=torch.float16, device="cuda")
    x = torch.randn(1024, dtype=torch.float16, device="cuda")
    torch.testing.assert_close(k(a, x), (a.float() @ x.float()).half(), atol=1e-1, rtol=1e-2)


@pytest.mark.parametrize("batch,configs", [(1, None), (4, rp.BASELINE), (4, None)])
def test_older_form_rowsum_batched(batch, configs):
    k = tilelang.compile(rp._older_rowsum(batch=batch), out_idx=-1, pass_configs=configs)
    a = torch.randn(128, 64, dtype=torch.float32, device="cuda")
    torch.testing.assert_close(k(a), a.sum(dim=1), atol=1e-3, rtol=1e-3)
