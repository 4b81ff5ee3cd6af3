"""The Run lens's roofline percentage on a real GPU (tests/test_roofline.py fakes the measurement):
an elementwise add of 8192 x 4096 fp16 tensors and a 4096^3 fp16 GEMM run for real; the estimate is
for the GPU they ran on and the measured time reaches a plausible share of it."""

import pytest
import torch

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")

SOURCE = '''
import tilelang
import tilelang.language as T


# tilelang: check add(M=8192, N=4096)
@tilelang.jit(out_idx=[-1])
def add(M, N, block=32):
    @T.prim_func
    def kernel(A: T.Tensor((M, N), "float16"), B: T.Tensor((M, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(M, block), threads=256) as bx:
            for i, j in T.Parallel(block, N):
                C[bx * block + i, j] = A[bx * block + i, j] + B[bx * block + i, j]
    return kernel


# tilelang: check matmul(M=4096, N=4096, K=4096)
@tilelang.jit(out_idx=[-1])
def matmul(M, N, K, block_M=128, block_N=256, block_K=64, num_stages=3, threads=256):
    @T.prim_func
    def kernel(A: T.Tensor((M, K), "float16"), B: T.Tensor((N, K), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), "float16")
            B_s = T.alloc_shared((block_N, block_K), "float16")
            C_l = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[bx * block_N, k * block_K], B_s)
                T.gemm(A_s, B_s, C_l, transpose_B=True)
            T.copy(C_l, C[by * block_M, bx * block_N])
    return kernel
'''


@pytest.mark.parametrize("factory, bound", [("add", "memory"), ("matmul", "compute")])
def test_run_lens_percentage_of_the_roofline(tmp_path, factory, bound):
    from tilelang_lsp import lenses, worker_tools
    from tilelang_lsp.worker_check import CheckService

    path = tmp_path / "kernels.py"
    path.write_text(SOURCE)
    data = worker_tools.run_kernel(CheckService(), {"path": str(path), "text": SOURCE, "factory": factory})
    assert data["ran"] and data["error"] is None, data
    assert data["roofline"]["bound"] == bound
    if "H200" in torch.cuda.get_device_name():
        assert data["roofline"]["device"] == "H200-SXM-141GB"      # the product, not sm_90a's H100
    # a real kernel reaches a share of its roofline, never (much) more than all of it
    assert 20.0 < data["roofline_percent"] < 110.0, lenses.run_report(data)
    assert "% of roofline" in lenses.run_title(data)
