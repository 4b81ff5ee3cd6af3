"""T.im2col convolutions against torch.conv2d on the GPU: pipelined (cp.async producer) and not,
strides, dilations, paddings, channel counts that allow 16-, 8- and 2-byte runs, tails."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _conv(N, C, H, W, F, K, S, D, P, bm, bn, bk, stages, threads):
    import tilelang
    import tilelang.language as T

    KH = KW = K
    OH = (H + 2 * P - D * (K - 1) - 1) // S + 1
    OW = (W + 2 * P - D * (K - 1) - 1) // S + 1
    dt = "float16"

    @T.prim_func
    def conv(data: T.Tensor((N, H, W, C), dt), weight: T.Tensor((KH, KW, C, F), dt),
             out: T.Tensor((N, OH, OW, F), dt)):
        with T.Kernel(T.ceildiv(F, bn), T.ceildiv(N * OH * OW, bm), threads=threads) as (bx, by):
            data_shared = T.alloc_shared((bm, bk), dt)
            weight_shared = T.alloc_shared((bk, bn), dt)
            out_local = T.alloc_fragment((bm, bn), "float32")
            out_shared = T.alloc_shared((bm, bn), dt)
            weight_flat = T.Tensor((KH * KW * C, F), dt, weight.data)
            out_flat = T.Tensor((N * OH * OW, F), dt, out.data)
            T.clear(out_local)
            for k_iter in T.Pipelined(T.ceildiv(KH * KW * C, bk), num_stages=stages):
                T.im2col(data, data_shared, by, k_iter, KH, S, D, P)
                T.copy(weight_flat[k_iter * bk, bx * bn], weight_shared)
                T.gemm(data_shared, weight_shared, out_local)
            T.copy(out_local, out_shared)
            T.copy(out_shared, out_flat[by * bm, bx * bn])

    return tilelang.compile(conv, out_idx=[2])


@pytest.mark.parametrize("N,C,H,W,F,K,S,D,P,bm,bn,bk,stages,threads", [
    (4, 64, 32, 32, 64, 3, 1, 1, 1, 64, 128, 32, 3, 256),    # upstream's jit test
    (2, 128, 16, 16, 128, 3, 1, 1, 1, 128, 128, 64, 3, 256),  # the wgmma main loop
    (2, 32, 15, 17, 64, 3, 2, 2, 2, 64, 64, 32, 2, 128),      # stride, dilation, pad 2, tails
    (1, 12, 9, 11, 32, 3, 1, 1, 1, 64, 32, 32, 2, 128),       # C = 12: 8-byte runs
    (1, 3, 10, 10, 32, 5, 1, 1, 2, 64, 32, 16, 2, 128),       # C = 3: single elements
    (2, 64, 8, 8, 64, 1, 1, 1, 0, 64, 64, 64, 0, 128),        # 1x1, not pipelined
])
def test_im2col_conv_matches_torch(N, C, H, W, F, K, S, D, P, bm, bn, bk, stages, threads):
    kernel = _conv(N, C, H, W, F, K, S, D, P, bm, bn, bk, stages, threads)
    a = torch.randn(N, H, W, C, device="cuda", dtype=torch.float16)
    b = torch.randn(K, K, C, F, device="cuda", dtype=torch.float16)
    out = kernel(a, b)
    ref = torch.conv2d(a.permute(0, 3, 1, 2), b.permute(3, 2, 0, 1), stride=S, padding=P, dilation=D)
    torch.testing.assert_close(out, ref.permute(0, 2, 3, 1), rtol=1e-2, atol=1e-2)
