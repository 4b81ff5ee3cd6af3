"""The kernels of tests/transform/test_examples_numerics.py against torch: the four upstream
examples' mappings (int4 -> int8 register A operand of gemm_rs, a copy of part of a wgmma
accumulator, T.copy into a per-thread T.alloc_local buffer, a bool row copied into a fragment)."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "transform"))

import tilelang  # noqa: E402
import test_examples_numerics as ex  # noqa: E402


def _unpack_int4(q):
    lo, hi = (q & 0x0F).to(torch.int8), (q >> 4).to(torch.int8)
    n, k2 = q.shape
    i4 = torch.stack((lo, hi), dim=-1).reshape(n, k2 * 2)
    return (i4 << 4) >> 4


def test_int4_unpack_into_int8_gemm_rs():
    M, N, K = 64, 32, 128
    kernel = tilelang.compile(ex.int4_gemm(M, N, K), out_idx=[2])
    a = torch.randint(-8, 8, (M, K), dtype=torch.int8, device="cuda")
    b = torch.randint(0, 256, (N, K // 2), dtype=torch.uint8, device="cuda")
    ct = kernel(a, b)
    ref = (_unpack_int4(b).float() @ a.float().T).to(torch.int32)
    torch.testing.assert_close(ct, ref, rtol=0, atol=0)


def test_copy_of_first_accumulator_rows():
    rows, M, N, K = 4, 64, 64, 64
    kernel = tilelang.compile(ex.partial_epilogue(rows, M, N, K), out_idx=[2])
    a = torch.randn(M, K, dtype=torch.float16, device="cuda")
    b = torch.randn(K, N, dtype=torch.float16, device="cuda")
    o = kernel(a, b)
    torch.testing.assert_close(o, (a.float() @ b.float())[:rows].half(), rtol=1e-2, atol=1e-2)


def test_copy_into_local_buffer_per_thread():
    S, D, per = 64, 128, 32
    kernel = tilelang.compile(ex.local_rows(S, D, per), out_idx=[1])
    x = torch.randn(S, D, dtype=torch.float16, device="cuda")
    torch.testing.assert_close(kernel(x), x * 2)


def test_bool_row_into_fragment():
    rows, n, D = 4, 4, 64
    kernel = tilelang.compile(ex.bool_row_mask(rows, n, D), out_idx=[2])
    mask = torch.rand(rows, n, device="cuda") > 0.5
    mask[:, 0] = True
    x = torch.randn(n, D, device="cuda")
    o = kernel(mask, x)
    torch.cuda.synchronize()     # a misaligned or out-of-bounds access surfaces here
    torch.testing.assert_close(o, mask.float() @ x, rtol=1e-5, atol=1e-5)
