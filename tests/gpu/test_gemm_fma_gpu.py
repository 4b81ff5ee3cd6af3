"""The SIMT (FMA) fallback of T.gemm against torch on the GPU: fp64 (every target), int32, fp32 into
an fp64 accumulator, a register A operand with an epilogue over the accumulator, pipelined loops."""

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")

import tilelang  # noqa: E402
import tilelang.language as T  # noqa: E402


def _matmul(M, N, K, bm, bn, bk, ta, tb, in_dtype, accum, stages, threads=128):
    a_shape, b_shape = ((K, M) if ta else (M, K)), ((N, K) if tb else (K, N))

    @T.prim_func
    def main(A: T.Tensor(a_shape, in_dtype), B: T.Tensor(b_shape, in_dtype), C: T.Tensor((M, N), accum)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            A_s = T.alloc_shared((bk, bm) if ta else (bm, bk), in_dtype)
            B_s = T.alloc_shared((bn, bk) if tb else (bk, bn), in_dtype)
            C_l = T.alloc_fragment((bm, bn), accum)
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                if ta:
                    T.copy(A[k * bk, by * bm], A_s)
                else:
                    T.copy(A[by * bm, k * bk], A_s)
                if tb:
                    T.copy(B[bx * bn, k * bk], B_s)
                else:
                    T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_l, ta, tb)
            T.copy(C_l, C[by * bm, bx * bn])

    return main


def _inputs(M, N, K, ta, tb, dtype):
    if dtype in (torch.int32,):
        a = torch.randint(-8, 8, (M, K), device="cuda", dtype=dtype)
        b = torch.randint(-8, 8, (K, N), device="cuda", dtype=dtype)
    else:
        a = torch.randn(M, K, device="cuda", dtype=dtype)
        b = torch.randn(K, N, device="cuda", dtype=dtype)
    return a, b, (a.T.contiguous() if ta else a), (b.T.contiguous() if tb else b)


@pytest.mark.parametrize("ta, tb", [(False, False), (False, True), (True, False), (True, True)])
@pytest.mark.parametrize("stages", [0, 2])
def test_fp64(ta, tb, stages):
    M, N, K = 512, 512, 512
    kernel = tilelang.compile(_matmul(M, N, K, 64, 32, 16, ta, tb, "float64", "float64", stages), out_idx=[2])
    assert "gemm_fma" in kernel.get_kernel_source()
    a, b, a_in, b_in = _inputs(M, N, K, ta, tb, torch.float64)
    torch.testing.assert_close(kernel(a_in, b_in), a @ b, rtol=1e-10, atol=1e-10)


def test_fp64_upstream_shape_nt():
    kernel = tilelang.compile(_matmul(512, 512, 512, 64, 32, 16, False, True, "float64", "float64", 2), out_idx=[2])
    a, b, a_in, b_in = _inputs(512, 512, 512, False, True, torch.float64)
    torch.testing.assert_close(kernel(a_in, b_in), a @ b, rtol=1e-10, atol=1e-10)


def test_int32():
    M, N, K = 256, 256, 128
    kernel = tilelang.compile(_matmul(M, N, K, 64, 64, 32, False, False, "int32", "int32", 2), out_idx=[2])
    a, b, a_in, b_in = _inputs(M, N, K, False, False, torch.int32)
    assert torch.equal(kernel(a_in, b_in), (a.double() @ b.double()).to(torch.int32))


def test_fp32_into_fp64():
    M, N, K = 256, 256, 256
    kernel = tilelang.compile(_matmul(M, N, K, 64, 64, 32, False, True, "float32", "float64", 2), out_idx=[2])
    a, b, a_in, b_in = _inputs(M, N, K, False, True, torch.float32)
    torch.testing.assert_close(kernel(a_in, b_in), a.double() @ b.double(), rtol=1e-9, atol=1e-9)


def test_large_tile_256_threads():
    M, N, K = 512, 512, 256
    kernel = tilelang.compile(_matmul(M, N, K, 128, 128, 16, False, False, "float64", "float64", 2, threads=256),
                              out_idx=[2])
    a, b, a_in, b_in = _inputs(M, N, K, False, False, torch.float64)
    torch.testing.assert_close(kernel(a_in, b_in), a @ b, rtol=1e-10, atol=1e-10)


def test_register_a_and_epilogue():
    M, N, K = 32, 32, 16

    @T.prim_func
    def main(A: T.Tensor((M, K), "float64"), B: T.Tensor((K, N), "float64"), C: T.Tensor((M, N), "float64")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((M, K), "float64")
            A_l = T.alloc_fragment((M, K), "float64")
            B_s = T.alloc_shared((K, N), "float64")
            C_l = T.alloc_fragment((M, N), "float64")
            T.copy(A, A_s)
            T.copy(A_s, A_l)
            T.copy(B, B_s)
            T.gemm(A_l, B_s, C_l, clear_accum=True)
            for i, j in T.Parallel(M, N):
                C_l[i, j] = C_l[i, j] * 2 + i
            T.copy(C_l, C)

    kernel = tilelang.compile(main, out_idx=[2])
    a = torch.randn(M, K, device="cuda", dtype=torch.float64)
    b = torch.randn(K, N, device="cuda", dtype=torch.float64)
    rows = torch.arange(M, device="cuda", dtype=torch.float64)[:, None]
    torch.testing.assert_close(kernel(a, b), (a @ b) * 2 + rows, rtol=1e-10, atol=1e-10)
