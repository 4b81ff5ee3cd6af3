"""Fragment reductions of several rows a thread against torch: over 16 or 32 lanes
(``tl::warp_allreduce_rows``, the layouts annotated), over the 8 lanes a row the compiler lays a
reduced fragment out with, and upstream's top-k router shape (six rounds of two reductions); the
kernels of tests/transform/test_reduce_rows.py, every op and type it takes."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "transform"))

import tilelang  # noqa: E402
from test_reduce_rows import quant_kernel, reduce_into_kernel, rows_kernel, topk_kernel  # noqa: E402

# (blk_m, N, threads): 16 rows a thread over 32 lanes, 8 over 32, 8 over 16, 32 rows over 32 (for
# 32-bit types; 16-bit ones lay 8 columns a thread: half the lanes, as many rows)
R16, R8, R8x16, R32 = (64, 128, 128), (32, 128, 128), (64, 64, 128), (128, 128, 128)
CASES = [(R16, "max", "float32"), (R16, "sum", "float32"), (R16, "bitxor", "int32"), (R16, "max", "int32"),
         (R16, "sum", "float64"), (R16, "abssum", "float16"), (R16, "min", "float16"), (R16, "sum", "bfloat16"),
         (R8, "absmax", "float32"), (R8x16, "max", "float32"), (R8x16, "sum", "float32"), (R32, "sum", "float32"),
         (R32, "min", "bfloat16")]


def _reference(a, kind):
    if kind == "bitxor":
        out = a[:, 0].clone()
        for j in range(1, a.shape[1]):
            out ^= a[:, j]
        return out
    x = a.abs() if kind.startswith("abs") else a
    x = x.double() if x.is_floating_point() else x
    if kind in ("sum", "abssum"):
        return x.sum(1)
    return x.amax(1) if kind in ("max", "absmax") else x.amin(1)


@pytest.mark.parametrize("wide", [True, False], ids=["wide", "own"])
@pytest.mark.parametrize("shape,kind,dtype", CASES)
def test_rows_match_torch(shape, kind, dtype, wide):
    blk_m, N, threads = shape
    M = 8 * blk_m
    kernel = tilelang.compile(rows_kernel(M, N, blk_m, threads, kind=kind, dtype=dtype, wide=wide), out_idx=[1])
    assert ("warp_allreduce_rows" in kernel.get_kernel_source()) == wide
    tdt = getattr(torch, dtype)
    if dtype == "int32":
        a = torch.randint(-1000, 1000, (M, N), dtype=tdt, device="cuda")
    else:
        a = torch.randn(M, N, dtype=tdt, device="cuda")
    out = kernel(a)
    ref = _reference(a, kind)
    if dtype == "int32":
        assert torch.equal(out, ref)
    elif kind in ("max", "min", "absmax"):
        assert torch.equal(out.double(), ref.double())      # exact: a max picks one of the values
    else:
        tol = {"float16": 0.5, "bfloat16": 2.0}.get(dtype, 1e-4)
        torch.testing.assert_close(out.double(), ref.double(), atol=tol, rtol=1e-2)


def test_topk_router():
    """Upstream's examples/topk kernel shape: six rounds of a max and an argmax over 4 rows a
    thread; values and indices equal torch.topk's (distinct values: no ties)."""
    M, N, K = 8192, 128, 6
    kernel = tilelang.compile(topk_kernel(M, N, K), out_idx=[1, 2])
    logits = torch.rand((M, N), device="cuda").argsort(dim=1).to(torch.float32) / N
    gates, idx = kernel(logits)
    ref_g, ref_i = logits.topk(K, dim=1)
    assert torch.equal(gates, ref_g) and torch.equal(idx, ref_i.to(torch.int32))


def test_rows_reduced_into_a_set_fragment():
    """``T.reduce_sum(..., clear=False)`` twice into a fragment a loop set to 1, 8 rows a thread
    over 8 lanes."""
    k = tilelang.compile(reduce_into_kernel(2), out_idx=[1])
    a = torch.randn(64, 64, device="cuda")
    torch.testing.assert_close(k(a), 1 + 2 * (a * a).sum(1), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("out_dtype", ["float8_e4m3", "bfloat16"])
def test_row_quantisation(out_dtype):
    """Rows scaled by their absmax (16 lanes a row for the fp8 store, 8 for the bf16 one)."""
    k = tilelang.compile(quant_kernel(out_dtype=out_dtype), out_idx=[1, 2])
    x = torch.randn(256, 128, device="cuda", dtype=torch.bfloat16)
    y, s = k(x)
    amax = x.float().abs().amax(1)
    torch.testing.assert_close(s, amax / 448.0, rtol=1e-6, atol=1e-8)
    ref = (x.float() * 448.0 / amax.clamp(min=1e-4)[:, None]).clamp(-448.0, 448.0)
    # (one fp8 step apart at most, where the two float32 quotients round to either side)
    rtol, atol = (0.13, 0.02) if out_dtype == "float8_e4m3" else (0.01, 0.01)
    torch.testing.assert_close(y.float(), ref.to(y.dtype).float(), rtol=rtol, atol=atol)
