"""Persistent warp-specialised GEMMs on sm_90a (``warp_specialize._persist``): one block per SM
loops over the output tiles, the mbarrier ring running on across tiles so that the producer loads
the next tile while the consumers write this one back."""

import re

import tilelang.language as T
from tilelang.engine.lower import lower

from test_lowering import gemm, lowered_with


def _staged_epilogue(M, N, K, bn=128, stages=3):
    @T.prim_func
    def kernel(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, 128), threads=256) as (bx, by):
            A_s = T.alloc_shared((128, 64), "float16")
            B_s = T.alloc_shared((64, bn), "float16")
            C_s = T.alloc_shared((128, bn), "float16")
            C_l = T.alloc_fragment((128, bn), "float32")
            T.use_swizzle(4)
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, 64), num_stages=stages):
                T.copy(A[by * 128, k * 64], A_s)
                T.copy(B[k * 64, bx * bn], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C_s)
            T.copy(C_s, C[by * 128, bx * bn])

    return kernel


def test_gemm_grid_is_one_block_per_sm_over_the_tiles():
    art = lower(gemm(2048, 2048, 1024, bm=128, bn=256, bk=64, stages=4, threads=256), target="sm_90a")
    assert art.grid == ["min(128, NUM_SMS)", "1", "1"]      # 16 x 8 tiles of 128 x 256
    src = art.source
    assert "tl::num_blocks()" in src
    # both roles loop over the same tiles; block indices come from the tile, not from blockIdx.y
    assert "tile_it_p" in src and "for (int tile_it = 0;" in src
    assert "blockIdx.y" not in src
    # the consumers release the last stage of each tile once its wgmma retired
    consumer = src[src.index("for (int tile_it = 0;"):]
    after_loop = consumer[consumer.index("tl::wgmma_wait<0, 128>"):]
    assert after_loop.index("tl::mbarrier_arrive") < after_loop.index("C_ptr")


def test_ring_slots_continue_across_tiles_when_trip_count_is_not_a_multiple_of_stages():
    st = lowered_with(gemm(1024, 1024, 320, bm=128, bn=128, bk=64, stages=3, threads=128), "sm_90a", {})
    text = st.lowered.script()
    # 5 k-steps per tile, 3 stages: slot = (tile_it * 5 + k) % 3 on both sides
    assert re.search(r"\(tile_it_p \* 5 \+ k_tma\) % 3", text), text
    assert re.search(r"\(tile_it \* 5 \+ k\) % 3", text)
    assert re.search(r"\(tile_it \* 5 \+ 1\) % 3", text)        # the last slot, (5 it + 4) % 3, after the loop


def test_shared_memory_epilogue_keeps_its_own_bytes_and_meets_a_barrier_per_tile():
    art = lower(_staged_epilogue(1024, 1024, 512), target="sm_90a")
    assert art.grid[0] == "min(64, NUM_SMS)"
    # C_s no longer takes the staged tiles' bytes: 3 x (16 + 16) KiB + 32 KiB + mbarriers
    assert art.dynamic_smem >= 128 * 1024
    consumer = art.source[art.source.index("for (int tile_it = 0;"):]
    # the next tile's C_s writes wait until every consumer has stored this tile
    last_store = consumer.rindex("C_ptr")
    assert "tl::named_barrier_sync(1, 256)" in consumer[last_store:]


def test_kernels_that_do_not_fit_with_separate_bytes_stay_one_tile_per_block():
    # 4 stages of 128x64 + 64x256 tiles (192 KiB) leave no room for a 64 KiB C_s of its own
    art = lower(_staged_epilogue(1024, 1024, 512, bn=256, stages=4), target="sm_90a")
    assert art.grid == ["4", "8", "1"] and "tile_it" not in art.source


def test_disable_persistent_and_other_loops_keep_the_launch_grid():
    func = gemm(1024, 1024, 512, bm=128, bn=128, bk=64, stages=3, threads=128)
    art = lower(func, target="sm_90a", pass_configs={"tl.disable_persistent": True})
    assert art.grid == ["8", "8", "1"] and "tile_it" not in art.source
    art = lower(func, target="sm_90a", pass_configs={"tl.disable_warp_specialized": True})
    assert art.grid == ["8", "8", "1"]
    art = lower(func, target="sm_80")
    assert art.grid == ["8", "8", "1"]


def test_symbolic_shapes_keep_the_launch_grid():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
    import gemm_dynamic

    # a symbolic M has no TMA tensor map, so no producer warpgroup and no persistent loop
    art = lower(gemm_dynamic.kernels()[0], target="sm_90a")
    assert "M" in art.grid[1] and "NUM_SMS" not in art.grid[0]
