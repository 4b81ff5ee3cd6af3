"""Session 56's users' forms on the GPU: fp8 arithmetic and fp8 -> fp8 stores computed in float32
(codegen/narrow_floats), 16-bit math CUDA has no function for (sinh, fmod, atan2) in float32, and
T.atomic_load / T.atomic_store of 8- and 16-bit elements, each against torch."""

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")

N = 1024


def _binary(dtype, out_dtype, op):
    import tilelang.language as T

    @T.prim_func
    def kernel(A: T.Tensor((N,), dtype), C: T.Tensor((N,), dtype), B: T.Tensor((N,), out_dtype)):
        with T.Kernel(N // 128, threads=128) as bx:
            for i in T.Parallel(128):
                B[bx * 128 + i] = op(A[bx * 128 + i], C[bx * 128 + i])
    return kernel


@pytest.mark.parametrize("name", ["e4m3", "e5m2"])
def test_fp8_arithmetic_matches_torch(name):
    import tilelang
    import tilelang.language as T

    tdt = getattr(torch, f"float8_{name}fn" if name == "e4m3" else f"float8_{name}")
    a = (torch.randn(N, device="cuda") * 4).to(tdt)
    c = (torch.randn(N, device="cuda") * 4).to(tdt)
    kernel = tilelang.compile(_binary(f"float8_{name}", "float32",
                                      lambda x, y: T.Cast("float32", T.if_then_else(x < y, x * y, x - y))))
    b = torch.empty(N, device="cuda", dtype=torch.float32)
    kernel(a, c, b)
    af, cf = a.float(), c.float()
    ref = torch.where(af < cf, (af * cf).to(tdt).float(), (af - cf).to(tdt).float())
    torch.testing.assert_close(b, ref, atol=0, rtol=0)


def test_fp8_to_fp8_store_matches_torch():
    import tilelang

    a = (torch.randn(N, device="cuda") * 8).to(torch.float8_e5m2)
    kernel = tilelang.compile(_binary("float8_e5m2", "float8_e4m3", lambda x, y: x))
    b = torch.empty(N, device="cuda", dtype=torch.float8_e4m3fn)
    kernel(a, a, b)
    torch.testing.assert_close(b.float(), a.float().to(torch.float8_e4m3fn).float(), atol=0, rtol=0)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_16_bit_math_without_a_cuda_function_matches_torch(dtype):
    import tilelang
    import tilelang.language as T

    tdt = getattr(torch, dtype)
    a = torch.rand(N, device="cuda", dtype=tdt) + 0.5
    c = torch.rand(N, device="cuda", dtype=tdt) + 0.25
    kernel = tilelang.compile(_binary(dtype, dtype, lambda x, y: T.sinh(x) + T.fmod(x, y) + T.atan2(x, y)))
    b = torch.empty(N, device="cuda", dtype=tdt)
    kernel(a, c, b)
    af, cf = a.float(), c.float()
    ref = (torch.sinh(af).to(tdt).float() + torch.fmod(af, cf).to(tdt).float()).to(tdt).float()
    ref = (ref + torch.atan2(af, cf).to(tdt).float()).to(tdt)
    torch.testing.assert_close(b, ref, atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "int8"])
def test_8_and_16_bit_ordered_loads_and_stores_move_the_values(dtype):
    import tilelang
    import tilelang.language as T

    @T.prim_func
    def kernel(A: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype), C: T.Tensor((N,), dtype)):
        with T.Kernel(N // 128, threads=128) as bx:
            for i in T.Parallel(128):
                T.atomic_store(C[bx * 128 + i], T.atomic_load(A[bx * 128 + i]))
                B[bx * 128 + i] = T.atomic_load(C[bx * 128 + i])

    tdt = getattr(torch, dtype)
    a = torch.randint(-100, 100, (N,), device="cuda").to(tdt)
    b, c = torch.zeros_like(a), torch.zeros_like(a)
    tilelang.compile(kernel)(a, b, c)
    torch.testing.assert_close(b, a, atol=0, rtol=0)
    torch.testing.assert_close(c, a, atol=0, rtol=0)
