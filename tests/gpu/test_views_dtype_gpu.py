"""Shared views of another element type read the same bytes (bit-exact against torch's
``Tensor.view(dtype)``), through a linear and a swizzled buffer. CPU side: tests/test_views_dtype.py."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # tests/: the CPU tests' kernels
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")


@pytest.mark.parametrize("swizzled", [False, True], ids=["linear", "swizzled"])
@pytest.mark.parametrize("case", ["narrowing", "widening"])
def test_shared_view_of_another_dtype_reads_the_same_bits(case, swizzled):
    import tilelang
    import tilelang.language as T

    from test_views_dtype import _reinterpret_kernel

    if case == "narrowing":
        shape, dtype, new_shape, new_dtype = (64, 64), T.float32, (64, 128), T.bfloat16
    else:
        shape, dtype, new_shape, new_dtype = (64, 128), T.bfloat16, (64, 64), T.float32
    kernel = tilelang.compile(_reinterpret_kernel(shape, dtype, new_shape, new_dtype, swizzled), out_idx=-1)
    torch_dtype = T.dtype(dtype).as_torch()
    lanes = torch.randn(shape[0], shape[1] * torch_dtype.itemsize // 2, device="cuda", dtype=torch.bfloat16)
    a = lanes.view(dtype=torch_dtype)
    out = kernel(a)
    ref = a.view(dtype=T.dtype(new_dtype).as_torch()).view(new_shape)
    assert torch.equal(out.view(torch.int16), ref.view(torch.int16))


def test_widening_store_through_a_view_writes_both_halves():
    import tilelang
    import tilelang.language as T

    @T.prim_func
    def widen(A: T.Tensor((64,), T.float32), B: T.Tensor((128,), T.float16)):
        with T.Kernel(1, threads=64):
            S = T.alloc_shared((128,), T.float16)
            W = T.view(S, (64,), dtype=T.float32)
            for i in T.Parallel(64):
                W[i] = A[i]
            T.copy(S, B)

    kernel = tilelang.compile(widen, out_idx=-1)
    a = torch.randn(64, device="cuda")
    assert torch.equal(kernel(a).view(torch.int16), a.view(torch.int16))


@pytest.mark.parametrize("src_dtype, dtype", [("uint8", "float8_e4m3fn"), ("float16", "float16")],
                         ids=["fp8_view_of_bytes", "reshape_fp16"])
def test_gemm_on_a_view_of_a_flat_shared_buffer(src_dtype, dtype):
    import tilelang

    from test_views_dtype import _gemm_on_view_kernel

    if dtype.startswith("float8") and torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("fp8 tensor cores need sm_89 or newer")
    B, D, H = 64, (128 if dtype.startswith("float8") else 64), 64
    kernel = tilelang.compile(_gemm_on_view_kernel(B, D, H, src_dtype, dtype), out_idx=-1)
    torch_dtype = getattr(torch, dtype)
    q = torch.randn(H, D, device="cuda").to(torch_dtype)
    k = torch.randn(B, D, device="cuda").to(torch_dtype)
    kv = k.reshape(-1).view(getattr(torch, src_dtype))
    out = kernel(q, kv)
    ref = k.float() @ q.float().T
    torch.testing.assert_close(out, ref, rtol=1e-2, atol=1e-2)


def _e2m1(codes):
    """float4_e2m1fn codes (0..15) as float32: sign bit 3, then 2 exponent bits and 1 mantissa bit."""
    mag = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], device=codes.device)[(codes & 7).long()]
    return torch.where(codes >= 8, -mag, mag)


def test_fp4_shared_views_as_bytes_and_of_bytes():
    import tilelang

    from test_views_dtype import _fp4_views_kernel

    rows, cols = 16, 64
    kernel = tilelang.compile(_fp4_views_kernel(rows, cols), out_idx=[1, 2, 3])
    p = torch.randint(0, 256, (rows, cols // 2), device="cuda", dtype=torch.uint8)
    y, z, z2 = kernel(p)
    codes = torch.stack([p & 15, p >> 4], dim=-1).reshape(rows, cols)   # element 2k: byte k's low nibble
    assert torch.equal(y, p)
    assert torch.equal(z, _e2m1(codes))
    assert torch.equal(z2, _e2m1(codes))
