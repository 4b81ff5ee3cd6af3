"""Zero-stage GEMM main loops given stages (``attention_schedule.promote_zero_stage``,
``tl.enable_zero_stage_promotion``): ``T.Pipelined(n, num_stages=0)`` whose body is global ->
shared copies followed by gemms of them (upstream's split-K GEMM example) compiles as the same loop
written with three stages; anything that could change what the loop computes, or whether the block
fits, keeps it as written."""

import re

import tilelang
import tilelang.language as T
from tilelang.transform.attention_schedule import PROMOTE_MIN_TRIPS, promote_zero_stage
from tilelang.transform.pipelined_loop import num_stages

SM90 = "cuda -arch=sm_90a"
KEY = "tl.enable_zero_stage_promotion"
ON = {KEY: True}


def splitk(stages=0, trips=32, block_K=32, extra=None, write_in_loop=False, nested=False, guard=False):
    """Upstream's split-K GEMM (example_tilelang_gemm_splitk.py) at 4096^3, split 4, with variants."""
    M = N = 4096
    K = trips * block_K * 4

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float32),
             D: T.Tensor((M, N), T.float32)):
        with T.Kernel(N // 128, M // 128, 4, threads=128) as (bx, by, bz):
            A_shared = T.alloc_shared((128, block_K), T.float16)
            B_shared = T.alloc_shared((block_K, 128), T.float16)
            C_local = T.alloc_fragment((128, 128), T.float32)
            T.clear(C_local)
            if nested:
                for r in T.serial(2):
                    for ko in T.Pipelined(trips, num_stages=stages):
                        T.copy(A[by * 128, bz * trips * block_K + ko * block_K + r], A_shared)
                        T.copy(B[bz * trips * block_K + ko * block_K, bx * 128], B_shared)
                        T.gemm(A_shared, B_shared, C_local)
            elif guard:
                if bz > 0:
                    for ko in T.Pipelined(trips, num_stages=stages):
                        T.copy(A[by * 128, bz * trips * block_K + ko * block_K], A_shared)
                        T.copy(B[bz * trips * block_K + ko * block_K, bx * 128], B_shared)
                        T.gemm(A_shared, B_shared, C_local)
            elif write_in_loop:
                for ko in T.Pipelined(trips, num_stages=stages):
                    T.copy(A[by * 128, bz * trips * block_K + ko * block_K], A_shared)
                    T.copy(B[bz * trips * block_K + ko * block_K, bx * 128], B_shared)
                    T.gemm(A_shared, B_shared, C_local)
                    T.copy(C_local, D[by * 128, bx * 128])
            else:
                for ko in T.Pipelined(trips, num_stages=stages):
                    T.copy(A[by * 128, bz * trips * block_K + ko * block_K], A_shared)
                    T.copy(B[bz * trips * block_K + ko * block_K, bx * 128], B_shared)
                    T.gemm(A_shared, B_shared, C_local)
            for i, j in T.Parallel(128, 128):
                T.atomic_add(C[by * 128 + i, bx * 128 + j], C_local[i, j])

    return main


def source(func, **configs):
    return tilelang.compile(func, target=SM90, pass_configs=configs).get_kernel_source()


def stages_of(func):
    out = []

    def visit(s):
        if hasattr(s, "loop_var") and "tl.num_stages" in s.annotations:
            out.append(num_stages(s))

    from tilelang.tir_utils import walk_stmts
    walk_stmts(func.body, visit)
    return out


def test_a_split_k_main_loop_compiles_as_the_three_stage_loop():
    zero, three = splitk(0), splitk(3)
    promoted = source(zero, **ON)
    assert promoted == source(three, **ON) == source(three)
    assert "mbarrier_wait" in promoted and "wgmma_gemm_ss_async" in promoted   # the TMA producer's ring
    assert source(zero) == promoted                                            # on by default (session 57)
    plain = source(zero, **{KEY: False})
    assert plain != promoted and "mbarrier" not in plain and "cp_async_wait<0>" in plain
    assert stages_of(promote_zero_stage(zero, "sm_90a", ON)) == [3]
    assert stages_of(promote_zero_stage(zero, "sm_80", ON)) == [3]             # a cp.async ring there
    assert "cp_async_wait<2>" in tilelang.compile(zero, target="cuda -arch=sm_80",
                                                  pass_configs=ON).get_kernel_source()


def test_two_stages_where_only_two_fit():
    # 128x192 + 192x128 fp16 tiles: 96 KiB a stage, so a second buffer fits and a third does not
    wide = splitk(0, trips=8, block_K=192)
    assert stages_of(promote_zero_stage(wide, "sm_90a", ON)) == [2]
    huge = splitk(0, trips=8, block_K=512)                                     # 256 KiB a stage
    assert promote_zero_stage(huge, "sm_90a", ON) is huge


def test_what_could_change_the_result_keeps_the_loop_as_written():
    plain = {KEY: True, "tl.enable_zero_stage_promotion_any": False}
    written = splitk(0, write_in_loop=True)           # a global write in the step: the plain rule keeps it,
    assert promote_zero_stage(written, "sm_90a", plain) is written
    assert stages_of(promote_zero_stage(written, "sm_90a", ON)) == [3]     # the one-gemm rule (D is no source)
    for func in (splitk(0, nested=True),              # inside another loop
                 splitk(0, guard=True),               # under an if
                 splitk(0, trips=PROMOTE_MIN_TRIPS - 1),
                 splitk(1), splitk(2)):               # not zero-stage
        assert promote_zero_stage(func, "sm_90a", ON) is func
    zero = splitk(0)
    for configs in ({KEY: False}, {**ON, "tl.disable_attention_schedule": True},
                    {**ON, "tl.disable_async_copy": True}):
        assert promote_zero_stage(zero, "sm_90a", configs) is zero
    assert promote_zero_stage(zero, "sm_75", ON) is zero
    assert stages_of(promote_zero_stage(splitk(0, trips=PROMOTE_MIN_TRIPS), "sm_90a", ON)) == [3]


def _small(b_after_gemm=False, a_after_loop=False):
    """A 1024^3 GEMM main loop of zero stages; B's copy after the gemm (the next step's tile written
    once this one's product is done), or the last step's A tile copied out after the loop."""

    @T.prim_func
    def main(A: T.Tensor((1024, 1024), T.float16), B: T.Tensor((1024, 1024), T.float16),
             C: T.Tensor((1024, 1024), T.float32), L: T.Tensor((1024, 1024), T.float16)):
        with T.Kernel(8, 8, threads=128) as (bx, by):
            A_shared = T.alloc_shared((128, 32), T.float16)
            B_shared = T.alloc_shared((32, 128), T.float16)
            C_local = T.alloc_fragment((128, 128), T.float32)
            T.clear(C_local)
            for ko in T.Pipelined(32, num_stages=0):
                T.copy(A[by * 128, ko * 32], A_shared)
                if not b_after_gemm:
                    T.copy(B[ko * 32, bx * 128], B_shared)
                T.gemm(A_shared, B_shared, C_local)
                if b_after_gemm:
                    T.copy(B[ko * 32, bx * 128], B_shared)
            T.copy(C_local, C[by * 128, bx * 128])
            if a_after_loop:
                T.copy(A_shared, L[by * 128, bx * 32])

    return main


def test_a_copy_after_the_gemm_or_a_tile_read_after_the_loop_keeps_it_as_written():
    assert stages_of(promote_zero_stage(_small(), "sm_90a", ON)) == [3]
    for func in (_small(b_after_gemm=True), _small(a_after_loop=True)):
        assert promote_zero_stage(func, "sm_90a", ON) is func


def _one_gemm_body(write_source=False):
    """gdn wy_fast's V loop: copy, scale, gemm, store the product (to U, or to the copied V)."""

    @T.prim_func
    def main(A: T.Tensor((4096, 64), T.float16), V: T.Tensor((4096, 256), T.float16),
             U: T.Tensor((4096, 256), T.float16)):
        with T.Kernel(64, threads=128) as bx:
            A_s = T.alloc_shared((64, 64), T.float16)
            V_s = T.alloc_shared((64, 32), T.float16)
            S_s = T.alloc_shared((64, 32), T.float16)
            u = T.alloc_fragment((64, 32), T.float32)
            T.copy(A[bx * 64, 0], A_s)
            for i in T.Pipelined(8, num_stages=0):
                T.copy(V[bx * 64, i * 32], V_s)
                for r, c in T.Parallel(64, 32):
                    S_s[r, c] = V_s[r, c] * 2
                T.gemm(A_s, S_s, u, clear_accum=True)
                if write_source:
                    T.copy(u, V[bx * 64, i * 32])
                else:
                    T.copy(u, U[bx * 64, i * 32])

    return main


def test_one_gemm_bodies_that_leave_their_sources_alone_are_promoted_too():
    """tl.enable_zero_stage_promotion_any: on by default since session 57; off with either key false."""
    ANY = {"tl.enable_zero_stage_promotion_any": True}
    body = _one_gemm_body()
    assert stages_of(promote_zero_stage(body, "sm_90a", {})) == [3]        # the default
    for off in ({"tl.enable_zero_stage_promotion_any": False}, {KEY: False}):
        assert promote_zero_stage(body, "sm_90a", off) is body
    assert stages_of(promote_zero_stage(body, "sm_90a", {KEY: False, **ANY})) == [3]
    assert stages_of(promote_zero_stage(splitk(0), "sm_90a", ANY)) == [3]  # a main loop of gemms still is
    assert stages_of(promote_zero_stage(body, "sm_90a", ANY)) == [3]
    promoted = source(body, **ANY)                                         # a TMA producer's ring here
    assert promoted == source(body) != source(body, **{"tl.enable_zero_stage_promotion_any": False})
    assert "mbarrier_wait" in promoted
    writes = _one_gemm_body(write_source=True)                             # the next step's V is this one's product
    assert promote_zero_stage(writes, "sm_90a", ANY) is writes


def test_an_early_release_loop_fences_the_tile_its_readers_write_for_the_wgmma():
    """Session 57 (gdn wy_fast under the experimental key on an H100: wrong, inf): the cp.async ring
    with early release published the scaled tile the readers wrote with a bare barrier, and the
    wgmma of the rest read it through the async proxy unfenced."""
    src = source(_one_gemm_body(), **{"tl.enable_zero_stage_promotion_any": True, "tl.disable_warp_specialized": True})
    loop = src[src.index("for (int i = 0"):]
    assert "cp_async_wait<2>" in loop
    middle = loop[loop.index("tl::mul2"):loop.index("tl::cp_async_commit")]
    assert re.search(r"tl::fence_proxy_async\(\);\s*__syncthreads\(\);\s*if \(i < 5\)", middle), middle


def test_the_hover_says_the_loop_was_promoted():
    from tilelang.analysis.summary import summarize

    zero = splitk(0)
    plain, = summarize(zero, "sm_90a", {KEY: False})["pipelines"]
    promoted, = summarize(zero, "sm_90a")["pipelines"]
    assert plain["stages"] == 0 and "written with" not in plain["mechanism"]
    assert promoted["stages"] == 3 and promoted["warp_specialized"]
    assert promoted["mechanism"].endswith("(written with num_stages=0; the compiler gives the loop 3 stages, "
                                          "`tl.enable_zero_stage_promotion`)")
