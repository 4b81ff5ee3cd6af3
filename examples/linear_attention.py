"""Chunked causal linear attention forward: O_c = tril(Q_c K_c^T) V_c + Q_c S, S += K_c^T V_c."""

import torch

import tilelang
import tilelang.language as T

from _harness import has_gpu, report


@tilelang.jit(out_idx=[-1])
def linear_attention(batch, heads, seq_len, dim, chunk=64, threads=128):
    dtype, accum_dtype = "float16", "float"

    @T.prim_func
    def kernel(Q: T.Tensor((batch, heads, seq_len, dim), dtype), K: T.Tensor((batch, heads, seq_len, dim), dtype),
               V: T.Tensor((batch, heads, seq_len, dim), dtype), O: T.Tensor((batch, heads, seq_len, dim), dtype)):
        with T.Kernel(heads, batch, threads=threads) as (h, b):
            Q_s = T.alloc_shared((chunk, dim), dtype)
            K_s = T.alloc_shared((chunk, dim), dtype)
            V_s = T.alloc_shared((chunk, dim), dtype)
            A_s = T.alloc_shared((chunk, chunk), dtype)
            S_s = T.alloc_shared((dim, dim), dtype)
            attn = T.alloc_fragment((chunk, chunk), accum_dtype)
            out = T.alloc_fragment((chunk, dim), accum_dtype)
            state = T.alloc_fragment((dim, dim), accum_dtype)
            T.clear(state)
            for c in T.Pipelined(T.ceildiv(seq_len, chunk), num_stages=2):
                T.copy(Q[b, h, c * chunk:(c + 1) * chunk, :], Q_s)
                T.copy(K[b, h, c * chunk:(c + 1) * chunk, :], K_s)
                T.copy(V[b, h, c * chunk:(c + 1) * chunk, :], V_s)
                T.copy(state, S_s)
                T.gemm(Q_s, K_s, attn, transpose_B=True, clear_accum=True)
                for i, j in T.Parallel(chunk, chunk):
                    attn[i, j] = T.if_then_else(i >= j, attn[i, j], 0)
                T.copy(attn, A_s)
                T.gemm(A_s, V_s, out, clear_accum=True)
                T.gemm(Q_s, S_s, out)
                T.copy(out, O[b, h, c * chunk:(c + 1) * chunk, :])
                T.gemm(K_s, V_s, state, transpose_A=True)

    return kernel


def ref_program(q, k, v):
    attn = (q.float() @ k.float().transpose(-1, -2)).tril()
    return (attn @ v.float()).to(q.dtype)


def kernels():
    return [linear_attention.get_prim_func(1, 2, 256, 64), linear_attention.get_prim_func(2, 4, 1000, 64)]


def main():
    if not has_gpu():
        print("no CUDA device: nothing to run")
        return
    for B, H, S, D in ((1, 2, 256, 64), (2, 4, 1000, 64), (8, 16, 4096, 64)):
        q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.float16) * 0.1 for _ in range(3))
        kernel = linear_attention(B, H, S, D)
        torch.testing.assert_close(kernel(q, k, v), ref_program(q, k, v), rtol=2e-2, atol=2e-2)
        if S == 4096:
            report(f"linear_attention B{B} H{H} S{S} D{D}", lambda: kernel(q, k, v), lambda: ref_program(q, k, v),
                   flops=4.0 * B * H * S * S * D * 0.5)
    print("linear_attention: all checks passed")


if __name__ == "__main__":
    main()
