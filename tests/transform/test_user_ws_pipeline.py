"""``T.Pipelined(n, num_stages=S)`` loops whose body is user-written warp specialisation (``T.ws``
blocks ordered by ``T.alloc_barrier`` mbarriers, ``T.tma_copy`` loads): the tiles both roles
touch and every barrier of the loop get S copies selected by ``ko % S``, each wait's parity
counts the uses of its copy (``f(ko)`` -> ``f(ko // S)``), and loops that do not fit run as
written (``user_ws.pipeline_roles``). Upstream's example_warp_specialize_gemm_softpipe_stage2 /
_copy_1_gemm_0. CPU: IR, generated source, nvcc."""

from __future__ import annotations

import shutil

import pytest

import tilelang
import tilelang.language as T
from tilelang.engine.lower import lower
from tilelang.transform import user_ws
from tilelang.transform.kernel import analyze_kernel

SM90 = "sm_90a"


def _gemm(stages, M=256, N=256, K=512, bm=128, bn=128, bk=64, start=0, variant=None):
    """The softpipe example's kernel (``variant`` breaks one of the staging conditions)."""

    @T.prim_func
    def k(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=256) as (bx, by):
            A_shared = T.alloc_shared((bm, bk), T.float16)
            B_shared = T.alloc_shared((bk, bn), T.float16)
            C_local = T.alloc_fragment((bm, bn), T.float32)
            data_is_ready = T.alloc_barrier(arrive_count=128)
            compute_is_done = T.alloc_barrier(arrive_count=128)
            with T.ws(0):
                T.clear(C_local)
            for ko in T.Pipelined(start, T.ceildiv(K, bk), num_stages=stages):
                with T.ws(1):
                    if variant == "constant_parity":
                        T.barrier_wait(compute_is_done, 1)
                    elif start:
                        T.barrier_wait(compute_is_done, (ko - start + 1) % 2)
                    else:
                        T.barrier_wait(compute_is_done, (ko + 1) % 2)
                    T.tma_copy(A[by * bm, ko * bk], A_shared, barrier=data_is_ready)
                    T.tma_copy(B[ko * bk, bx * bn], B_shared, barrier=data_is_ready)
                    T.barrier_arrive(data_is_ready)
                with T.ws(0):
                    T.barrier_wait(data_is_ready, (ko - start) % 2 if start else ko % 2)
                    T.gemm(A_shared, B_shared, C_local)
                    T.barrier_arrive(compute_is_done)
            with T.ws(0):
                if variant == "wait_after_loop":
                    T.barrier_wait(compute_is_done, 0)
                T.copy(C_local, C[by * bm, bx * bn])

    return k


def _src(func):
    src = lower(func, target=SM90).source
    return src[src.index("__global__ void __launch_bounds__"):]


def _plan(func):
    info = user_ws.apply(analyze_kernel(func), SM90)
    return [p for _, p in info.user_ws_pipeline]


def test_two_stages_double_buffer_tiles_and_barriers():
    src = _src(_gemm(2))
    # two copies of each barrier, every one initialised
    assert src.count("tl::mbarrier_init(") == 4
    # A_shared (8192 halves a stage) and B_shared (after A's two stages) at stage ko % 2
    assert "tl::tma_load_2d((&(((half*)smem)[((ko & 1) * 8192)])), TL_TMAP(0)" in src
    assert "tl::tma_load_2d((&(((half*)smem)[(((ko & 1) * 8192) + 16384)])), TL_TMAP(1)" in src
    assert ("tl::wgmma_gemm_ss<128, 128, 64, 1, false, false, false>((&(((half*)smem)[((ko & 1) * 8192)])), "
            "(&(((half*)smem)[(((ko & 1) * 8192) + 16384)]))") in src
    # the barriers follow the tiles, side by side: data_is_ready at 8192 + ko % 2, compute_is_done at 8194 + ko % 2
    assert "tl::mbarrier_init((&(((uint64_t*)smem)[8193])), 128);" in src
    assert "tl::mbarrier_init((&(((uint64_t*)smem)[8195])), 128);" in src
    # the producer waits for the consumer of iteration ko - 2: the parity of its use count ko // 2
    assert "tl::mbarrier_wait((&(((uint64_t*)smem)[((ko & 1) + 8194)])), (((ko >> 1) + 1) & 1));" in src
    # the consumer waits for the tile of iteration ko: phase ko // 2 of copy ko % 2
    assert "tl::mbarrier_wait((&(((uint64_t*)smem)[((ko & 1) + 8192)])), ((ko & 3) >> 1));" in src
    assert "tl::mbarrier_expect_tx((&(((uint64_t*)smem)[((ko & 1) + 8192)])), 16384);" in src
    assert "tl::mbarrier_arrive((&(((uint64_t*)smem)[((ko & 1) + 8192)])));" in src
    assert "tl::mbarrier_arrive((&(((uint64_t*)smem)[((ko & 1) + 8194)])));" in src
    assert _plan(_gemm(2)) == [2]


def test_three_stages():
    src = _src(_gemm(3))
    assert src.count("tl::mbarrier_init(") == 6
    assert "((ko % 3) * 8192)" in src
    # parities of the use count ko // 3
    assert "tl::mbarrier_wait((&(((uint64_t*)smem)[((ko % 3) + 12291)])), (((ko / 3) + 1) & 1));" in src
    assert "tl::mbarrier_wait((&(((uint64_t*)smem)[((ko % 3) + 12288)])), ((ko % 6) / 3));" in src
    assert "(((ko % 3) * 8192) + 24576)" in src      # B_shared after A_shared's three stages
    assert _plan(_gemm(3)) == [3]


def test_loop_not_starting_at_zero_counts_uses_from_its_start():
    src = _src(_gemm(2, start=1))
    # copy (ko - 1) % 2; the user's parities f(ko) = (ko - 1 + 1) % 2 and (ko - 1) % 2 at the use
    # count 1 + (ko - 1) // 2
    assert "tl::mbarrier_wait((&(((uint64_t*)smem)[(((ko + 1) & 1) + 8194)])), ((((ko - 1) >> 1) + 1) & 1));" in src
    # ((ko - 1) // 2) % 2:
    assert "tl::mbarrier_wait((&(((uint64_t*)smem)[(((ko + 1) & 1) + 8192)])), (((ko + 3) & 3) >> 1));" in src
    assert _plan(_gemm(2, start=1)) == [2]


@pytest.mark.parametrize("stages", [0, 1])
def test_zero_or_one_stage_runs_as_written(stages):
    src = _src(_gemm(stages))
    assert src.count("tl::mbarrier_init(") == 2
    assert "ko & 1) * 8192" not in src
    assert "tl::mbarrier_wait((&(((uint64_t*)smem)[4097])), ((ko + 1) & 1));" in src
    assert _plan(_gemm(stages)) == []


@pytest.mark.parametrize("variant, why", [
    ("wait_after_loop", "'compute_is_done' is also used outside the loop"),
    ("constant_parity", "not an expression of the loop variable"),
])
def test_loops_that_do_not_fit_run_as_written(variant, why):
    plan = _plan(_gemm(2, variant=variant))
    assert len(plan) == 1 and why in plan[0]
    # the same CUDA as the loop without stages
    assert _src(_gemm(2, variant=variant)) == _src(_gemm(0, variant=variant))


def test_stages_over_shared_memory_run_as_written():
    big = dict(M=256, N=256, K=1024, bk=256)       # 128 KiB of tiles a stage
    plan = _plan(_gemm(2, **big))
    assert len(plan) == 1 and "bytes of shared memory" in plan[0]
    assert _src(_gemm(2, **big)) == _src(_gemm(0, **big))


def _hand_staged(stages):
    """upstream's example_warp_specialize_gemm_barrierpipe_stage2 body in a T.Pipelined loop: the
    user indexes stages and barriers by ko % 2 already."""
    M = N = K = 256

    @T.prim_func
    def k(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float16)):
        with T.Kernel(2, 2, threads=256) as (bx, by):
            A_shared = T.alloc_shared((2, 128, 64), T.float16)
            B_shared = T.alloc_shared((2, 64, 128), T.float16)
            C_local = T.alloc_fragment((128, 128), T.float32)
            mbars = T.alloc_barrier([128] * 4)
            with T.ws(0):
                T.clear(C_local)
            for ko in T.Pipelined(K // 64, num_stages=stages):
                with T.ws(1):
                    T.mbarrier_wait_parity(mbars[ko % 2 + 2], ((ko // 2) % 2) ^ 1)
                    T.tma_copy(A[by * 128:(by + 1) * 128, ko * 64:(ko + 1) * 64], A_shared[ko % 2, :, :],
                               barrier=mbars[ko % 2])
                    T.tma_copy(B[ko * 64:(ko + 1) * 64, bx * 128:(bx + 1) * 128], B_shared[ko % 2, :, :],
                               barrier=mbars[ko % 2])
                    T.mbarrier_arrive(mbars[ko % 2])
                with T.ws(0):
                    T.mbarrier_wait_parity(mbars[ko % 2], (ko // 2) % 2)
                    T.gemm(A_shared[ko % 2, :, :], B_shared[ko % 2, :, :], C_local)
                    T.mbarrier_arrive(mbars[ko % 2 + 2])
            with T.ws(0):
                T.copy(C_local, C[by * 128, bx * 128])

    return k


def test_hand_staged_loop_runs_as_written():
    plan = _plan(_hand_staged(2))
    assert len(plan) == 1 and "indexed by the loop variable" in plan[0]
    assert _src(_hand_staged(2)) == _src(_hand_staged(0))


def test_loop_inside_another_loop_runs_as_written():
    @T.prim_func
    def k(A: T.Tensor((4, 512, 64), T.float16), C: T.Tensor((4, 64), T.float32)):
        with T.Kernel(1, threads=256):
            A_shared = T.alloc_shared((64, 64), T.float16)
            acc = T.alloc_fragment((64,), T.float32)
            ready = T.alloc_barrier(arrive_count=128)
            done = T.alloc_barrier(arrive_count=128)
            for t in T.serial(4):
                for ko in T.Pipelined(8, num_stages=2):
                    with T.ws(1):
                        T.barrier_wait(done, (t * 8 + ko + 1) % 2)
                        T.tma_copy(A[t, ko * 64, 0], A_shared, barrier=ready)
                        T.barrier_arrive(ready)
                    with T.ws(0):
                        T.barrier_wait(ready, (t * 8 + ko) % 2)
                        T.reduce_sum(A_shared, acc, dim=0)
                        T.barrier_arrive(done)
                with T.ws(0):
                    T.copy(acc, C[t, 0])

    plan = _plan(k)
    assert plan == ["the loop is inside another loop"]


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
@pytest.mark.parametrize("stages", [2, 3])
def test_nvcc_accepts_staged_loop(stages):
    from tilelang.jit import nvcc

    src = lower(_gemm(stages), target=SM90).source
    info = next(iter(nvcc.ptxas_info(src, "sm_90a", ["--use_fast_math"]).values()))
    assert info.spill_stores == 0 and info.spill_loads == 0


def test_upstream_softpipe_example_shape():
    """The example's own sizes (4096 cube, 128 x 128 x 64 tiles): 64 iterations over two stages."""
    func = _gemm(2, M=4096, N=4096, K=4096)
    kernel = tilelang.compile(func, target="cuda -arch=sm_90a")
    src = kernel.get_kernel_source()
    assert "for (int ko = 0; ko < 64; ++ko)" in src
    assert src.count("tl::mbarrier_init(") == 4


def _per_slice_barriers(stages):
    """Barrier arrays indexed by an inner unrolled loop (upstream's flashmla style), and a shared
    tile only the consumer touches."""

    @T.prim_func
    def k(A: T.Tensor((512, 64), T.float16), C: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=256):
            A_shared = T.alloc_shared((64, 64), T.float16)
            P_shared = T.alloc_shared((64,), T.float32)
            acc = T.alloc_fragment((64,), T.float32)
            part = T.alloc_fragment((64,), T.float32)
            ready = T.alloc_barrier(arrive_count=[128, 128])
            done = T.alloc_barrier(arrive_count=128)
            with T.ws(0):
                T.clear(acc)
            for ko in T.Pipelined(8, num_stages=stages):
                with T.ws(1):
                    T.barrier_wait(done, (ko + 1) % 2)
                    for j in T.unroll(2):
                        T.tma_copy(A[ko * 64, j * 32], A_shared[:, j * 32:(j + 1) * 32], barrier=ready[j])
                        T.barrier_arrive(ready[j])
                with T.ws(0):
                    for j in T.unroll(2):
                        T.barrier_wait(ready[j], ko % 2)
                    T.reduce_sum(A_shared, part, dim=0)
                    T.copy(part, P_shared)
                    T.copy(P_shared, part)
                    T.barrier_arrive(done)
                    for i in T.Parallel(64):
                        acc[i] += part[i]
            with T.ws(0):
                T.copy(acc, C)

    return k


def test_barrier_arrays_indexed_by_an_inner_loop_and_private_tiles():
    func = _per_slice_barriers(2)
    info = user_ws.apply(analyze_kernel(func), SM90)
    assert [p for _, p in info.user_ws_pipeline] == [2]
    # P_shared is the consumer's own: one copy
    assert sorted(b.name for b in user_ws.staged_copies(info.body)) == ["A_shared", "done", "ready"]
    src = _src(func)
    assert src.count("tl::mbarrier_init(") == 6
    # ready[j] of stage ko % 2 is element 2 * (ko % 2) + j
    assert "tl::mbarrier_wait((&(((uint64_t*)smem)[((((ko & 1) * 2) + j_1) + 2080)])), ((ko & 3) >> 1));" in src



def test_view_of_a_loop_tile_follows_its_stage():
    """A T.view of the tile the producer fills, read by the consumer: the kernel analysis reads
    the view as its tile (a view still there would keep the loop as written:
    ``pipeline_roles``), so the consumer reads the stage the producer filled."""

    def make(stages):
        @T.prim_func
        def k(A: T.Tensor((512, 64), T.float16), C: T.Tensor((64,), T.float32)):
            with T.Kernel(1, threads=256):
                A_tile = T.alloc_shared((64, 64), T.float16)
                A_flat = T.view(A_tile, (64 * 64,))
                acc = T.alloc_fragment((64,), T.float32)
                ready = T.alloc_barrier(arrive_count=128)
                done = T.alloc_barrier(arrive_count=128)
                with T.ws(0):
                    T.clear(acc)
                for ko in T.Pipelined(8, num_stages=stages):
                    with T.ws(1):
                        T.barrier_wait(done, (ko + 1) % 2)
                        T.copy(A[ko * 64, 0], A_tile)
                        T.barrier_arrive(ready)
                    with T.ws(0):
                        T.barrier_wait(ready, ko % 2)
                        for i in T.Parallel(64):
                            acc[i] += A_flat[i * 64]
                        T.barrier_arrive(done)
                with T.ws(0):
                    T.copy(acc, C)

        return k

    assert _plan(make(2)) == [2]
    src = _src(make(2))
    assert "tl::copy_vec<16>((&(((half*)smem)[(((((ko & 1) * 4096) + (it * 1024))" in src
    assert "acc[v_1] = (acc[v_1] + ((float)((half*)smem)[((((ko & 1) * 4096) + " in src
