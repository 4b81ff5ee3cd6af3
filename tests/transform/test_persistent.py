"""GEMM epilogues and tile scheduling on sm_90a: persistent warp-specialised GEMMs
(``warp_specialize._persist``: one block per SM loops over the output tiles, the mbarrier ring
running on across tiles so that the producer loads the next tile while the consumers write this
one back), and epilogues through shared memory (a 128-byte-swizzled staging tile written to
global memory by TMA box stores, ``lower_copy._tma_store``)."""

import re

import pytest

import tilelang.language as T
from tilelang.engine.lower import lower

from test_lowering import gemm, lowered_with


def _staged_epilogue(M, N, K, bn=128, stages=3, disable_tma=False):
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
            T.copy(C_s, C[by * 128, bx * bn], disable_tma=disable_tma)

    return kernel


def test_gemm_grid_is_one_block_per_sm_over_the_tiles():
    # (register epilogue: with a shared stage, 4 stages of 128 x 256 tiles leave no room to persist)
    art = lower(gemm(2048, 2048, 1024, bm=128, bn=256, bk=64, stages=4, threads=256), target="sm_90a",
                pass_configs={"tl.disable_epilogue_staging": True})
    assert art.grid == ["min(128, NUM_SMS)", "1", "1"]      # 16 x 8 tiles of 128 x 256
    src = art.source
    assert "tl::num_blocks()" in src
    # both roles loop over the same tiles; block indices come from the tile, not from blockIdx.y
    assert "tile_it_p" in src and "for (int tile_it = 0;" in src
    assert "blockIdx.y" not in src
    # the consumers release the last stage of each tile once its wgmma retired
    consumer = src[src.index("for (int tile_it = 0;"):]
    after_loop = consumer[consumer.index("tl::wgmma_wait<0, 128>"):]
    assert after_loop.index("tl::mbarrier_arrive") < re.search(r"\bC\[|\(C \+", after_loop).start()


@pytest.mark.parametrize("M,N,gx", [(256, 128, 1), (512, 512, 4)])
def test_tile_index_is_not_bounded_by_the_first_grid_dimension(M, N, gx):
    """blockIdx.x now runs over min(tiles, SMs) blocks, more than the kernel's first grid extent:
    its launch extent must say so, or the simplifier folds blockIdx.x to 0 (gx = 1) or drops the
    modulo (a silent miscompile found on the GPU)."""
    # (128x128x64, 4 stages + the epilogue stage: one block per SM, so persistent; K = 256 runs the
    # 4 iterations the stages need: a shorter loop keeps fewer stages and fits two blocks an SM)
    src = lower(gemm(M, N, 256, bm=128, bn=128, bk=64, stages=4), target="sm_90a").source
    consumer = src[src.index("for (int tile_it = 0;"):]
    assert "(((int)blockIdx.x) + (tile_it * num_blocks))" in consumer
    if gx > 1:
        assert f"(((int)blockIdx.x) + (tile_it * num_blocks)) % {gx})" in consumer


def test_ring_slots_continue_across_tiles_when_trip_count_is_not_a_multiple_of_stages():
    # (one block per SM and num_stages buffers: without them it runs two blocks per SM, one tile each)
    st = lowered_with(gemm(1024, 1024, 320, bm=128, bn=128, bk=64, stages=3, threads=128), "sm_90a",
                      {"tl.disable_block_pair": True, "tl.disable_ring_extra_stage": True})
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
    # the next tile's C_s writes wait until the stores of this one have read it: thread 0 waits
    # right before them (the stores have had the whole main loop), then every consumer meets a
    # barrier; the tile itself ends without a wait or a barrier, and the last stores are waited
    # for once after the tile loop
    epilogue = consumer[consumer.index("tl::wgmma_wait<0"):]
    wait = epilogue.index("tl::tma_store_wait<0>()")
    assert wait < epilogue.index("tl::named_barrier_sync(1, 256)", wait) < epilogue.index("*(float2*)(C_l +")
    issue = epilogue.index("tl::tma_store_arrive()")
    assert epilogue.count("tl::tma_store_wait<0>()") == 2
    tile_end = epilogue.index("\n    }\n", issue)
    assert "named_barrier_sync" not in epilogue[issue:tile_end] and "tma_store_wait" not in epilogue[issue:tile_end]
    assert epilogue[tile_end:].index("tl::tma_store_wait<0>()") > 0


def test_shared_memory_epilogue_is_a_swizzled_tile_stored_by_tma():
    from tilelang.transform.kernel import analyze_kernel
    from tilelang.transform.layout_inference import infer_layouts

    func = _staged_epilogue(1024, 1024, 512)
    layouts = infer_layouts(analyze_kernel(func), "sm_90a")
    c_s = next(layout for buf, layout in layouts.shared.items() if buf.name == "C_s")
    assert c_s.slab and c_s.group == 8 and c_s.slab_width == 64      # 128-byte swizzle, 64-column slabs
    art = lower(func, target="sm_90a")
    # the third tensor map is C's: a 64 x 128 box per slab, the staging tile's swizzle
    assert art.tensormaps[2]["param"] == 2 and art.tensormaps[2]["box"] == [64, 128]
    assert art.tensormaps[2]["swizzle"] == 128
    src = art.source
    epilogue = src[src.rindex("tl::fence_proxy_async()", 0, src.index("tl::tma_store_2d")):]
    # every consumer's writes reach the async proxy before the barrier, then thread 0 stores two
    # slabs, closes the group, and (after the tile loop: persistent) waits until the stores have
    # read shared memory
    assert epilogue.index("tl::named_barrier_sync(1, 256)") < epilogue.index("if (((int)threadIdx.x) == 0)")
    assert epilogue.count("tl::tma_store_2d(TL_TMAP(2)") == 2
    assert epilogue.index("tl::tma_store_arrive()") < epilogue.index("tl::tma_store_wait<0>()")
    assert not re.search(r"\bC\[|\(C \+", src)         # C is written through its tensor map only


def test_tma_stores_only_where_the_tile_is_a_box():
    func = _staged_epilogue(1024, 1024, 512)
    for configs, arch in (({"tl.disable_tma_lower": True}, "sm_90a"), ({}, "sm_80")):
        art = lower(func, target=arch, pass_configs=configs)
        assert "tma_store" not in art.source and re.search(r"\bC\[|\(C \+", art.source)
    # an explicit stage copied with T.copy(..., disable_tma=True): threaded stores
    src = lower(_staged_epilogue(1024, 1024, 512, disable_tma=True), target="sm_90a").source
    assert "tma_store" not in src and re.search(r"\bC\[|\(C \+", src)
    # a row of 1000 halves is 2000 bytes, a multiple of 16: TMA; 1001 is not: threaded stores
    assert "tma_store" in lower(_staged_epilogue(1024, 1000, 512), target="sm_90a").source
    art = lower(_staged_epilogue(1024, 1001, 512), target="sm_90a")
    assert "tma_store" not in art.source


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


def test_a_direct_accumulator_epilogue_is_staged_like_the_explicit_one():
    """T.copy(C_local, C[...]) on sm_90a compiles to the same CUDA as the epilogue written through
    a shared tile (examples/gemm.py smem_epilogue=True): a swizzled stage and TMA stores."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
    import gemm as g

    for cfg in (dict(block_M=128, block_N=256, block_K=64, num_stages=4, threads=256),
                dict(block_M=128, block_N=128, block_K=64, num_stages=3, threads=128)):
        direct = lower(g.matmul.get_prim_func(1024, 1000, 512, **cfg), target="sm_90a")
        explicit = lower(g.matmul.get_prim_func(1024, 1000, 512, smem_epilogue=True, **cfg), target="sm_90a")
        assert direct.source == explicit.source and "tl::tma_store_2d" in direct.source
    # 4 stages of 128x256 leave no room for a stage of its own: one tile per block, the stage on
    # the dead pipeline tiles' bytes; with 3 stages the stage would get its own bytes, but over a
    # long main loop (128 k-steps) the ring's extra buffer is worth more than persistence
    # (warp_specialize.plan_ring): one tile per block there too, 4 buffers. Over a shorter one (32
    # k-steps) the grid persists with 3 buffers and the stage's own bytes. (Whole-tile stages: the
    # chunked epilogue off; by default the three-stage kernel chunks it and persists with 4 buffers.)
    def cfg(K, stages, configs=None):
        return lower(g.matmul.get_prim_func(8192, 8192, K, block_M=128, block_N=256, block_K=64,
                                            num_stages=stages, threads=256), target="sm_90a",
                     pass_configs=configs if configs is not None else {"tl.enable_chunked_epilogue": False})

    four, three, short = cfg(8192, 4), cfg(8192, 3), cfg(2048, 3)
    assert four.grid == ["32", "64", "1"] and four.dynamic_smem < 200 * 1024
    assert three.grid == ["32", "64", "1"] and three.dynamic_smem < 200 * 1024
    assert three.source.count("tl::mbarrier_init") == 8 == four.source.count("tl::mbarrier_init")
    assert short.grid == ["min(2048, NUM_SMS)", "1", "1"] and short.dynamic_smem > 200 * 1024
    assert short.source.count("tl::mbarrier_init") == 6
    chunked = cfg(8192, 3, {})
    assert chunked.grid == ["min(2048, NUM_SMS)", "1", "1"] and chunked.source.count("tl::mbarrier_init") == 8
    assert cfg(8192, 4, {}).source == four.source          # 5 x 48 KiB + chunks would not fit


def test_epilogues_that_stay_register_stores():
    func = gemm(1024, 1024, 512, bm=128, bn=128, bk=64, stages=3, threads=128)
    for configs, arch in (({"tl.disable_epilogue_staging": True}, "sm_90a"), ({"tl.disable_tma_lower": True}, "sm_90a"),
                          ({}, "sm_80"), ({"tl.disable_wgmma": True}, "sm_90a")):
        src = lower(func, target=arch, pass_configs=configs).source
        assert "tma_store" not in src and re.search(r"\bC\[|\(C \+", src), (configs, arch)
    # a row of 1001 halves is not 16-byte aligned: no TMA box, no stage
    assert "tma_store" not in lower(gemm(1024, 1001, 512, bm=128, bn=128, bk=64), target="sm_90a").source

    text = lowered_with(_epilogue_variant(0, disable_tma=True), "sm_90a", {}).lowered.script()
    assert "C_l_stage" not in text and "tma_store" not in text


def _epilogue_variant(col_offset, disable_tma=False):
    """A GEMM whose epilogue writes C at column ``bx * 128 + col_offset``."""
    return gemm(512, 1024, 512, bm=128, bn=128, bk=64, stages=3, col_offset=col_offset, disable_tma=disable_tma)


def test_an_unaligned_output_column_is_not_staged():
    # 4 halves = 8 bytes past a 16-byte boundary: no TMA box, so no stage; 8 halves: staged
    assert "C_l_stage" in lowered_with(_epilogue_variant(8), "sm_90a", {}).lowered.script()
    text = lowered_with(_epilogue_variant(4), "sm_90a", {}).lowered.script()
    assert "C_l_stage" not in text and "tma_store" not in text     # register stores, no stage
