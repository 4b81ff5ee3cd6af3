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


@pytest.mark.parametrize("block", [(256, 256), (128, 256)])
def test_512_thread_gemm_splits_where_an_instruction_would_not_fit(block):
    """256 x 256 on 512 threads: each warpgroup's m64n256 would need more registers than
    __launch_bounds__(512) leaves (ptxas stopped); split 2 x 2 it issues m64n128 (CPU side:
    test_wgmma_split_n.test_a_256x256_tile_on_512_threads_compiles). 128 x 256 was 2 x 2 already."""
    import tilelang
    import tilelang.language as T

    bm, bn, M, N, K = *block, 512, 512, 512

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(N // bn, M // bm, threads=512) as (bx, by):
            A_s = T.alloc_shared((bm, 64), "float16")
            B_s = T.alloc_shared((64, bn), "float16")
            C_l = T.alloc_fragment((bm, bn), "float32")
            T.clear(C_l)
            for k in T.Pipelined(K // 64, num_stages=2):
                T.copy(A[by * bm, k * 64], A_s)
                T.copy(B[k * 64, bx * bn], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * bm, bx * bn])

    kernel = tilelang.compile(main)
    assert "tl::Warpgroups<2, 2>" in kernel.get_kernel_source()
    torch.manual_seed(0)
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    c = torch.empty(M, N, device="cuda", dtype=torch.float16)
    kernel(a, b, c)
    torch.testing.assert_close(c.float(), a.float() @ b.float(), rtol=1e-2, atol=1e-1)
