"""User ``T.ws`` blocks on two warp groups, each computing on its own fragments
(tests/transform/test_ws_multi_roles.py) run on the GPU against torch: a role each with its own
T.wgmma_gemm and T.wait_wgmma. Skips without a CUDA GPU."""

import pytest

torch = pytest.importorskip("torch")
tilelang = pytest.importorskip("tilelang")
import tilelang.language as T  # noqa: E402

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def test_each_role_waits_for_its_own_wgmma():
    @T.prim_func
    def k(A: T.Tensor((128, 64), T.float16), B: T.Tensor((64, 64), T.float16), C: T.Tensor((128, 64), T.float32)):
        with T.Kernel(1, threads=256):
            a0 = T.alloc_shared((64, 64), T.float16)
            a1 = T.alloc_shared((64, 64), T.float16)
            b_s = T.alloc_shared((64, 64), T.float16)
            T.copy(A[0:64, :], a0)
            T.copy(A[64:128, :], a1)
            T.copy(B, b_s)
            with T.ws(0):
                acc0 = T.alloc_fragment((64, 64), T.float32)
                T.wgmma_gemm(a0, b_s, acc0, clear_accum=True)
                T.wait_wgmma(0)
                T.copy(acc0, C[0:64, :])
            with T.ws(1):
                acc1 = T.alloc_fragment((64, 64), T.float32)
                T.wgmma_gemm(a1, b_s, acc1, clear_accum=True)
                T.wait_wgmma(0)
                T.copy(acc1, C[64:128, :])

    a = torch.randn(128, 64, dtype=torch.float16, device="cuda")
    b = torch.randn(64, 64, dtype=torch.float16, device="cuda")
    c = torch.empty(128, 64, device="cuda")
    tilelang.compile(k)(a, b, c)
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-2, atol=1e-2)
