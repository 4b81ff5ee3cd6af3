"""8-bit float wgmma (m64nNk32) against torch: e4m3 / e5m2 operands in every pairing, float
outputs, the example kernel of upstream's gemm_fp8 folder. CPU side: tests/test_fp8_wgmma.py."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # tests/: the CPU tests' kernels
pytestmark = pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9,
                                reason="needs an sm_90 GPU")

TORCH = {"float8_e4m3fn": "float8_e4m3fn", "float8_e5m2": "float8_e5m2", "float32": "float32",
         "float16": "float16"}


@pytest.mark.parametrize("a_dtype,b_dtype,out,accum,block_K", [
    ("float8_e4m3fn", "float8_e4m3fn", "float32", "float32", 64),
    ("float8_e5m2", "float8_e5m2", "float32", "float32", 128),
    ("float8_e4m3fn", "float8_e5m2", "float32", "float32", 32),
])
def test_fp8_wgmma_matches_torch(a_dtype, b_dtype, out, accum, block_K):
    import tilelang
    from test_fp8_wgmma import fp8_matmul

    M, N, K = 512, 384, 1024
    kernel = tilelang.compile(fp8_matmul(M, N, K, block_K=block_K, a_dtype=a_dtype, b_dtype=b_dtype,
                                         out_dtype=out, accum=accum))
    assert "wgmma_gemm" in kernel.get_kernel_source()
    a = (torch.randn(M, K, device="cuda") * 0.5).to(getattr(torch, TORCH[a_dtype]))
    b = (torch.randn(N, K, device="cuda") * 0.5).to(getattr(torch, TORCH[b_dtype]))
    c = torch.empty(M, N, device="cuda", dtype=getattr(torch, out))
    kernel(a, b, c)
    ref = a.float() @ b.float().T
    # fp8 wgmma accumulates with fewer than fp32's mantissa bits (Hopper's fp8 tensor cores: the
    # reason DeepGEMM promotes partial sums), so the error grows with K: ~1 % of the output scale at
    # K = 1024; a wrong layout or descriptor gives errors of the order of the outputs themselves
    err = (c.float() - ref).abs().max() / ref.abs().max()
    assert float(err) < 2e-2, float(err)
    cos = torch.nn.functional.cosine_similarity(c.float().flatten(), ref.flatten(), dim=0)
    assert float(cos) > 0.9999, float(cos)


def test_upstream_fp8_example_kernel_takes_wgmma_and_matches():
    import importlib.util
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # tests/: upstream_paths
    from upstream_paths import examples as upstream_examples
    conf = upstream_examples("gemm_fp8")
    if conf is None:
        pytest.skip("upstream's examples are not beside the repository")
    spec = importlib.util.spec_from_file_location("_fp8_example", conf / "example_tilelang_gemm_fp8.py")
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    for name in ("e4m3", "e5m2"):
        dtype = m.determine_fp8_type(name) if name == "e5m2" else m.determine_fp8_type()
        k = m.matmul.compile(M=1024, N=1024, K=1024, block_M=128, block_N=128, block_K=64, dtype=dtype)
        assert "wgmma_gemm" in k.get_kernel_source()
        td = getattr(torch, "float8_e4m3fn" if name == "e4m3" else "float8_e5m2")
        a = torch.randn(1024, 1024, dtype=torch.float16, device="cuda").to(td)
        b = torch.randn(1024, 1024, dtype=torch.float16, device="cuda").to(td)
        c = k(a, b)
        ref = (a.half() @ b.half().T).to(td)
        assert float(m.calc_diff(c, ref)) < 1e-3
