"""User ``T.ws`` blocks on different warp groups, each computing on fragments of its own
(upstream's example_warp_specialize_gemm_copy_gemm_0_1): every block is a thread region laid out
for its own 128 threads (CPU: generated source, nvcc-free)."""

import tilelang
import tilelang.language as T

SM90 = "cuda -arch=sm_90a"


def _two_role_gemm(M=128, N=128, K=64, bk=64):
    half = N // 2

    @T.prim_func
    def k(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float16)):
        with T.Kernel(1, 1, threads=256):
            a_s = T.alloc_shared((M, bk), T.float16)
            b0 = T.alloc_shared((bk, half), T.float16)
            b1 = T.alloc_shared((bk, half), T.float16)
            c0 = T.alloc_fragment((M, half), T.float32)
            c1 = T.alloc_fragment((M, half), T.float32)
            with T.ws(1):
                T.clear(c1)
            with T.ws(0):
                T.clear(c0)
            for ko in T.Pipelined(K // bk, num_stages=0):
                T.copy(A[0, ko * bk], a_s)
                with T.ws(1):
                    T.copy(B[ko * bk, 0], b1)
                    T.gemm(a_s, b1, c1)
                with T.ws(0):
                    T.copy(B[ko * bk, half], b0)
                    T.gemm(a_s, b0, c0)
            with T.ws(1):
                T.copy(c1, C[0, 0])
            with T.ws(0):
                T.copy(c0, C[0, half])

    return k


def test_two_computing_roles_compile_with_own_layouts():
    src = tilelang.compile(_two_role_gemm(), target=SM90).get_kernel_source()
    assert src.count("if (128 <= ((int)threadIdx.x)) {") == 3
    assert src.count("if (((int)threadIdx.x) < 128) {") == 3
    # each role runs its own 128-thread wgmma over the whole 128-row tile
    assert src.count("tl::wgmma_gemm_ss<128, 64, 64, 1,") == 2
    # the copy into the role's shared tile is ordered before its gemm by a barrier of its threads
    assert "tl::named_barrier_sync(3, 128);" in src and "tl::named_barrier_sync(4, 128);" in src
    # the shared A tile, copied by all 256 threads, is published to both roles
    assert "__syncthreads();" in src
    # warp group 1 indexes its fragment by its own thread index (tx - 128)
    assert "(((int)threadIdx.x) & 127) >> 5) * 2048)" in src


def test_two_computing_roles_with_user_mbarriers_are_left_to_them():
    """Roles ordered by the user's mbarriers (session 43; TL0002 before): each is a thread region
    of its own 128 threads, and no block barrier goes between them (role 1 waits on the barrier
    role 0 arrives on; a __syncthreads() between would be met by neither in time)."""
    @T.prim_func
    def k(A: T.Tensor((256,), T.float32)):
        with T.Kernel(1, threads=256):
            f0 = T.alloc_fragment((128,), T.float32)
            f1 = T.alloc_fragment((128,), T.float32)
            bars = T.alloc_barrier([128])
            with T.ws(0):
                T.fill(f0, 1.0)
                T.barrier_arrive(bars[0])
                T.copy(f0, A[0:128])
            with T.ws(1):
                T.mbarrier_wait_parity(bars[0], 0)
                T.fill(f1, 2.0)
                T.copy(f1, A[128:256])

    src = tilelang.compile(k, target=SM90).get_kernel_source()
    roles = src[src.index("tl::fence_barrier_init"):]
    roles = roles[roles.index("__syncthreads();") + len("__syncthreads();"):]
    assert "__syncthreads" not in roles
    assert roles.index("tl::mbarrier_arrive") < roles.index("tl::mbarrier_wait")
    assert "(((int)threadIdx.x) & 127)" in roles or "- 128)" in roles or "+ 128)" in roles


def test_thread_branches_of_one_range_share_a_fragment():
    """``if tx >= 128`` twice over one fragment: both branches are one region of 128 threads."""
    @T.prim_func
    def k(A: T.Tensor((128,), T.float32), B: T.Tensor((128,), T.float32)):
        with T.Kernel(1, threads=256):
            tx = T.get_thread_binding()
            f = T.alloc_fragment((128,), T.float32)
            g = T.alloc_fragment((128,), T.float32)
            if tx >= 128:
                T.copy(A, f)
            if tx < 128:
                T.copy(A, g)
            if tx >= 128:
                for i in T.Parallel(128):
                    f[i] = f[i] * 2.0
                T.copy(f, B)
            if tx < 128:
                T.copy(g, B)

    src = tilelang.compile(k, target=SM90).get_kernel_source()
    # laid out for the region's 128 threads (warp (tx - 128) / 32 == 0 stores it), not the block's 256
    assert "if (((((int)threadIdx.x) & 127) >> 5) == 0) {" in src
    assert src.count("if (128 <= ((int)threadIdx.x)) {") == 2


def two_wgmma_roles():
    """Two T.ws roles, each a 64x64x64 T.wgmma_gemm into its own accumulator, T.wait_wgmma, and
    the accumulator stored to its half of C."""
    @T.prim_func
    def k(A: T.Tensor((128, 64), T.float16), B: T.Tensor((64, 64), T.float16), C: T.Tensor((128, 64), T.float32)):
        with T.Kernel(1, threads=256):
            a0 = T.alloc_shared((64, 64), T.float16)
            a1 = T.alloc_shared((64, 64), T.float16)
            b_s = T.alloc_shared((64, 64), T.float16)
            T.copy(A[0:64, :], a0)
            T.copy(A[64:128, :], a1)
            T.copy(B, b_s)
            with T.ws(0):
                acc0 = T.alloc_fragment((64, 64), T.float32)
                T.wgmma_gemm(a0, b_s, acc0, clear_accum=True)
                T.wait_wgmma(0)
                T.copy(acc0, C[0:64, :])
            with T.ws(1):
                acc1 = T.alloc_fragment((64, 64), T.float32)
                T.wgmma_gemm(a1, b_s, acc1, clear_accum=True)
                T.wait_wgmma(0)
                T.copy(acc1, C[64:128, :])
    return k


def test_wait_wgmma_in_a_role_fences_its_own_accumulator():
    """T.wait_wgmma pins the accumulators of the gemms in flight; in a thread region only the
    region's own (the other role's fragment is not declared there: an internal error before)."""
    src = tilelang.compile(two_wgmma_roles(), target=SM90).get_kernel_source()
    first, second = src.split("tl::wait_wgmma<0>();")[1:3]
    assert "acc0" in first.split("}")[0] and "acc1" not in first.split("}")[0]
    assert "acc1" in second.split("}")[0] and "acc0" not in second.split("}")[0]
