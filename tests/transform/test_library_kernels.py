"""Forms from kernel libraries built on upstream TileLang that ours refused or compiled into slow
code (session 40's probe of flash-linear-attention, sglang, BitBLAS, vLLM and smaller projects):

* a copy from a ``(B, T, H, D)`` tensor with a symbolic ``T`` (fla's attention) was one element at
  a time, and under ``T.Pipelined(num_stages=1)`` a TL0002 error (cp.async cannot move single
  bf16 elements): strides that are products of extents count by their known factors now, 16 bytes;
* a 1-D fragment zeroed by a loop (or copied to shared memory) around a ``T.reduce_sum`` into it
  (fla's DPLR and KDA backward kernels) took the loop's or copy's default layout first, which the
  reduction could not produce (TL0201); the reduction places it now and they follow.
Each kernel's CUDA is compiled with nvcc.
"""

import tilelang
import tilelang.language as T
from tilelang.jit import nvcc


def _body(func, arch="sm_90a", **kw):
    art = tilelang.lower(func, arch, **kw)
    assert nvcc.compile_cubin(art.source, art.arch, art.compile_flags)[:4] == b"\x7fELF"
    return art.source[art.source.index('extern "C" __global__'):]


def _attention_loop(num_stages, BT=64, BS=64, D=128, H=4):
    T_d = T.dynamic("T")

    @T.prim_func
    def kernel(q: T.Tensor((2, T_d, H, D), T.bfloat16), k: T.Tensor((2, T_d, H, D), T.bfloat16),
               o: T.Tensor((2, T_d, H, BS), T.float32)):
        with T.Kernel(H, T.ceildiv(T_d, BT), 2, threads=128) as (i_h, i_t, i_b):
            Q_s = T.alloc_shared((BT, D), T.bfloat16)
            K_s = T.alloc_shared((BS, D), T.bfloat16)
            acc_s = T.alloc_fragment((BT, BS), T.float32)
            acc_o = T.alloc_fragment((BT, BS), T.float32)
            T.clear(acc_o)
            T.copy(q[i_b, i_t * BT:i_t * BT + BT, i_h, :], Q_s)
            for j in T.Pipelined(T.ceildiv(T_d, BS), num_stages=num_stages):
                T.copy(k[i_b, j * BS:j * BS + BS, i_h, :], K_s)
                T.clear(acc_s)
                T.gemm(Q_s, K_s, acc_s, transpose_B=True)
                for a, b in T.Parallel(BT, BS):
                    acc_o[a, b] += acc_s[a, b]
            T.copy(acc_o, o[i_b, i_t * BT:i_t * BT + BT, i_h, :])
    return kernel


def test_copy_from_a_tensor_with_a_symbolic_outer_extent_moves_16_bytes():
    for stages in (1, 2):
        body = _body(_attention_loop(stages), pass_configs={"tl.disable_tma_lower": True,
                                                           "tl.disable_warp_specialized": True})
        reads = [line for line in body.splitlines() if "(&(k[" in line or "= k[" in line]
        assert reads and all("<16>" in line for line in reads), stages     # (was one bf16 per access)


def test_reduced_fragment_copied_to_shared_memory():
    @T.prim_func
    def kernel(A: T.Tensor((64, 64), T.float32), B: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=128):
            x = T.alloc_fragment((64, 64), T.float32)
            for i, j in T.Parallel(64, 64):
                x[i, j] = A[i, j]
            col = T.alloc_fragment((64,), T.float32)
            T.reduce_sum(x, col, dim=1)
            col_s = T.alloc_shared((64,), T.float32)
            T.copy(col, col_s)
            for j in T.Parallel(64):
                B[j] = col_s[j]

    body = _body(kernel)
    assert "col_s" not in body and "smem" in body
