"""User-written barriers, warp-group roles, PDL, grid sync, T.Persistent and the thread-extent
normalisation (CPU: generated source and errors)."""

import pytest

import tilelang
import tilelang.language as T
from tilelang.language.kernel import _normalize_threads


def _src(func, **kw):
    return tilelang.compile(func, **kw).get_kernel_source()


@pytest.mark.parametrize("threads", [-1, 0, [-1], [128, 0], (128, 1, -2)])
def test_normalize_threads_rejects(threads):
    with pytest.raises(ValueError, match="threads must be positive"):
        _normalize_threads(threads)


def test_normalize_threads_pads():
    assert _normalize_threads(None) == [128, 1, 1]
    assert _normalize_threads([32, 4]) == [32, 4, 1]


def test_named_barriers_and_pdl():
    @T.prim_func
    def k(A: T.Tensor((64,), T.float32), B: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding()
            T.pdl_sync()
            if tx < 32:
                T.named_barrier_arrive(10, 64)
            else:
                T.sync_threads(10, 64)
            B[tx] = A[tx]
            T.pdl_trigger()

    src = _src(k)
    assert "tl::__named_barrier_arrive(10, 64);" in src
    assert "tl::__sync_thread_partial(10, 64);" in src
    assert "cudaGridDependencySynchronize();" in src and "cudaTriggerProgrammaticLaunchCompletion();" in src
    assert "__restrict__" not in src     # loads must not move above the PDL wait


def test_launch_thread_inside_kernel_names_the_same_index():
    @T.prim_func
    def k():
        with T.Kernel(1, threads=256):
            tx = T.launch_thread("threadIdx.x", 256)
            T.sync_threads(tx % 4, 256)

    src = _src(k)
    assert "__launch_bounds__(256)" in src
    assert "tl::__sync_thread_partial((((int)threadIdx.x) & 3), 256);" in src

    @T.prim_func
    def bad():
        with T.Kernel(1, threads=256):
            tx = T.launch_thread("threadIdx.x", 128)
            T.sync_threads(tx % 4, 128)

    with pytest.raises(tilelang.TileLangCompileError, match="launch_thread"):
        _src(bad)


def test_sync_grid_one_element_per_thread():
    @T.prim_func
    def k(A: T.Tensor((1024,), T.float32)):
        with T.Kernel(16, threads=128) as bx:
            for i in T.Parallel(64):
                A[bx * 64 + i] = A[1023 - bx * 64 - i]
                T.sync_grid()

    src = _src(k)
    assert "#include <cooperative_groups.h>" in src
    assert "cooperative_groups::this_grid().sync();" in src
    assert "for (int v" not in src      # the barrier separates every element's phases


def test_persistent_visits_every_tile_once():
    @T.prim_func
    def k(V: T.Tensor((4, 9), T.int32)):
        with T.Kernel(3, threads=1) as b:
            for i, j in T.Persistent([4, 9], 3, b):
                V[i, j] += 1

    src = _src(k)
    assert "for (int v = 0; v < 22; ++v)" in src     # ceildiv(2 * 4 * 8 padded tiles, 3 blocks)
    # the tile order, checked numerically against the decode T.Persistent builds
    spec = T.Persistent([4, 9], 3, 0)
    seen = []
    for blk in range(3):
        for w in range(22):
            rem = w * 3 + blk
            g, rest = rem % 8, rem // 8
            i, hi = rest % 4, rest // 4
            j = hi * 8 + g
            if j < 9:
                seen.append((i, j))
    assert sorted(seen) == [(i, j) for i in range(4) for j in range(9)]
    assert spec.waves is not None


def test_mbarriers_and_ws_roles():
    @T.prim_func
    def k(A: T.Tensor((128,), T.float32), B: T.Tensor((128,), T.float32)):
        with T.Kernel(1, threads=256):
            tx = T.get_thread_binding()
            s = T.alloc_shared((128,), T.float32)
            bars = T.alloc_barrier([128, 128])
            with T.ws(1):
                if tx >= 128:
                    s[tx - 128] = A[tx - 128]
                T.barrier_arrive(bars[0])
            with T.ws(0):
                T.mbarrier_wait_parity(bars[0], 0)
                if tx < 128:
                    B[tx] = s[tx]

    src = _src(k)
    assert src.count("tl::mbarrier_init(") == 2 and "tl::fence_barrier_init();" in src
    assert "if (128 <= ((int)threadIdx.x)) {" in src
    assert "tl::mbarrier_arrive(" in src and "tl::mbarrier_wait(" in src


def test_back_to_back_barrier_allocations_initialise_together():
    """Three T.alloc_barrier calls in a row: one `if` initialising all five barriers, one fence,
    one meeting of the block (each call had its own); one after a statement meets on its own."""
    @T.prim_func
    def k(A: T.Tensor((128,), T.float32), B: T.Tensor((128,), T.float32)):
        with T.Kernel(1, threads=256):
            tx = T.get_thread_binding()
            s = T.alloc_shared((128,), T.float32)
            full = T.alloc_barrier([128, 128])
            empty = T.alloc_barrier([128, 128])
            done = T.alloc_barrier([128])
            if tx < 128:
                s[tx] = A[tx]
            late = T.alloc_barrier([128])
            with T.ws(1):
                if tx >= 128:
                    s[tx - 128] = A[tx - 128] + s[tx - 128]
                T.barrier_arrive(full[0])
                T.barrier_arrive(late[0])
            with T.ws(0):
                T.mbarrier_wait_parity(full[0], 0)
                T.mbarrier_wait_parity(late[0], 0)
                if tx < 128:
                    B[tx] = s[tx]
                T.barrier_arrive(empty[0])
                T.barrier_arrive(done[0])

    src = _src(k)
    first = src[src.index("tl::mbarrier_init("):]
    first = first[:first.index("__syncthreads();")]
    assert first.count("tl::mbarrier_init(") == 5 and first.count("tl::fence_barrier_init();") == 1
    assert src.count("tl::mbarrier_init(") == 6 and src.count("tl::fence_barrier_init();") == 2


def test_ws_compute_role_gets_its_own_threads():
    """Tile ops in the computing T.ws block are spread over its 128 threads (index tx - 128)."""
    @T.prim_func
    def k(A: T.Tensor((128,), T.float32)):
        with T.Kernel(1, threads=256):
            f = T.alloc_fragment((128,), T.float32)
            with T.ws(1):
                T.fill(f, 1.0)
                T.copy(f, A)

    src = _src(k)
    assert "if (128 <= ((int)threadIdx.x)) {" in src
    assert "float f[4];" in src                            # 128 elements over 32 of the 128
    assert "((((int)threadIdx.x) & 127) >> 5) == 0" in src      # threads, indexed tx - 128


def test_ws_tile_op_outside_roles_refused():
    @T.prim_func
    def k(A: T.Tensor((128,), T.float32)):
        with T.Kernel(1, threads=256):
            f = T.alloc_fragment((128,), T.float32)
            T.fill(f, 1.0)
            with T.ws(1):
                T.copy(f, A)

    with pytest.raises(Exception, match="outside every `with T.ws"):
        tilelang.compile(k)


def test_tma_copy_bulk_row_with_warp_leaders():
    @T.prim_func
    def k(A: T.Tensor((32, 1024), T.float32), B: T.Tensor((32,), T.float32)):
        with T.Kernel(4, threads=256) as pid:
            tid = T.get_thread_binding()
            w = tid // 32
            s = T.alloc_shared((8, 1024), T.float32)
            bars = T.alloc_barrier([32] * 8)
            T.tma_copy(A[pid * 8 + w, 0:1024], s[w, 0:1024], barrier=bars[w], leader_scope_threads=32)
            T.mbarrier_arrive(bars[w])
            T.mbarrier_wait_parity(bars[w], 0)
            if tid % 32 == 0:
                B[pid * 8 + w] = s[w, 0]

    src = _src(k)
    assert "if (tl::tl_shuffle_elect<32>()) {" in src
    assert "tl::mbarrier_expect_tx(" in src and ", 4096);" in src
    assert "tl::tma_load_bulk(" in src and "CUtensorMap" not in src


def test_ws_group_out_of_range():
    with pytest.raises(Exception, match="only 128 threads"):
        @T.prim_func
        def k(A: T.Tensor((128,), T.float32)):
            with T.Kernel(1, threads=128):
                with T.ws(1):
                    A[0] = 1.0


def test_cluster_kernel_dims():
    @T.prim_func
    def k(A: T.Tensor((128,), T.int32)):
        with T.ClusterKernel(4, threads=32, cluster_dims=(2, 1, 1)) as bx:
            T.cluster_sync()
            A[bx * 32 + T.get_thread_binding()] = T.block_rank_in_cluster()

    src = _src(k)
    assert "__cluster_dims__(2, 1, 1)" in src and "tl::cluster_ctarank()" in src
