"""Raw pointers on the GPU: a T.ptr GEMM called with addresses and with tensors, a pointer-table
copy, an eager T.ptr kernel, and a vectorized T.ptx_cp_async round trip."""

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")


def _matmul_ptr(block_M=64, block_N=64, block_K=32):
    import tilelang.language as T

    @T.prim_func
    def main(a_ptr: T.ptr, b_ptr: T.ptr, c_ptr: T.ptr, m: T.int32, n: T.int32, k: T.int32):
        A = T.make_tensor(a_ptr, (m, k), T.float16)
        B = T.make_tensor(b_ptr, (n, k), T.float16)   # read as [n, k] tiles (transpose_B)
        C = T.make_tensor(c_ptr, (m, n), T.float32)
        with T.Kernel(T.ceildiv(n, block_N), T.ceildiv(m, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), T.float16)
            B_shared = T.alloc_shared((block_N, block_K), T.float16)
            C_local = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(k, block_K), num_stages=3):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                T.copy(B[bx * block_N, ko * block_K], B_shared)
                T.gemm(A_shared, B_shared, C_local, transpose_B=True)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


@pytest.mark.parametrize("M, N, K", [(256, 256, 256), (200, 136, 96)])
def test_ptr_gemm_addresses_and_tensors(M, N, K):
    import tilelang

    kernel = tilelang.compile(_matmul_ptr())
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(N, K, device="cuda", dtype=torch.float16)
    ref = (a.float() @ b.float().T)
    c1 = torch.zeros(M, N, device="cuda")
    c2 = torch.zeros(M, N, device="cuda")
    kernel(a.data_ptr(), b.data_ptr(), c1.data_ptr(), M, N, K)
    kernel(a, b, c2, M, N, K)
    torch.testing.assert_close(c1, ref, atol=1e-2, rtol=1e-2)
    torch.testing.assert_close(c2, c1)


def test_pointer_table_copy():
    import tilelang
    import tilelang.language as T

    G, N = 3, 64

    @T.prim_func
    def main(src_ptrs: T.Tensor([G], T.ptr), out: T.Tensor([G, N], T.float16)):
        with T.Kernel(G, threads=1) as bx:
            Src = T.make_tensor(src_ptrs[bx], (N,), T.float16)
            for i in T.serial(N):
                out[bx, i] = Src[i]

    kernel = tilelang.compile(main)
    srcs = [torch.randn(N, device="cuda", dtype=torch.float16) for _ in range(G)]
    table = torch.tensor([s.data_ptr() for s in srcs], device="cuda", dtype=torch.int64)
    out = torch.empty(G, N, device="cuda", dtype=torch.float16)
    kernel(table, out)
    torch.testing.assert_close(out, torch.stack(srcs))


def test_eager_ptr_copy():
    import tilelang
    import tilelang.language as T

    @tilelang.jit
    def copy_ptr(A: T.ptr, B: T.ptr, N: int, dtype: T.dtype):
        A = T.make_tensor(A, (N,), dtype)
        B = T.make_tensor(B, (N,), dtype)
        with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:
            for i in T.Parallel(128):
                B[bx * 128 + i] = A[bx * 128 + i]

    a = torch.randn(1024, device="cuda", dtype=torch.float16)
    b = torch.empty_like(a)
    copy_ptr(a, b, 1024, torch.float16)
    torch.testing.assert_close(b, a)


def test_vectorized_cp_async_round_trip():
    import tilelang
    import tilelang.language as T

    @T.prim_func
    def main(A: T.Tensor((128,), T.float16), B: T.Tensor((128,), T.float16)):
        with T.Kernel(1, threads=32) as _:
            tx = T.get_thread_binding()
            S = T.alloc_shared((128,), T.float16)
            for i in T.vectorized(4):
                T.ptx_cp_async(T.access_ptr(S[tx * 4 + i], "w", 1), T.access_ptr(A[tx * 4 + i], "r", 1), 1)
            T.ptx_commit_group()
            T.ptx_wait_group(0)
            for i in T.serial(4):
                B[tx * 4 + i] = S[tx * 4 + i]

    kernel = tilelang.compile(main, out_idx=[1])
    assert "cp_async_gs<8>" in kernel.get_kernel_source()
    a = torch.randn(128, device="cuda", dtype=torch.float16)
    torch.testing.assert_close(kernel(a), a)
