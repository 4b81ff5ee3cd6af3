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


def _fp8_rows(kind):
    import tilelang.language as T

    M, K = 64, 128
    dtype = "float8_e4m3fn"

    @T.prim_func
    def kernel(A: T.Tensor((M, K), dtype), B: T.Tensor((M,), dtype), S: T.Tensor((M, K), dtype)):
        with T.Kernel(1, threads=128):
            a = T.alloc_fragment((M, K), dtype)
            b = T.alloc_fragment((M,), dtype)
            s = T.alloc_shared((M, K), dtype)
            T.copy(A, a)
            T.copy(A, s)
            getattr(T, f"reduce_{kind}")(a, b, dim=1)
            T.cumsum(s, dim=1)
            T.copy(b, B)
            T.copy(s, S)
    return kernel


@pytest.mark.parametrize("kind", ["sum", "max", "absmax", "abssum"])
def test_fp8_reductions_accumulate_in_float32(kind):
    """Session 57: fp8 fragment reductions and a shared cumsum accumulate in float32 and round once."""
    import tilelang

    f8 = torch.float8_e4m3fn
    a = (torch.randn(64, 128, device="cuda") * 0.5).to(f8)
    kernel = tilelang.compile(_fp8_rows(kind))
    b = torch.empty(64, device="cuda", dtype=f8)
    s = torch.empty(64, 128, device="cuda", dtype=f8)
    kernel(a, b, s)
    af = a.float()
    ref = {"sum": af.sum(1), "max": af.amax(1), "absmax": af.abs().amax(1), "abssum": af.abs().sum(1)}[kind]
    # float32 sums in another order round to the same fp8 value but at a tie: one fp8 ulp
    torch.testing.assert_close(b.float(), ref.to(f8).float(), atol=0, rtol=0.125)
    torch.testing.assert_close(s.float(), af.cumsum(1).to(f8).float(), atol=0, rtol=0.125)


def test_popcount_and_fp8_exp2_match_torch():
    """Session 57: T.popcount as __popc / __popcll (int8 zero-extended) and fp8 T.exp2 in float32."""
    import tilelang
    import tilelang.language as T

    @T.prim_func
    def kernel(A: T.Tensor((N,), "int32"), I: T.Tensor((N,), "int8"), L: T.Tensor((N,), "int64"),
               F: T.Tensor((N,), "float8_e4m3fn")):
        with T.Kernel(N // 128, threads=128) as bx:
            for i in T.Parallel(128):
                A[bx * 128 + i] = T.popcount(A[bx * 128 + i])
                I[bx * 128 + i] = T.popcount(I[bx * 128 + i])
                L[bx * 128 + i] = T.popcount(L[bx * 128 + i])
                F[bx * 128 + i] = T.exp2(F[bx * 128 + i])

    a = torch.randint(-2**31, 2**31 - 1, (N,), device="cuda", dtype=torch.int32)
    i8 = torch.randint(-128, 127, (N,), device="cuda", dtype=torch.int8)
    l64 = torch.randint(-2**62, 2**62, (N,), device="cuda", dtype=torch.int64)
    f = (torch.rand(N, device="cuda") * 4 - 2).to(torch.float8_e4m3fn)

    def bits(t, width):
        return torch.tensor([bin(int(v) & ((1 << width) - 1)).count("1") for v in t.cpu()], dtype=t.dtype)

    ref = [bits(a, 32), bits(i8, 8), bits(l64, 64), torch.exp2(f.float()).to(torch.float8_e4m3fn).float()]
    tilelang.compile(kernel)(a, i8, l64, f)
    for got, want in zip([a, i8, l64, f.float()], ref):
        torch.testing.assert_close(got.cpu(), want.cpu(), atol=0, rtol=0)


def test_fp8_gemm_into_a_half_accumulator_matches_torch():
    """Session 57: e4m3 x e5m2 operands accumulated in float16 by wgmma (TL0102 before); written and
    compiled on the CPU, not yet run on a GPU when added."""
    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("wgmma's f16 accumulation of fp8 needs sm_90")
    import sys
    from pathlib import Path

    import tilelang

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "frontend"))
    from test_user_kernel_forms_s56 import _fp8_gemm_half_acc

    a = (torch.randn(256, 256, device="cuda") * 0.25).to(torch.float8_e4m3fn)
    b = (torch.randn(256, 256, device="cuda") * 0.25).to(torch.float8_e5m2)
    c = torch.empty(256, 256, device="cuda", dtype=torch.float16)
    tilelang.compile(_fp8_gemm_half_acc())(a, b, c)
    ref = a.float() @ b.float().T
    torch.testing.assert_close(c.float(), ref, rtol=2e-2, atol=5e-2)


def test_bfloat16_isnan_isinf_and_pow_match_torch():
    """Session 57: bfloat16 T.isnan / T.isinf / T.pow in float32 (TVM's builder refuses them)."""
    import tilelang
    import tilelang.language as T

    minus_one = T.Cast("bfloat16", -1)
    kernel = tilelang.compile(_binary("bfloat16", "bfloat16", lambda x, y: T.if_then_else(
        T.isnan(x), minus_one, T.if_then_else(T.isinf(x), minus_one, T.pow(x, y)))))
    a = torch.rand(N, device="cuda", dtype=torch.bfloat16) + 0.5
    a[::7] = float("nan")
    a[::11] = float("inf")
    c = torch.rand(N, device="cuda", dtype=torch.bfloat16) * 2
    b = torch.empty(N, device="cuda", dtype=torch.bfloat16)
    kernel(a, c, b)
    af = a.float()
    ref = torch.where(af.isnan() | af.isinf(), torch.full_like(af, -1), af.pow(c.float())).to(torch.bfloat16)
    torch.testing.assert_close(b.float(), ref.float(), atol=0, rtol=1e-2)


def test_a_reduction_into_a_fragment_laid_out_elsewhere_matches_torch():
    """Session 57: a T.reduce_sum whose result's layout a later loop fixed, converted through shared
    memory (written and compiled on the CPU, not yet run on a GPU when added)."""
    import sys
    from pathlib import Path

    import tilelang

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "frontend"))
    from test_user_kernel_forms_s56 import _reduce_into_a_placed_fragment

    a = torch.randn(16, 16, device="cuda")
    x = torch.randn(16, device="cuda")
    y = torch.empty(16, device="cuda")
    tilelang.compile(_reduce_into_a_placed_fragment())(a, x, y)
    torch.testing.assert_close(y, x + (a * x[:, None]).sum(0), rtol=1e-5, atol=1e-5)
    tilelang.compile(_reduce_into_a_placed_fragment(weighted=False))(a, x, y)   # through shared memory
    torch.testing.assert_close(y, x + (a * 2).sum(0), rtol=1e-5, atol=1e-5)
