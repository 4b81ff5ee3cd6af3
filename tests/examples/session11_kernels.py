"""Kernels shared by test_examples_session11.py (CPU: lowering and generated CUDA) and
tests/gpu/test_examples_session11_gpu.py (results against torch): the mappings behind three
upstream examples (flash decoding's varlen logits, deepseek_mhc's pre block)."""

import sys
from pathlib import Path

import tilelang.language as T

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "transform"))
from test_examples_numerics import partial_epilogue  # noqa: E402


def partial_rows_epilogue(rows=4, M=64, N=128, K=64):
    """O = (A @ B)[:rows] through a (rows, N) shared tile of two 64-column swizzle slabs
    (flash decoding's ``T.copy(acc_o[:valid_block_H, :], O_shared)`` with dim 128): the kernel of
    tests/transform/test_examples_numerics.py's ``partial_epilogue`` at flash decoding's width."""
    return partial_epilogue(rows, M, N, K)


def gemm_sqrsum_tf32(tokens=64, hc3=24, hidden=512, token_block=32, hidden_block=256, operands=T.float32):
    """deepseek_mhc's gemm + sum of squares: a tf32 register-A gemm whose operand a T.Parallel
    loop also reads through an enclosing serial loop's variable (``x[i, jj * 4 + j]``).
    ``operands``: the dtype of both gemm operand tiles (upstream's example says T.tfloat32)."""

    @T.prim_func
    def kernel(x: T.Tensor((tokens, hidden), T.bfloat16), fn: T.Tensor((hc3, hidden), T.float32),
               out: T.Tensor((tokens, hc3), T.float32), sqrsum: T.Tensor((tokens,), T.float32)):
        with T.Kernel(T.ceildiv(tokens, token_block)) as px:
            out_frag = T.alloc_fragment((token_block, 32), T.float32)
            part = T.alloc_fragment((token_block, 4), T.float32)
            T.clear(out_frag)
            T.clear(part)
            for pz in T.Pipelined(hidden // hidden_block, num_stages=2):
                x_s = T.alloc_shared((token_block, hidden_block), T.bfloat16)
                fn_s = T.alloc_shared((32, hidden_block), operands)
                T.copy(x[px * token_block, pz * hidden_block], x_s)
                T.copy(fn[0, pz * hidden_block], fn_s)
                x16 = T.alloc_fragment((token_block, hidden_block), T.bfloat16)
                T.copy(x_s, x16)
                xf = T.alloc_fragment((token_block, hidden_block), operands)
                T.copy(x16, xf)
                for jj in T.serial(hidden_block // 4):
                    for i, j in T.Parallel(token_block, 4):
                        part[i, j] += xf[i, jj * 4 + j] * xf[i, jj * 4 + j]
                T.gemm(xf, fn_s, out_frag, transpose_B=True)
            sq = T.alloc_fragment(token_block, T.float32)
            T.reduce_sum(part, sq)
            for i in T.Parallel(token_block):
                sqrsum[px * token_block + i] = sq[i]
            for i, j in T.Parallel(token_block, 32):
                if j < hc3:
                    out[px * token_block + i, j] = out_frag[i, j]

    return kernel


def thread_regions(tokens=8, hc=4, hidden=512, block=256):
    """Two roles by hand (deepseek_mhc's pre block): threads 0..31 softmax a (hc, hc) fragment
    row-wise, threads 32..95 pipeline a weighted sum of ``hc`` rows through shared memory."""

    @T.prim_func
    def kernel(mix: T.Tensor((tokens, hc * hc), T.float32), w: T.Tensor((hc,), T.float32),
               x: T.Tensor((tokens, hc, hidden), T.bfloat16), soft: T.Tensor((tokens, hc * hc), T.float32),
               y: T.Tensor((tokens, hidden), T.bfloat16)):
        with T.Kernel(tokens, threads=96) as t:
            if T.get_thread_binding() < 32:
                cm = T.alloc_fragment((hc, hc), T.float32)
                mx = T.alloc_fragment(hc, T.float32)
                sm = T.alloc_fragment(hc, T.float32)
                for j, k in T.Parallel(hc, hc):
                    cm[j, k] = mix[t, j * hc + k]
                T.reduce_max(cm, mx, dim=1)
                for j, k in T.Parallel(hc, hc):
                    cm[j, k] = T.exp(cm[j, k] - mx[j])
                T.reduce_sum(cm, sm, dim=1)
                for j, k in T.Parallel(hc, hc):
                    soft[t, j * hc + k] = cm[j, k] / sm[j]
            else:
                w_s = T.alloc_shared(hc, T.float32)
                for j in T.Parallel(hc):
                    w_s[j] = w[j]
                for h in T.Pipelined(hidden // block, num_stages=2):
                    xs = T.alloc_shared((hc, block), T.float32)
                    xl = T.alloc_fragment((hc, block), T.float32)
                    T.copy(x[t, 0, h * block], xs)
                    T.copy(xs, xl)
                    acc = T.alloc_fragment(block, T.float32)
                    T.clear(acc)
                    for r in T.serial(hc):
                        for c in T.Parallel(block):
                            acc[c] += w_s[r] * xl[r, c]
                    T.copy(acc, y[t, h * block])

    return kernel


def region_cross_warp_reduce(rows=2, cols=512):
    """Row sums of a (rows, cols) tile by threads 64..191 of 256 (two rows: 64 lanes a row, a
    reduction across the warps of a thread region; four rows of 256 take a warp each)."""

    @T.prim_func
    def kernel(A: T.Tensor((rows, cols), T.float32), S: T.Tensor((rows,), T.float32)):
        with T.Kernel(1, threads=256):
            tx = T.get_thread_binding()
            if tx >= 64 and tx < 192:
                a = T.alloc_fragment((rows, cols), T.float32)
                s = T.alloc_fragment((rows,), T.float32)
                T.copy(A, a)
                T.reduce_sum(a, s, dim=1)
                T.copy(s, S)

    return kernel
