"""The early-release pipeline schedule against torch (the kernels tests/test_pipeline_early_release.py
checks on the CPU): trip counts below, at and past the stage count, not multiples of it, with 2
and 3 stages (by default, with the x load issued before the wait, and with the schedule off), a
body whose rest stages through a shared buffer of its own, and x copies that stay in place."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tilelang  # noqa: E402
import test_pipeline_early_release as er  # noqa: E402


@pytest.mark.parametrize("config", ["default", "off"])
@pytest.mark.parametrize("stages", [2, 3])
@pytest.mark.parametrize("N", [128, 256, 384, 640, 4096])
def test_gemv_matches_torch(stages, N, config):
    M = 512
    k = tilelang.compile(er._gemv(M=M, N=N, stages=stages), pass_configs=None if config == "default" else er.PLAIN)
    a = torch.randn(M, N, device="cuda", dtype=torch.float16)
    x = torch.randn(N, device="cuda", dtype=torch.float16)
    o = torch.empty(M, device="cuda", dtype=torch.float16)
    k(a, x, o)
    ref = (a.float() * x.float()).sum(1)   # (the kernel rounds each product to fp16 first)
    torch.testing.assert_close(o.float(), ref, atol=0.25, rtol=2e-2)


def test_rest_with_a_shared_buffer_of_its_own():
    kern = tilelang.compile(er.own_buffer_rest(stages=3), pass_configs=er.EARLY_RELEASE)
    a = torch.randn(256, 1024, device="cuda", dtype=torch.float16)
    b = torch.empty_like(a)
    kern(a, b)
    ref = (a * 2).view(2, 128, 1024).roll(1, dims=1).view(256, 1024)
    torch.testing.assert_close(b, ref, atol=0, rtol=0)


@pytest.mark.parametrize("kind", ["after_compute", "dst_touched"])
def test_gemv_variants_match_torch(kind):
    k = tilelang.compile(er._gemv_variant(kind))
    a = torch.randn(1024, 1024, device="cuda", dtype=torch.float16)
    x = torch.randn(1024, device="cuda", dtype=torch.float16)
    o = torch.empty(1024, device="cuda", dtype=torch.float16)
    k(a, x, o)
    af = a.float() * (2 if kind == "after_compute" else 1)
    ref = (af * x.float()).sum(1)     # x_frag ends as x's slice in both variants
    torch.testing.assert_close(o.float(), ref, atol=0.5, rtol=2e-2)
