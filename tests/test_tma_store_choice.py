"""Which instruction a T.copy between shared memory and a global tensor becomes on CPU (generated
source and tensor maps): 1-D bulk copies for contiguous in-bounds runs, tensor-map boxes for tiles
that may overhang the tensor or are not one contiguous run, the threaded copy otherwise (older targets,
disable_tma, prefer_instruction="sync", swizzled tiles)."""

import pytest

import tilelang
import tilelang.language as T
from tilelang.layout import make_linear_layout

SM90 = "cuda -arch=sm_90a"


def store_1d(n, block, linear=False, **copy_kw):
    @T.prim_func
    def main(b: T.Tensor((n,), T.float32)):
        with T.Kernel(T.ceildiv(n, block), threads=128) as bx:
            shared = T.alloc_shared((block,), T.float32)
            if linear:
                T.annotate_layout({shared: make_linear_layout(shared)})
            for i in T.Parallel(block):
                shared[i] = T.cast(bx * block + i, T.float32)
            T.copy(shared, b[bx * block], **copy_kw)
    return main


def source(func, target=SM90, **kw):
    k = tilelang.compile(func, target=target, **kw)
    return k.get_kernel_source(), k.artifact


def test_full_1d_tile_is_one_bulk_store():
    src, art = source(store_1d(1024, 256))
    assert "tl::tma_store_bulk(" in src and "CUtensorMap" not in src and art.tensormaps == []
    assert "1024);" in src.split("tl::tma_store_bulk(")[1]          # 256 float32
    # every thread fences its writes into the async proxy and meets a barrier before the store
    body = src[src.index("tl::fence_proxy_async();"):]
    assert body.index("__syncthreads();") < body.index("tl::tma_store_bulk(")
    assert "tl::tma_store_arrive();" in src and "tl::tma_store_wait<0>();" in src


@pytest.mark.parametrize("linear", [False, True])
def test_partial_1d_tile_is_a_tensor_map_store(linear):
    src, art = source(store_1d(1000, 256, linear=linear))
    assert "tl::tma_store_1d(TL_TMAP(0)" in src and "CUtensorMap" in src
    assert art.tensormaps == [{"name": "tl_tmap_0", "param": 0, "dtype": "float32", "dims": [1000],
                               "strides": [], "box": [256], "swizzle": 0}]


def test_threaded_store_where_tma_is_not_chosen():
    for func, target in [(store_1d(1024, 256), "cuda -arch=sm_80"),
                         (store_1d(1024, 256, disable_tma=True), SM90),
                         (store_1d(1024, 256, prefer_instruction="sync"), SM90)]:
        src, art = source(func, target)
        assert "tma_store" not in src and art.tensormaps == []
    src, _ = source(store_1d(1024, 256), pass_configs={"tl.disable_tma_lower": True})
    assert "tma_store" not in src
    # a box TMA cannot hold (more than 256 elements) overhanging the tensor keeps the threaded store
    src, _ = source(store_1d(1000, 512))
    assert "tma_store" not in src


def store_2d(M, N, bm, bn, **copy_kw):
    @T.prim_func
    def main(C: T.Tensor((M, N), T.float16)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            s = T.alloc_shared((bm, bn), T.float16)
            for i, j in T.Parallel(bm, bn):
                s[i, j] = T.cast(i + j, T.float16)
            T.copy(s, C[by * bm, bx * bn], **copy_kw)
    return main


def test_2d_store_goes_through_tma_by_default():
    # a tile inside the tensor: TMA too (upstream's plain T.copy), here rows of a 64-wide tensor
    # are one contiguous run
    src, art = source(store_2d(256, 64, 64, 64))
    assert "tl::tma_store_bulk(" in src and "tl::tma_store_wait<0, true>();" in src and art.tensormaps == []
    src, _ = source(store_2d(256, 64, 64, 64, prefer_instruction="sync"))
    assert "tma_store" not in src
    # a tile that may overhang the tensor: a tensor-map store (TMA clips it) instead of guarded stores
    src, art = source(store_2d(250, 200, 64, 64))
    assert "tl::tma_store_2d(TL_TMAP(0)" in src
    assert art.tensormaps == [{"name": "tl_tmap_0", "param": 0, "dtype": "float16", "dims": [200, 250],
                               "strides": [400], "box": [64, 64], "swizzle": 0}]
    src, _ = source(store_2d(250, 200, 64, 64, disable_tma=True))
    assert "tma_store" not in src
    # whole rows: one contiguous run
    src, art = source(store_2d(256, 64, 64, 64, prefer_instruction="tma"))
    assert "tl::tma_store_bulk(" in src and art.tensormaps == []
    # a box of a wider tensor: a 2-D tensor map, coordinates innermost first
    src, art = source(store_2d(256, 256, 64, 64, prefer_instruction="tma"))
    assert "tl::tma_store_2d(TL_TMAP(0)" in src and "(((int)blockIdx.x) * 64), (((int)blockIdx.y) * 64));" in src
    assert art.tensormaps == [{"name": "tl_tmap_0", "param": 0, "dtype": "float16", "dims": [256, 256],
                               "strides": [512], "box": [64, 64], "swizzle": 0}]


def elementwise(M, N, bm, bn, safe=None):
    @T.prim_func
    def main(A: T.Tensor((M, N), T.float32), B: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            if safe is not None:
                T.annotate_safe_value({A: safe})
            A_s = T.alloc_shared((bm, bn), T.float32)
            T.copy(A[by * bm, bx * bn], A_s, annotations={"prefer_instruction": "tma"})
            for i, j in T.Parallel(bm, bn):
                B[by * bm + i, bx * bn + j] = A_s[i, j] * 2.0
    return main


def test_prefer_tma_load_contiguous_is_a_bulk_load():
    src, art = source(elementwise(256, 64, 32, 64))
    assert "tl::tma_load_bulk(" in src and "CUtensorMap" not in src and art.tensormaps == []
    assert "tl::mbarrier_arrive_expect_tx(" in src and "8192);" in src   # 32 x 64 float32
    assert "tl::mbarrier_init(" in src and "tl::mbarrier_wait(" in src
    assert "cp_async" not in src


def test_prefer_tma_load_box_uses_a_tensor_map():
    src, art = source(elementwise(256, 256, 64, 64))
    assert "tl::tma_load_2d(" in src and "CUtensorMap" in src
    assert art.tensormaps == [{"name": "tl_tmap_0", "param": 0, "dtype": "float32", "dims": [256, 256],
                               "strides": [1024], "box": [64, 64], "swizzle": 0}]


def test_prefer_tma_load_falls_back():
    # a non-zero safe value: TMA would fill zeros outside the tensor
    src, _ = source(elementwise(250, 256, 64, 64, safe=1.0))
    assert "tma_load" not in src
    # no TMA before sm_90; without the hint the load stays cp.async
    src, _ = source(elementwise(256, 256, 64, 64), "cuda -arch=sm_80")
    assert "tma_load" not in src


def test_without_hint_loads_stay_cp_async():
    @T.prim_func
    def main(A: T.Tensor((256, 256), T.float32), B: T.Tensor((256, 256), T.float32)):
        with T.Kernel(4, 4, threads=128) as (bx, by):
            A_s = T.alloc_shared((64, 64), T.float32)
            T.copy(A[by * 64, bx * 64], A_s)
            for i, j in T.Parallel(64, 64):
                B[by * 64 + i, bx * 64 + j] = A_s[i, j]
    src, art = source(main)
    # threaded, and synchronous: nothing overlaps with a lone copy (upstream: a normal copy too)
    assert "tma_load" not in src and "copy_vec<16>" in src and "cp_async" not in src and art.tensormaps == []


ROWS, COLS, ROW_STRIDE = 2, 32, 40


def strided_row_load():
    @T.prim_func
    def main(A: T.StridedTensor((ROWS, COLS), (ROW_STRIDE, 1), T.float32), B: T.Tensor((COLS,), T.float32)):
        with T.Kernel(1, threads=32):
            a_shared = T.alloc_shared((COLS,), T.float32)
            T.copy(A[1, 0:COLS], a_shared, prefer_instruction="tma")
            T.copy(a_shared, B)
    return main


def strided_rows(load):
    if load:
        @T.prim_func
        def main(A: T.StridedTensor((ROWS, COLS), (ROW_STRIDE, 1), T.float32), B: T.Tensor((ROWS, COLS), T.float32)):
            with T.Kernel(1, threads=32):
                a_shared = T.alloc_shared((ROWS, COLS), T.float32)
                T.copy(A, a_shared, prefer_instruction="tma")
                T.copy(a_shared, B, prefer_instruction="sync")
    else:
        @T.prim_func
        def main(A: T.Tensor((ROWS, COLS), T.float32), B: T.StridedTensor((ROWS, COLS), (ROW_STRIDE, 1), T.float32)):
            with T.Kernel(1, threads=32):
                a_shared = T.alloc_shared((ROWS, COLS), T.float32)
                T.copy(A, a_shared, prefer_instruction="sync")
                T.copy(a_shared, B, prefer_instruction="tma")
    return main


def test_strided_tensors():
    # one row of a padded tensor is a contiguous run: bulk copies, no tensor map
    src, art = source(strided_row_load())
    assert "tl::tma_load_bulk(" in src and "tl::tma_store_bulk(" in src and "CUtensorMap" not in src
    # several padded rows: a tensor map with the declared row stride (40 floats = 160 bytes)
    for load in (True, False):
        src, art = source(strided_rows(load))
        assert ("tl::tma_load_2d(" if load else "tl::tma_store_2d(") in src and "CUtensorMap" in src
        assert art.tensormaps == [{"name": "tl_tmap_0", "param": 0 if load else 1, "dtype": "float32",
                                   "dims": [COLS, ROWS], "strides": [ROW_STRIDE * 4], "box": [COLS, ROWS],
                                   "swizzle": 0}]


def test_tensor_from_a_device_pointer_is_a_bulk_load():
    @T.prim_func
    def main(src_ptrs: T.Tensor((1,), T.ptr), out: T.Tensor((256,), T.float16)):
        with T.Kernel(threads=128):
            src = T.make_tensor(src_ptrs[0], (256,), T.float16)
            src_shared = T.alloc_shared((256,), T.float16)
            T.copy(src, src_shared, prefer_instruction="tma")
            T.copy(src_shared, out, prefer_instruction="sync")
    src, art = source(main)
    assert "tl::tma_load_bulk(" in src and "CUtensorMap" not in src and "tma_store" not in src
