"""Kernels at the configurations users give them, against torch: upstream's flash-attention forward
at the tile configs its autotune lists and users try (six of them compile only with ours), and one
GEMM over transposes x types x sizes no tile divides. scripts/compile_sweep.py compiles these
variants without a GPU (docs/conformance.md); here their results are checked."""

import importlib.util
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9,
                                reason="needs an sm_90 GPU")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # tests/: upstream_paths

from upstream_paths import examples as upstream_examples  # noqa: E402

FA = (upstream_examples("flash_attention") or Path("/nonexistent")) / "example_mha_fwd_bhsd.py"


def _flashattn():
    spec = importlib.util.spec_from_file_location("example_mha_fwd_bhsd_user_configs", FA)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    f = mod.flashattn
    return getattr(f, "_target", f)      # the jit factory beneath @autotune: the config as given


@pytest.mark.skipif(not FA.exists(), reason="upstream's examples are not checked out")
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dim,seq", [(64, 1000), (128, 256)])
@pytest.mark.parametrize("block_M,block_N,stages,threads", [
    (64, 64, 1, 128), (128, 64, 2, 128), (128, 128, 1, 128), (64, 128, 2, 128),
    (256, 32, 1, 256), (256, 64, 4, 256),            # upstream's compiler stops at a layout conflict
    (64, 64, 1, 256), (64, 128, 2, 256),             # ... and so did ours: P converts through shared memory
    (32, 64, 1, 128), (32, 128, 0, 128),             # (mma.sync: warps split S's columns, likewise)
])
def test_upstream_attention_at_user_tiles_matches_sdpa(block_M, block_N, stages, threads, dim, seq, causal):
    import torch.nn.functional as F

    kernel = _flashattn()(2, 4, seq, seq, dim, causal, block_M=block_M, block_N=block_N, num_stages=stages,
                          threads=threads)
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, seq, dim, device="cuda", dtype=torch.float16) for _ in range(3))
    out = kernel(q, k, v)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    torch.testing.assert_close(out, ref, rtol=1e-2, atol=1e-2)


def _gemm(M, N, K, bm, bn, bk, stages, threads, ta, tb, dtype, accum, out_dtype):
    import tilelang.language as T

    a_shape, b_shape = ((K, M) if ta else (M, K)), ((N, K) if tb else (K, N))

    @T.prim_func
    def main(A: T.Tensor(a_shape, dtype), B: T.Tensor(b_shape, dtype), C: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            As = T.alloc_shared((bk, bm) if ta else (bm, bk), dtype)
            Bs = T.alloc_shared((bn, bk) if tb else (bk, bn), dtype)
            Cl = T.alloc_fragment((bm, bn), accum)
            T.clear(Cl)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                if ta:
                    T.copy(A[k * bk, by * bm], As)
                else:
                    T.copy(A[by * bm, k * bk], As)
                if tb:
                    T.copy(B[bx * bn, k * bk], Bs)
                else:
                    T.copy(B[k * bk, bx * bn], Bs)
                T.gemm(As, Bs, Cl, transpose_A=ta, transpose_B=tb)
            T.copy(Cl, C[by * bm, bx * bn])

    return main


@pytest.mark.parametrize("dtype,accum,out_dtype", [("float16", "float32", "float16"), ("bfloat16", "float32", "bfloat16"),
                                                   ("float8_e4m3fn", "float32", "float16"), ("int8", "int32", "int32")])
@pytest.mark.parametrize("ta,tb", [(False, False), (False, True), (True, False), (True, True)])
@pytest.mark.parametrize("M,N,K", [(1000, 1000, 1000), (257, 1024, 512)])
def test_gemm_over_transposes_types_and_odd_sizes_matches_torch(M, N, K, ta, tb, dtype, accum, out_dtype):
    import tilelang

    kernel = tilelang.compile(_gemm(M, N, K, 128, 128, 64, 3, 128, ta, tb, dtype, accum, out_dtype))
    torch.manual_seed(0)
    if dtype == "int8":
        a = torch.randint(-4, 5, (M, K), device="cuda", dtype=torch.int8)
        b = torch.randint(-4, 5, (K, N), device="cuda", dtype=torch.int8)
    else:
        a = torch.randn(M, K, device="cuda").to(getattr(torch, dtype))
        b = torch.randn(K, N, device="cuda").to(getattr(torch, dtype))
    c = torch.empty(M, N, device="cuda", dtype=getattr(torch, out_dtype))
    kernel(a.T.contiguous() if ta else a, b.T.contiguous() if tb else b, c)
    ref = a.double() @ b.double()
    if dtype == "int8":
        assert torch.equal(c.long(), ref.long())
    else:
        torch.testing.assert_close(c.double(), ref.to(c.dtype).double(), rtol=2e-2, atol=2e-1 * (K ** 0.5) / 8)


def test_two_gemms_with_p_converted_through_shared_memory_match_torch():
    """S = Q K^T (warpgroups split S's columns), P = S in float16 (whole rows in each warpgroup,
    moved through a shared workspace), O = P V (tests/transform/test_fragment_conversion.py)."""
    import tilelang

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "transform"))
    from test_fragment_conversion import two_gemms

    kernel = tilelang.compile(two_gemms())
    torch.manual_seed(0)
    q, k, v = (torch.randn(n, 128, device="cuda", dtype=torch.float16) for n in (64, 64, 64))
    o = torch.empty(64, 128, device="cuda", dtype=torch.float32)
    kernel(q, k, v, o)
    p = (q.float() @ k.float().T).half().float()
    torch.testing.assert_close(o, p @ v.float(), rtol=1e-2, atol=1e-1)
