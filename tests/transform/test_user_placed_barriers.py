"""Barriers the user writes (``T.sync_threads``) and ``tl.disable_thread_storage_sync``
(``thread_sync.user_placed``, ``_orders_like_ours``, ``drop_repeated_barriers``), pinned on the CUDA
source: a user's ``__syncthreads()`` orders what came before it, so no planned barrier repeats it;
with the config the user's element accesses get no planned barrier at all, while tile ops and a
pipelined loop's schedule keep theirs (upstream's deepseek_v32 top-k selector sets the config and
places every barrier itself)."""

import tilelang
import tilelang.language as T

NO_SYNC = {"tl.disable_thread_storage_sync": True}


def _body(func, configs=None, target="sm_90a"):
    src = tilelang.lower(func, target, pass_configs=configs or {}).source
    return src[src.index("__global__"):]


def _histogram():
    """A histogram in shared memory: cleared, user barrier, atomics from every thread, user
    barrier, a scan by one thread; then a loop that reads it with the user's barrier at its head."""
    @T.prim_func
    def k(X: T.Tensor((4096,), T.int32), Y: T.Tensor((256,), T.int32)):
        with T.Kernel(1, threads=256):
            tx = T.get_thread_binding()
            hist = T.alloc_shared((256,), T.int32)
            T.fill(hist, 0)
            T.sync_threads()
            for s in T.serial(16):
                T.atomic_add(hist[X[s * 256 + tx] & 255], 1)
            T.sync_threads()
            if tx == 0:
                for i in T.serial(255):
                    hist[i + 1] = hist[i + 1] + hist[i]
            for s in T.serial(4):
                T.sync_threads()
                Y[tx] = Y[tx] + hist[(tx + s) & 255]
    return k


def test_a_user_barrier_is_not_repeated():
    src = _body(_histogram())
    # the user's three barriers; the scan by thread 0 (after the atomics) and the loop's reads (after
    # the scan) are ordered by them: none of ours next to them, none at the end of the last loop
    assert "__syncthreads();\n  __syncthreads();" not in src
    assert src.count("__syncthreads();") == 3, src


def test_config_leaves_element_accesses_to_the_user():
    @T.prim_func
    def k(X: T.Tensor((256,), T.float32), Y: T.Tensor((256,), T.float32)):
        with T.Kernel(1, threads=256):
            tx = T.get_thread_binding()
            buf = T.alloc_shared((256,), T.float32)
            buf[tx] = X[tx]
            Y[tx] = buf[255 - tx]       # another thread's element: a barrier, unless the user places it
    assert "__syncthreads();" in _body(k)
    assert "__syncthreads();" not in _body(k, NO_SYNC)


def test_config_keeps_barriers_between_tile_ops():
    @T.prim_func
    def k(X: T.Tensor((64, 64), T.float16), Y: T.Tensor((64, 64), T.float32)):
        with T.Kernel(1, threads=128):
            a = T.alloc_shared((64, 64), T.float16)
            c = T.alloc_fragment((64, 64), T.float32)
            T.copy(X, a)
            T.clear(c)
            T.gemm(a, a, c, transpose_B=True)      # every warp reads rows other threads copied
            T.copy(c, Y)
    plain, user = _body(k, target="sm_80"), _body(k, NO_SYNC, target="sm_80")
    assert user.count("__syncthreads();") == plain.count("__syncthreads();") >= 1


def test_config_keeps_a_pipelined_loops_barriers():
    @T.prim_func
    def k(A: T.Tensor((128, 512), T.float16), B: T.Tensor((512, 128), T.float16), C: T.Tensor((128, 128), T.float32)):
        with T.Kernel(1, threads=128):
            a = T.alloc_shared((128, 32), T.float16)
            b = T.alloc_shared((32, 128), T.float16)
            c = T.alloc_fragment((128, 128), T.float32)
            T.clear(c)
            for i in T.Pipelined(16, num_stages=3):
                T.copy(A[:, i * 32:(i + 1) * 32], a)
                T.copy(B[i * 32:(i + 1) * 32, :], b)
                T.gemm(a, b, c)
            T.copy(c, C)
    plain, user = _body(k, target="sm_80"), _body(k, NO_SYNC, target="sm_80")
    loop = lambda src: src[src.index("for (int i = 0;"):]
    assert "__syncthreads();" in loop(plain)
    assert loop(user).count("__syncthreads();") == loop(plain).count("__syncthreads();")
