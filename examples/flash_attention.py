"""Flash attention forward (BSHD or BHSD, causal or not, grouped-query), checked against
torch's scaled_dot_product_attention.

Online softmax in registers: S = Q K^T on the tensor cores, running row max and sum, P V with P
as a register operand; K and V tiles are prefetched through a multi-stage cp.async pipeline.
"""

import argparse

import torch
import torch.nn.functional as F

import tilelang
import tilelang.language as T

from _harness import has_gpu, report


@tilelang.jit(out_idx=[3], pass_configs={"tl.enable_fast_math": True})
def flashattn(batch, heads, seq_len, dim, is_causal=False, groups=1, layout="bshd",
              block_M=128, block_N=64, num_stages=2, threads=256):
    scale = (1.0 / dim) ** 0.5 * 1.44269504  # fold log2(e) so the softmax can use exp2
    kv_heads = heads // groups
    if layout == "bshd":
        q_shape, kv_shape = [batch, seq_len, heads, dim], [batch, seq_len, kv_heads, dim]
    else:
        q_shape, kv_shape = [batch, heads, seq_len, dim], [batch, kv_heads, seq_len, dim]
    dtype, accum_dtype = "float16", "float"

    def tile(X, b, h, start, size):
        if layout == "bshd":
            return X[b, start:start + size, h, :]
        return X[b, h, start:start + size, :]

    @T.macro
    def mma0(K, Q_shared, K_shared, acc_s, k, bx, by, bz):
        T.copy(tile(K, bz, by // groups, k * block_N, block_N), K_shared)
        if is_causal:
            for i, j in T.Parallel(block_M, block_N):
                acc_s[i, j] = T.if_then_else(bx * block_M + i >= k * block_N + j, 0, -T.infinity(acc_s.dtype))
        else:
            for i, j in T.Parallel(block_M, block_N):
                acc_s[i, j] = T.if_then_else(k * block_N + j < seq_len, 0, -T.infinity(acc_s.dtype))
        T.gemm(Q_shared, K_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)

    @T.macro
    def mma1(V, V_shared, acc_s_cast, acc_o, k, by, bz):
        T.copy(tile(V, bz, by // groups, k * block_N, block_N), V_shared)
        T.gemm(acc_s_cast, V_shared, acc_o, policy=T.GemmWarpPolicy.FullRow)

    @T.macro
    def softmax(acc_s, acc_s_cast, scores_max, scores_max_prev, scores_scale, scores_sum, logsum):
        T.copy(scores_max, scores_max_prev)
        T.fill(scores_max, -T.infinity(accum_dtype))
        T.reduce_max(acc_s, scores_max, dim=1, clear=False)
        for i in T.Parallel(block_M):
            scores_max[i] = T.max(scores_max[i], scores_max_prev[i])
        for i in T.Parallel(block_M):
            scores_scale[i] = T.exp2(scores_max_prev[i] * scale - scores_max[i] * scale)
        for i, j in T.Parallel(block_M, block_N):
            acc_s[i, j] = T.exp2(acc_s[i, j] * scale - scores_max[i] * scale)
        T.reduce_sum(acc_s, scores_sum, dim=1)
        for i in T.Parallel(block_M):
            logsum[i] = logsum[i] * scores_scale[i] + scores_sum[i]
        T.copy(acc_s, acc_s_cast)

    @T.macro
    def rescale(acc_o, scores_scale):
        for i, j in T.Parallel(block_M, dim):
            acc_o[i, j] *= scores_scale[i]

    @T.prim_func
    def main(Q: T.Tensor(q_shape, dtype), K: T.Tensor(kv_shape, dtype), V: T.Tensor(kv_shape, dtype),
             Output: T.Tensor(q_shape, dtype)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, by, bz):
            Q_shared = T.alloc_shared([block_M, dim], dtype)
            K_shared = T.alloc_shared([block_N, dim], dtype)
            V_shared = T.alloc_shared([block_N, dim], dtype)
            O_shared = T.alloc_shared([block_M, dim], dtype)
            acc_s = T.alloc_fragment([block_M, block_N], accum_dtype)
            acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
            acc_o = T.alloc_fragment([block_M, dim], accum_dtype)
            scores_max = T.alloc_fragment([block_M], accum_dtype)
            scores_max_prev = T.alloc_fragment([block_M], accum_dtype)
            scores_scale = T.alloc_fragment([block_M], accum_dtype)
            scores_sum = T.alloc_fragment([block_M], accum_dtype)
            logsum = T.alloc_fragment([block_M], accum_dtype)

            T.copy(tile(Q, bz, by, bx * block_M, block_M), Q_shared)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(scores_max, -T.infinity(accum_dtype))
            loop_range = (T.min(T.ceildiv(seq_len, block_N), T.ceildiv((bx + 1) * block_M, block_N))
                          if is_causal else T.ceildiv(seq_len, block_N))
            for k in T.Pipelined(loop_range, num_stages=num_stages):
                mma0(K, Q_shared, K_shared, acc_s, k, bx, by, bz)
                softmax(acc_s, acc_s_cast, scores_max, scores_max_prev, scores_scale, scores_sum, logsum)
                rescale(acc_o, scores_scale)
                mma1(V, V_shared, acc_s_cast, acc_o, k, by, bz)
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= logsum[i]
            T.copy(acc_o, O_shared)
            T.copy(O_shared, tile(Output, bz, by, bx * block_M, block_M))

    return main


def ref_program(Q, K, V, is_causal, groups=1, layout="bshd"):
    if layout == "bshd":
        Q, K, V = (x.transpose(1, 2) for x in (Q, K, V))
    if groups > 1:
        K = K.repeat_interleave(groups, dim=1)
        V = V.repeat_interleave(groups, dim=1)
    out = F.scaled_dot_product_attention(Q, K, V, is_causal=is_causal)
    return out.transpose(1, 2).contiguous() if layout == "bshd" else out


def kernels():
    return [flashattn.get_prim_func(1, 4, 256, 64, False), flashattn.get_prim_func(1, 4, 256, 128, True),
            flashattn.get_prim_func(2, 8, 512, 128, True, groups=4, layout="bhsd")]


def run(B, H, S, D, causal, groups=1, layout="bshd", bench=False, **cfg):
    kernel = flashattn(B, H, S, D, causal, groups, layout, **cfg)
    kv = H // groups
    shape_q = (B, S, H, D) if layout == "bshd" else (B, H, S, D)
    shape_kv = (B, S, kv, D) if layout == "bshd" else (B, kv, S, D)
    q = torch.randn(shape_q, device="cuda", dtype=torch.float16)
    k = torch.randn(shape_kv, device="cuda", dtype=torch.float16)
    v = torch.randn(shape_kv, device="cuda", dtype=torch.float16)
    out = kernel(q, k, v)
    torch.testing.assert_close(out, ref_program(q, k, v, causal, groups, layout), rtol=1e-2, atol=1e-2)
    if bench:
        flops = 4.0 * B * H * S * S * D * (0.5 if causal else 1.0)
        if layout == "bhsd" and groups == 1:
            ref = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)  # noqa: E731
        else:
            ref = lambda: ref_program(q, k, v, causal, groups, layout)  # noqa: E731
        return report(f"flash_attn {layout} B{B} H{H} S{S} D{D} causal={causal} g={groups}",
                      lambda: kernel(q, k, v), ref, flops=flops)
    return None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--seq", type=int, default=4096)
    parser.add_argument("--dim", type=int, default=128)
    args = parser.parse_args()
    if not has_gpu():
        print("no CUDA device: nothing to run")
        return
    for causal in (False, True):
        run(2, 4, 1000, 64, causal)
        run(1, 8, 512, 128, causal, groups=4, layout="bhsd")
        run(args.batch, args.heads, args.seq, args.dim, causal, layout="bhsd", bench=True)
    print("flash_attention: all checks passed")


if __name__ == "__main__":
    main()
