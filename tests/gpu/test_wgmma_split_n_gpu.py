"""wgmma with warpgroups splitting N against torch: an M = 64 tile on 256 threads (two
warpgroups of m64n(N/2)), A in shared memory or registers, fp16 / bf16, N- and K-major B; and
upstream's MLA decode example (block_H = 64 on 256 threads) against its ref_program. CPU side:
tests/test_wgmma_split_n.py."""

import importlib.util
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # tests/: the CPU tests' kernels
pytestmark = pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9,
                                reason="needs an sm_90 GPU")

from upstream_paths import examples as upstream_examples  # noqa: E402

MLA = (upstream_examples("deepseek_mla") or Path("/nonexistent")) / "example_mla_decode.py"


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("a_in_regs", [False, True], ids=["ss", "rs"])
@pytest.mark.parametrize("trans_b", [False, True], ids=["nn", "nt"])
@pytest.mark.parametrize("N", [128, 256])
def test_m64_split_n_gemm_matches_torch(dtype, a_in_regs, trans_b, N):
    import tilelang

    from test_wgmma_split_n import small_gemm

    M, K = 64, 64
    kernel = tilelang.compile(small_gemm(M=M, N=N, K=K, dtype=dtype, a_in_regs=a_in_regs, trans_b=trans_b),
                              pass_configs={"tl.enable_wgmma_split_n": True})   # (the default)
    assert "tl::Warpgroups<1, 2>" in kernel.get_kernel_source()
    tdt = getattr(torch, dtype)
    a = torch.randn(M, K, device="cuda").to(tdt)
    b = torch.randn(N, K, device="cuda").to(tdt)
    c = torch.empty(M, N, device="cuda", dtype=torch.float32)
    kernel(a, b if trans_b else b.T.contiguous(), c)
    torch.testing.assert_close(c, a.float() @ b.float().T, rtol=1e-3, atol=1e-3)


@pytest.mark.skipif(not MLA.exists(), reason="upstream's examples are not checked out")
@pytest.mark.parametrize("batch,kv_ctx", [(2, 1024), (1, 8192)])
def test_upstream_mla_decode_matches_its_reference(batch, kv_ctx):
    pytest.importorskip("einops")
    spec = importlib.util.spec_from_file_location("example_mla_decode_split_n_gpu", MLA)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    heads, dim, pe_dim = 128, 512, 64
    kernel = mod.flashattn(batch, heads, 1, kv_ctx, dim, pe_dim, 64, 64, 1, (dim + pe_dim) ** -0.5)   # (the default)
    assert "tl::Warpgroups<1, 2>" in kernel.get_kernel_source()
    torch.manual_seed(0)
    q = torch.randn(batch, heads, dim, device="cuda", dtype=torch.float16)
    q_pe = torch.randn(batch, heads, pe_dim, device="cuda", dtype=torch.float16)
    kv = torch.randn(batch, kv_ctx, 1, dim, device="cuda", dtype=torch.float16)
    k_pe = torch.randn(batch, kv_ctx, 1, pe_dim, device="cuda", dtype=torch.float16)
    out = kernel(q, q_pe, kv, k_pe)
    ref = mod.ref_program(q.float(), q_pe.float(), kv.float(), k_pe.float())
    torch.testing.assert_close(out.float(), ref.float(), rtol=1e-2, atol=1e-2)
