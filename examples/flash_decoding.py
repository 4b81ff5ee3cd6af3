"""Flash decoding: one query token per sequence, the KV cache split into chunks that run in
parallel (partial outputs + log-sum-exp), then a combine kernel. Grouped-query heads of one KV
head share a tile (padded to the 16 rows an mma needs)."""

import torch
import torch.nn.functional as F

import tilelang
import tilelang.language as T

from _harness import has_gpu, report


@tilelang.jit(out_idx=[-2, -1])
def decode_split(batch, heads, kv_heads, seqlen_kv, dim, num_split=8, block_N=64, block_H=16, threads=128):
    groups = heads // kv_heads
    scale = (1.0 / dim) ** 0.5 * 1.44269504
    part = T.ceildiv(seqlen_kv, num_split)
    dtype, accum_dtype = "float16", "float"

    @T.prim_func
    def kernel(Q: T.Tensor((batch, heads, dim), dtype), K: T.Tensor((batch, seqlen_kv, kv_heads, dim), dtype),
               V: T.Tensor((batch, seqlen_kv, kv_heads, dim), dtype),
               Opart: T.Tensor((batch, heads, num_split, dim), accum_dtype),
               Lse: T.Tensor((batch, heads, num_split), accum_dtype)):
        with T.Kernel(kv_heads, num_split, batch, threads=threads) as (hk, sid, b):
            Q_shared = T.alloc_shared((block_H, dim), dtype)
            K_shared = T.alloc_shared((block_N, dim), dtype)
            V_shared = T.alloc_shared((block_N, dim), dtype)
            P_shared = T.alloc_shared((block_H, block_N), dtype)
            acc_s = T.alloc_fragment((block_H, block_N), accum_dtype)
            acc_o = T.alloc_fragment((block_H, dim), accum_dtype)
            m = T.alloc_fragment((block_H,), accum_dtype)
            m_prev = T.alloc_fragment((block_H,), accum_dtype)
            rescale = T.alloc_fragment((block_H,), accum_dtype)
            row_sum = T.alloc_fragment((block_H,), accum_dtype)
            l = T.alloc_fragment((block_H,), accum_dtype)

            T.copy(Q[b, hk * groups:hk * groups + block_H, :], Q_shared)
            T.clear(acc_o)
            T.clear(l)
            T.fill(m, -T.infinity(accum_dtype))
            for k in T.Pipelined(T.ceildiv(part, block_N), num_stages=2):
                start = sid * part + k * block_N
                T.copy(K[b, start:start + block_N, hk, :], K_shared)
                T.copy(V[b, start:start + block_N, hk, :], V_shared)
                for i, j in T.Parallel(block_H, block_N):
                    acc_s[i, j] = T.if_then_else(
                        (k * block_N + j < part) & (start + j < seqlen_kv), 0, -T.infinity(accum_dtype))
                T.gemm(Q_shared, K_shared, acc_s, transpose_B=True)
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for i in T.Parallel(block_H):
                    rescale[i] = T.exp2(m_prev[i] * scale - m[i] * scale)
                for i, j in T.Parallel(block_H, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m[i] * scale)
                T.reduce_sum(acc_s, row_sum, dim=1)
                for i in T.Parallel(block_H):
                    l[i] = l[i] * rescale[i] + row_sum[i]
                for i, j in T.Parallel(block_H, dim):
                    acc_o[i, j] *= rescale[i]
                T.copy(acc_s, P_shared)
                T.gemm(P_shared, V_shared, acc_o)
            for i, j in T.Parallel(block_H, dim):
                if i < groups:
                    Opart[b, hk * groups + i, sid, j] = acc_o[i, j] / l[i]
            for i in T.Parallel(block_H):
                if i < groups:
                    Lse[b, hk * groups + i, sid] = T.log2(l[i]) + m[i] * scale

    return kernel


@tilelang.jit(out_idx=[-1])
def decode_combine(batch, heads, num_split, dim):
    @T.prim_func
    def kernel(Opart: T.Tensor((batch, heads, num_split, dim), "float"),
               Lse: T.Tensor((batch, heads, num_split), "float"), O: T.Tensor((batch, heads, dim), "float16")):
        with T.Kernel(heads, batch, threads=dim) as (h, b):
            tx = T.get_thread_binding(0)
            m = T.alloc_var("float")
            den = T.alloc_var("float")
            acc = T.alloc_var("float")
            m = -T.infinity("float")
            for s in T.serial(num_split):
                m = T.max(m, Lse[b, h, s])
            den = 0.0
            acc = 0.0
            for s in T.serial(num_split):
                w = T.exp2(Lse[b, h, s] - m)
                den = den + w
                acc = acc + w * Opart[b, h, s, tx]
            O[b, h, tx] = T.cast(acc / den, "float16")

    return kernel


def flash_decode(q, k, v, num_split=8):
    B, H, D = q.shape
    S, HK = k.shape[1], k.shape[2]
    opart, lse = decode_split(B, H, HK, S, D, num_split)(q, k, v)
    return decode_combine(B, H, num_split, D)(opart, lse)


def ref_program(q, k, v):
    groups = q.shape[1] // k.shape[2]
    kk = k.transpose(1, 2).repeat_interleave(groups, dim=1)
    vv = v.transpose(1, 2).repeat_interleave(groups, dim=1)
    return F.scaled_dot_product_attention(q.unsqueeze(2), kk, vv).squeeze(2)


def kernels():
    return [decode_split.get_prim_func(2, 32, 2, 1000, 128), decode_combine.get_prim_func(2, 32, 8, 128),
            decode_split.get_prim_func(1, 8, 1, 4096, 64)]


def main():
    if not has_gpu():
        print("no CUDA device: nothing to run")
        return
    for B, H, HK, S, D in ((2, 32, 2, 1000, 128), (1, 8, 1, 4096, 64), (8, 32, 4, 8192, 128)):
        q = torch.randn(B, H, D, device="cuda", dtype=torch.float16)
        k = torch.randn(B, S, HK, D, device="cuda", dtype=torch.float16)
        v = torch.randn(B, S, HK, D, device="cuda", dtype=torch.float16)
        torch.testing.assert_close(flash_decode(q, k, v), ref_program(q, k, v), rtol=1e-2, atol=1e-2)
        if S == 8192:
            report(f"flash_decoding B{B} H{H} HKV{HK} S{S} D{D}", lambda: flash_decode(q, k, v),
                   lambda: ref_program(q, k, v), nbytes=2.0 * 2 * B * S * HK * D)
    print("flash_decoding: all checks passed")


if __name__ == "__main__":
    main()
