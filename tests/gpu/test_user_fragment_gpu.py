"""A kernel with a user fragment layout (``T.Fragment`` via ``T.annotate_layout``) against torch."""

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")

import tilelang  # noqa: E402
import tilelang.language as T  # noqa: E402


def row_layout(i, j):
    """64 x 64 over 128 threads: thread = column within a warp + warp per row mod 4."""
    return j % 32 + 32 * (i % 4), i // 4 * 2 + j // 32


def replicated_layout(i, j, rep):
    """64 x 64 over 2 x 64 threads: each element held by threads t and t + 64."""
    return j % 32 + 32 * (i % 2) + 64 * rep, i // 2 * 2 + j // 32


def scale_and_row_sum(layout, M=64, N=64, threads=128):
    @T.prim_func
    def kernel(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32"), S: T.Tensor((M,), "float32")):
        with T.Kernel(1, threads=threads):
            x = T.alloc_fragment((M, N), "float32")
            s = T.alloc_fragment((M,), "float32")
            T.annotate_layout({x: layout})
            T.copy(A, x)
            for i, j in T.Parallel(M, N):
                x[i, j] = x[i, j] * 2.0 + 1.0
            T.reduce_sum(x, s, dim=1)
            T.copy(x, B)
            T.copy(s, S)

    return kernel


@pytest.mark.parametrize("layout", [
    T.Fragment((64, 64), forward_fn=row_layout),
    T.Fragment((64, 64), forward_fn=replicated_layout, replicate=2),
], ids=["plain", "replicated"])
def test_user_fragment_layout_against_torch(layout):
    k = tilelang.compile(scale_and_row_sum(layout), out_idx=[1, 2])
    a = torch.randn(64, 64, device="cuda")
    b, s = k(a)
    torch.testing.assert_close(b, a * 2 + 1)
    torch.testing.assert_close(s, (a * 2 + 1).sum(1), rtol=1e-4, atol=1e-3)
