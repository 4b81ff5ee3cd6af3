"""Chunked GEMM epilogues (``tl.enable_chunked_epilogue``, on by default since session 38;
``stage_epilogue.chunked``): an upstream-style 128x256x64 GEMM with three stages stages its whole
accumulator through one 64 KiB shared tile, which leaves no room for the ring's extra buffer in a
persistent grid, so without chunks (the key false) it runs one tile per block. Chunked, the epilogue goes out 64 columns at a time
through two 16 KiB tiles, the kernel runs persistent with four ring buffers, thread 0 waits for
each chunk's store only before the barrier that precedes the next store (while the others write
the next chunk), and all four chunk stores go through one tensor map."""

import re

import pytest

import tilelang
import tilelang.language as T

from host_cuda import NVCC

KEY = {"tl.enable_chunked_epilogue": True}      # (the default since session 38)
OFF = {"tl.enable_chunked_epilogue": False}


def upstream_gemm(M=4096, N=4096, K=4096, bm=128, bn=256, bk=64, stages=3, dtype=T.bfloat16, stage_c=True,
                  annotate=False):
    """example_gemm_autotune's kernel (C = A @ B.T, T.use_swizzle, C_shared epilogue; ``annotate``:
    with the user's own layout for C_shared)."""
    from tilelang.layout import make_swizzled_layout

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((N, K), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=256) as (bx, by):
            A_shared = T.alloc_shared((bm, bk), dtype)
            B_shared = T.alloc_shared((bn, bk), dtype)
            C_local = T.alloc_fragment((bm, bn), T.float32)
            C_shared = T.alloc_shared((bm, bn), dtype)
            if annotate:
                T.annotate_layout({C_shared: make_swizzled_layout(C_shared)})
            T.use_swizzle(panel_size=10, enable=True)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                T.copy(A[by * bm, k * bk], A_shared)
                T.copy(B[bx * bn, k * bk], B_shared)
                T.gemm(A_shared, B_shared, C_local, transpose_B=True)
            if stage_c:
                T.copy(C_local, C_shared)
                T.copy(C_shared, C[by * bm, bx * bn])
            else:
                T.copy(C_local, C[by * bm, bx * bn])

    return main


def _consumer_tile(src):
    body = src[src.index("for (int tile_it = 0;"):]
    return body[:body.rindex("tl::tma_store_wait<0>();")]


@pytest.mark.parametrize("stage_c", [True, False])
def test_chunks_make_room_for_a_persistent_ring_of_four(stage_c):
    plain = tilelang.lower(upstream_gemm(stage_c=stage_c), "sm_90a", pass_configs=OFF)
    chunked = tilelang.lower(upstream_gemm(stage_c=stage_c), "sm_90a")
    assert "tile_it" not in plain.source and "(k & 3)" in plain.source     # one tile per block, four buffers
    assert plain.grid == ["16", "32", "1"]
    src = chunked.source
    assert chunked.grid == ["min(512, NUM_SMS)", "1", "1"]
    assert "for (int tile_it = 0;" in src and "(k & 3)" in src            # persistent, four buffers
    assert 4 * 48 * 1024 + 32 * 1024 <= chunked.dynamic_smem <= 227 * 1024    # ring of four + two chunk tiles
    stores = re.findall(r"tl::tma_store_2d\(TL_TMAP\((\d+)\), \(&\(\(\(nv_bfloat16\*\)smem\)\[(\d+)\]\)\)", src)
    assert len(stores) == 4
    assert len({j for j, _ in stores}) == 1                               # one tensor map for the four chunks
    assert [int(o) for _, o in stores] == [98304, 106496, 98304, 106496]  # two 128x64 tiles, alternating
    assert len(chunked.tensormaps) == 3


def test_each_chunk_store_is_waited_for_in_front_of_the_next_ones_barrier():
    src = tilelang.lower(upstream_gemm(), "sm_90a", pass_configs=KEY).source
    tile = _consumer_tile(src)
    # no wait right behind an issue: the issuing thread goes straight on to the next chunk
    assert not re.search(r"tl::tma_store_arrive\(\);\s*tl::tma_store_wait", tile)
    # before each of the four stores: write chunk, fence, thread 0 waits (the previous chunk, or the
    # previous tile's last), named barrier, store
    pattern = (r"tl::fence_proxy_async\(\);\s*if \(\(\(int\)threadIdx.x\) == 0\) \{\s*tl::tma_store_wait<0>\(\);\s*\}"
               r"\s*tl::named_barrier_sync\(1, 256\);(?:\s*int [^;]*;)*\s*if \(\(\(int\)threadIdx.x\) == 0\) \{\s*"
               r"tl::tma_store_2d")
    assert len(re.findall(pattern, tile)) == 4
    # four barriers a tile, none at its end (the chunk tiles are free by the next tile's first barrier)
    assert tile.count("tl::named_barrier_sync") == 4
    # and once after the tile loop, before the block exits
    assert src.rstrip().endswith("tl::tma_store_wait<0>();\n    }\n  }\n}")


@pytest.mark.parametrize("kw", [dict(bn=128), dict(annotate=True)])
def test_kernels_the_chunks_do_not_apply_to_are_left_alone(kw):
    # 128x128x64, three stages: ring of four and the 32 KiB tile already fit persistent; a
    # C_shared with the user's own layout keeps it
    plain = tilelang.lower(upstream_gemm(**kw), "sm_90a", pass_configs=OFF).source
    assert tilelang.lower(upstream_gemm(**kw), "sm_90a").source == plain


@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")
def test_the_chunked_kernel_compiles_without_spills():
    from tilelang.jit.nvcc import ptxas_info

    art = tilelang.lower(upstream_gemm(), "sm_90a", pass_configs=KEY)
    for info in ptxas_info(art.source, "sm_90a").values():
        assert info.spill_stores == 0 and info.spill_loads == 0


def test_the_hover_summary_sees_the_chunked_kernel():
    """The T.Kernel hover describes the kernel the compile builds: persistent unless the key is false."""
    from tilelang.analysis.summary import summarize

    assert not summarize(upstream_gemm(), "sm_90a", pass_configs=OFF).get("persistent")
    on = summarize(upstream_gemm(), "sm_90a")
    assert on["persistent"] and not on.get("persistent_why")
