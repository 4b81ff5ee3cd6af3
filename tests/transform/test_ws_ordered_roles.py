"""Two computing T.ws roles ordered by the user's mbarriers (FlashAttention-3's ping-pong form, as
TileOPs writes its GQA prefill): a producer warp under a plain ``if`` issues ``T.tma_copy`` loads
into stages it indexes by hand (``Ks[k % 2, :, :]``), and two consumer warp groups, each a
``T.ws`` block of its own, compute on fragments of their own (``user_ws._as_thread_branches``
with ``ROLE_ATTR``). The barrier planner leaves the roles to the user's mbarriers (no block
barrier between the producer and the consumers, which would deadlock), each role is laid out
for its own 128 threads, and the stage loads are TMA boxes. CPU only; the GPU test runs it."""

import re

import tilelang
import tilelang.language as T
from tilelang.layout import make_swizzled_layout

TARGET = "cuda -arch=sm_90a"


def two_role_attention(B=1, H=2, S=512, D=128, block_M=128, block_N=128, stages=2, dtype="float16"):
    """softmax(Q K^T / sqrt(D)) V over [B, S, H, D]: rows [0, 64) of each block in warp group 0,
    rows [64, 128) in warp group 1, K and V staged by warp 8 through mbarriers."""
    half = block_M // 2
    scale = (1.0 / D) ** 0.5 * 1.44269504
    accum = "float"
    n = S // block_N

    @T.macro
    def consumer(Q_s, K_s, V_s, O_s, O, q_bar, kready, kfree, vready, vfree, g, bx, by, bz):
        with T.ws(g):
            acc_s = T.alloc_fragment((half, block_N), accum)
            acc_s_cast = T.alloc_fragment((half, block_N), dtype)
            acc_o = T.alloc_fragment((half, D), accum)
            m = T.alloc_fragment((half,), accum)
            m_prev = T.alloc_fragment((half,), accum)
            sc = T.alloc_fragment((half,), accum)
            s_sum = T.alloc_fragment((half,), accum)
            lse = T.alloc_fragment((half,), accum)
            T.fill(acc_o, 0)
            T.fill(lse, 0)
            T.fill(m, -T.infinity(accum))
            T.mbarrier_wait_parity(q_bar, 0)
            for k in T.serial(n):
                s = k % stages
                T.mbarrier_wait_parity(kready[s], (k // stages) % 2)
                T.gemm(Q_s[g, :, :], K_s[s, :, :], acc_s, transpose_B=True, clear_accum=True)
                T.mbarrier_arrive(kfree[s])
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for i in T.Parallel(half):
                    sc[i] = T.exp2(m_prev[i] * scale - m[i] * scale)
                for i, j in T.Parallel(half, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m[i] * scale)
                T.reduce_sum(acc_s, s_sum, dim=1)
                for i in T.Parallel(half):
                    lse[i] = lse[i] * sc[i] + s_sum[i]
                for i, j in T.Parallel(half, D):
                    acc_o[i, j] *= sc[i]
                T.copy(acc_s, acc_s_cast)
                T.mbarrier_wait_parity(vready[s], (k // stages) % 2)
                T.gemm(acc_s_cast, V_s[s, :, :], acc_o)
                T.mbarrier_arrive(vfree[s])
            for i, j in T.Parallel(half, D):
                acc_o[i, j] /= lse[i]
            T.copy(acc_o, O_s[g, :, :])
            T.copy(O_s[g, :, :], O[bz, bx * block_M + g * half:bx * block_M + (g + 1) * half, by, :])

    @T.prim_func
    def main(Q: T.Tensor((B, S, H, D), dtype), K: T.Tensor((B, S, H, D), dtype),
             V: T.Tensor((B, S, H, D), dtype), O: T.Tensor((B, S, H, D), dtype)):
        with T.Kernel(S // block_M, H, B, threads=384) as (bx, by, bz):
            Q_s = T.alloc_shared((2, half, D), dtype)
            K_s = T.alloc_shared((stages, block_N, D), dtype)
            V_s = T.alloc_shared((stages, block_N, D), dtype)
            O_s = T.alloc_shared((2, half, D), dtype)
            T.annotate_layout({Q_s: make_swizzled_layout(Q_s), K_s: make_swizzled_layout(K_s),
                               V_s: make_swizzled_layout(V_s)})
            q_bar = T.alloc_barrier([32])
            kready = T.alloc_barrier([32] * stages)
            kfree = T.alloc_barrier([256] * stages)
            vready = T.alloc_barrier([32] * stages)
            vfree = T.alloc_barrier([256] * stages)
            tx = T.get_thread_binding()
            if tx >= 256 and tx < 288:
                T.tma_copy(Q[bz, bx * block_M:bx * block_M + half, by, :], Q_s[0, :, :], barrier=q_bar)
                T.tma_copy(Q[bz, bx * block_M + half:(bx + 1) * block_M, by, :], Q_s[1, :, :], barrier=q_bar)
                T.mbarrier_arrive(q_bar)
                for k in T.serial(n):
                    s = k % stages
                    T.mbarrier_wait_parity(kfree[s], ((k // stages) % 2) ^ 1)
                    T.tma_copy(K[bz, k * block_N:(k + 1) * block_N, by, :], K_s[s, :, :], barrier=kready[s])
                    T.mbarrier_arrive(kready[s])
                    T.mbarrier_wait_parity(vfree[s], ((k // stages) % 2) ^ 1)
                    T.tma_copy(V[bz, k * block_N:(k + 1) * block_N, by, :], V_s[s, :, :], barrier=vready[s])
                    T.mbarrier_arrive(vready[s])
            consumer(Q_s, K_s, V_s, O_s, O, q_bar, kready, kfree, vready, vfree, 0, bx, by, bz)
            consumer(Q_s, K_s, V_s, O_s, O, q_bar, kready, kfree, vready, vfree, 1, bx, by, bz)

    return main


def _source():
    return tilelang.compile(two_role_attention(), out_idx=[3], target=TARGET).get_kernel_source()


def test_the_roles_meet_only_at_the_users_mbarriers():
    src = _source()
    body = src[src.index("if ((256 <= ((int)threadIdx.x))"):]
    assert "__syncthreads" not in body        # (only after the barriers' initialisation)
    # the five T.alloc_barrier calls initialise their nine barriers together and meet once
    assert src.count("tl::fence_barrier_init();") == 1 and src.count("__syncthreads();") == 1
    assert "if (((int)threadIdx.x) < 128) {" in body
    assert "if ((128 <= ((int)threadIdx.x)) && (((int)threadIdx.x) < 256)) {" in body


def test_the_stage_loads_are_tma_boxes():
    src = _source()
    # Q's two halves and one K and one V stage a trip, two 64-column slabs each
    assert src.count("tl::tma_load_4d") == 8
    assert "cp_async" not in src and "copy_vec<16>((&(((half*)smem)" not in src.split("tma_load_4d")[1]
    assert src.count("tl::mbarrier_expect_tx") == 4


def test_each_role_is_laid_out_for_its_own_threads():
    src = _source()
    second = src[src.index("if ((128 <= ((int)threadIdx.x)) && (((int)threadIdx.x) < 256))"):]
    # each role copies its 64 x 128 output tile out with its own 128 threads: 8 vectors a thread
    assert len(re.findall(r"for \(int it_?\d* = 0; it_?\d* < 8;", second)) == 1
    assert len(re.findall(r"for \(int it_?\d* = 0; it_?\d* < 8;", src)) == 2
    # the barriers the compiler adds inside a role are named barriers over its 128 threads, with
    # ids clear of the ones the user may name (1, 2)
    found = re.findall(r"named_barrier_sync\((\d+), (\d+)\)", src)
    assert len(found) == 2 and all(int(bid) >= 3 and count == "128" for bid, count in found)


def test_a_load_behind_an_mbarrier_waits_for_earlier_readers_of_its_tile():
    """The tile is read by every thread, then reloaded by T.tma_copy: the reload waits at a block
    barrier for the readers (write-after-read); the read after it waits on the user's mbarrier
    only, and a second load into the other half of the tile needs no barrier."""
    @T.prim_func
    def k(A: T.Tensor((128, 64), "float16"), B: T.Tensor((32, 64), "float16"), C: T.Tensor((32, 64), "float16")):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((2, 32, 64), "float16")
            f = T.alloc_fragment((32, 64), "float16")
            g = T.alloc_fragment((32, 64), "float16")
            bar = T.alloc_barrier([128])
            T.copy(A[0:32, :], s[0, :, :])
            T.copy(s[0, :, :], f)
            T.tma_copy(A[64:96, :], s[0, :, :], barrier=bar)
            T.tma_copy(A[96:128, :], s[1, :, :], barrier=bar)
            T.mbarrier_arrive(bar)
            T.mbarrier_wait_parity(bar, 0)
            T.copy(s[1, :, :], g)
            T.copy(f, B)
            T.copy(g, C)

    src = tilelang.compile(k, target=TARGET).get_kernel_source()
    body = src[src.index("tl::fence_barrier_init"):]
    body = body[body.index("__syncthreads();") + 1:]
    arrive = body.index("tl::mbarrier_arrive")
    between = body[:arrive]
    # copy in, barrier (s read by others), read into f, barrier (the reload overwrites it), two loads
    assert between.count("__syncthreads();") + between.count("named_barrier_sync") == 2, between
    assert "__syncthreads" not in body[arrive:]
