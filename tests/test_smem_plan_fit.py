"""Shared memory that fits: the planner gives no bytes to a shared buffer the kernel never uses,
and a cross-warp reduction exchanges its registers one at a time (a ``threads``-element
workspace) where batching them all would take the block past its budget; kernels with room to
spare keep the batched exchange. (Upstream's examples deepseek_mla ``example_mla_decode`` and
dequantize_gemm ``example_dequant_gemm_bf16_mxfp4_hopper`` went over the 227 KiB of sm_90a for
exactly these two reasons.)"""

import re

import pytest

import tilelang
import tilelang.language as T
from tilelang import targets
from tilelang.transform import smem_plan

BUDGET = targets.smem_per_block("sm_90a")
# the mma.sync plan of MLA decoding's shape (wgmma with warpgroups splitting N: test_smem_budget_s13.py)
MMA_SYNC = {"tl.enable_wgmma_split_n": False}


def test_a_never_used_buffer_takes_no_bytes_and_aliases_nothing():
    items = [smem_plan.Item("a", 1000, 128, (0, 2)), smem_plan.Item("unused", 4096, 128, smem_plan.UNUSED),
             smem_plan.Item("b", 500, 128, (1, 2))]
    offsets, total = smem_plan.place(items)
    assert offsets["a"] == 0 and offsets["b"] == 1024
    assert total == 1524
    assert smem_plan.aliases(items, offsets) == {}
    # plan(): a buffer live_ranges never saw is unused
    a, unused = object(), object()
    assert smem_plan.plan(None, {a: 256, unused: 4096}, live={a: (0, 1)})[1] == 256
    # an unknown lifetime (None) still overlaps everything
    items[1] = smem_plan.Item("unknown", 4096, 128, None)
    assert smem_plan.place(items) == ({"a": 0, "unknown": 1024, "b": 5120}, 5620)


def test_disabled_reuse_still_gives_every_buffer_its_own_bytes():
    a, b = object(), object()
    offsets, total, alias = smem_plan.plan(None, {a: 256, b: 256}, reuse=False)
    assert (offsets[a], offsets[b], total, alias) == (0, 256, 512, {})


def gemm_with_optional_bias(with_bias, M=256, N=256, K=256, block_M=256, block_N=128, block_K=128):
    """The dequantize example's shape of kernel: a bias tile declared, used only with a bias."""
    @T.prim_func
    def kernel(A: T.Tensor((M, K), "bfloat16"), B: T.Tensor((N, K), "bfloat16"),
               Bias: T.Tensor((M, N), "bfloat16"), C: T.Tensor((M, N), "bfloat16")):
        with T.Kernel(N // block_N, M // block_M, threads=256) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), "bfloat16")
            B_s = T.alloc_shared((block_N, block_K), "bfloat16")
            Bias_s = T.alloc_shared((block_M, block_N), "bfloat16")
            C_l = T.alloc_fragment((block_M, block_N), "float32")
            C_s = T.alloc_shared((block_M, block_N), "bfloat16")
            if with_bias:
                T.copy(Bias[by * block_M, bx * block_N], Bias_s)
                T.copy(Bias_s, C_l)
            else:
                T.clear(C_l)
            for k in T.Pipelined(K // block_K, num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[bx * block_N, k * block_K], B_s)
                T.gemm(A_s, B_s, C_l, transpose_B=True)
            T.copy(C_l, C_s)
            T.copy(C_s, C[by * block_M, bx * block_N])

    return kernel


def test_an_unused_bias_tile_does_not_push_the_kernel_over_the_budget():
    # A 2 x 64 KiB + B 2 x 32 KiB = 192 KiB staged, C on A's bytes: the bias tile's 64 KiB would
    # make it 256 KiB, over sm_90a's 227, but only where the kernel uses it
    plain = tilelang.compile(gemm_with_optional_bias(False), target="cuda -arch=sm_90a")
    assert 192 * 1024 <= plain.artifact.dynamic_smem < 193 * 1024   # (+ the pipeline's mbarriers)
    with pytest.raises(Exception, match="TL0501"):
        tilelang.compile(gemm_with_optional_bias(True), target="cuda -arch=sm_90a")


def attention_rows(dim, block_H=64, block_N=64, pe_dim=64, seqlen=1024):
    """MLA decoding's shape of kernel (upstream's example_mla_decode, no split): rows spread over
    eight warps (FullCol), so the softmax's max and sum cross warps for eight rows at a time."""
    scale = 0.0625

    @T.prim_func
    def kernel(Q: T.Tensor((1, block_H, dim), "float16"), Q_pe: T.Tensor((1, block_H, pe_dim), "float16"),
               KV: T.Tensor((1, seqlen, dim), "float16"), K_pe: T.Tensor((1, seqlen, pe_dim), "float16"),
               Output: T.Tensor((1, block_H, dim), "float16")):
        with T.Kernel(1, 1, threads=256) as (hid, bid):
            Q_s = T.alloc_shared((block_H, dim), "float16")
            S_s = T.alloc_shared((block_H, block_N), "float16")
            Q_pe_s = T.alloc_shared((block_H, pe_dim), "float16")
            KV_s = T.alloc_shared((block_N, dim), "float16")
            K_pe_s = T.alloc_shared((block_N, pe_dim), "float16")
            O_s = T.alloc_shared((block_H, dim), "float16")
            acc_s = T.alloc_fragment((block_H, block_N), "float32")
            acc_o = T.alloc_fragment((block_H, dim), "float32")
            m = T.alloc_fragment((block_H,), "float32")
            m_prev = T.alloc_fragment((block_H,), "float32")
            alpha = T.alloc_fragment((block_H,), "float32")
            row_sum = T.alloc_fragment((block_H,), "float32")
            denom = T.alloc_fragment((block_H,), "float32")
            T.copy(Q[bid, 0, 0], Q_s)
            T.copy(Q_pe[bid, 0, 0], Q_pe_s)
            T.fill(acc_o, 0)
            T.fill(denom, 0)
            T.fill(m, -T.infinity("float32"))
            for k in T.Pipelined(seqlen // block_N, num_stages=2):
                T.copy(KV[bid, k * block_N, 0], KV_s)
                T.copy(K_pe[bid, k * block_N, 0], K_pe_s)
                T.gemm(Q_s, KV_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullCol, clear_accum=True)
                T.gemm(Q_pe_s, K_pe_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullCol)
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for i in T.Parallel(block_H):
                    alpha[i] = T.exp2((m_prev[i] - m[i]) * scale)
                for i, j in T.Parallel(block_H, block_N):
                    acc_s[i, j] = T.exp2((acc_s[i, j] - m[i]) * scale)
                T.reduce_sum(acc_s, row_sum, dim=1)
                T.copy(acc_s, S_s)
                for i in T.Parallel(block_H):
                    denom[i] = denom[i] * alpha[i] + row_sum[i]
                for i, j in T.Parallel(block_H, dim):
                    acc_o[i, j] *= alpha[i]
                T.gemm(S_s, KV_s, acc_o, policy=T.GemmWarpPolicy.FullCol)
            for i, j in T.Parallel(block_H, dim):
                acc_o[i, j] /= denom[i]
            T.copy(acc_o, O_s)
            T.copy(O_s, Output[bid, 0, 0])

    return kernel


def _workspace_stores(src):
    """The cross-warp exchanges' stores into shared memory: (register index, under a barrier loop)."""
    return re.findall(r"\(\(float\*\)smem\)\[\(\(\(?int\)threadIdx\.x\)[^\]]*\] = (\w+)\[(\w+)\];", src)


def test_mla_decoding_fits_by_exchanging_one_row_at_a_time():
    # Q 64 + S 8 + Q_pe 8 + KV 2 x 64 + K_pe 2 x 8 = 224 KiB (O on Q's bytes): two batched
    # 8 KiB workspaces would make it 240 KiB, two 1 KiB ones make it 226 KiB.
    k = tilelang.compile(attention_rows(512), target="cuda -arch=sm_90a", pass_configs=MMA_SYNC)
    assert k.artifact.dynamic_smem == 224 * 1024 + 2 * 256 * 4
    assert k.artifact.dynamic_smem <= BUDGET
    src = k.get_kernel_source()
    # each row: a barrier, the store, a barrier, the reads, inside the per-row loop
    per_row = re.findall(r"for \(int (u_\d+) = 0; u_\d+ < 8; \+\+u_\d+\) \{\s*__syncthreads\(\);\s*"
                         r"\(\(float\*\)smem\)\[\(\(\(int\)threadIdx\.x\) \+ \d+\)\] = \w+\[\1\];\s*__syncthreads\(\);",
                         src)
    assert len(per_row) == 2


def test_a_kernel_with_room_keeps_the_batched_exchange():
    # dim 256: 128 KiB of tiles; the two 8 KiB workspaces fit, one exchange of eight rows each
    k = tilelang.compile(attention_rows(256), target="cuda -arch=sm_90a", pass_configs=MMA_SYNC)
    assert k.artifact.dynamic_smem == 128 * 1024 + 2 * 8 * 1024
    src = k.get_kernel_source()
    assert re.search(r"\(\(float\*\)smem\)\[\(\(\(u\w* \* 256\) \+ \(\(int\)threadIdx\.x\)\) \+ \d+\)\]", src)


def test_the_budget_follows_the_target():
    # on sm_80 (163 KiB a block) the 128 KiB kernel has room for the batched workspaces too;
    # a dim of 384 (176 KiB of tiles) does not fit sm_80 at all, whatever the workspaces
    k = tilelang.compile(attention_rows(256), target="cuda -arch=sm_80")
    assert k.artifact.dynamic_smem == 128 * 1024 + 2 * 8 * 1024


def gemm_with_column_sums(pad, M=1024, N=1024, K=1024, bM=128, bN=256, bK=64):
    """A wgmma GEMM whose epilogue copy of the accumulator is staged through shared memory (when
    it fits), a column sum across warps, and a ``pad``-element tile live throughout to bring the
    kernel to the edge of the budget."""
    @T.prim_func
    def kernel(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16"),
               R: T.Tensor((N,), "float32"), X: T.Tensor((pad,), "float16"), Y: T.Tensor((pad,), "float16")):
        with T.Kernel(N // bN, M // bM, threads=256) as (bx, by):
            A_s = T.alloc_shared((bM, bK), "float16")
            B_s = T.alloc_shared((bK, bN), "float16")
            Pad = T.alloc_shared((pad,), "float16")
            C_l = T.alloc_fragment((bM, bN), "float32")
            col = T.alloc_fragment((bN,), "float32")
            T.copy(X[0:pad], Pad)
            T.clear(C_l)
            for k in T.Pipelined(K // bK, num_stages=1):
                T.copy(A[by * bM, k * bK], A_s)
                T.copy(B[k * bK, bx * bN], B_s)
                T.gemm(A_s, B_s, C_l)
            T.reduce_sum(C_l, col, dim=0)
            T.copy(col, R[bx * bN:(bx + 1) * bN])
            T.copy(C_l, C[by * bM, bx * bN])
            T.copy(Pad, Y[0:pad])

    return kernel


def test_the_epilogue_is_staged_only_where_the_lowered_kernel_still_fits():
    # 58336 halves: the staged epilogue (64 KiB of stage) and a 1 KiB column-sum workspace fill
    # the 227 KiB exactly; the epilogue goes out through TMA from its shared-memory stage
    staged = tilelang.compile(gemm_with_column_sums(58336), target="cuda -arch=sm_90a")
    assert staged.artifact.dynamic_smem == BUDGET
    assert staged.artifact.tensormaps and "tl::tma_store_2d" in staged.get_kernel_source()
    # 128 bytes more: staged, the workspace would take it over; as written (no stage) it fits,
    # even with the column sums' batched 64 KiB workspace
    plain = tilelang.compile(gemm_with_column_sums(58400), target="cuda -arch=sm_90a")
    assert plain.artifact.dynamic_smem <= BUDGET
    assert not plain.artifact.tensormaps and "tl::tma_store_2d" not in plain.get_kernel_source()
