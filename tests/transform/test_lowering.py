"""Passes: layout inference results, and the structure of the lowered IR (before -> after)."""

import pytest

import tilelang
import tilelang.language as T
from tilelang.diagnostics import TileLangCompileError
from tilelang.transform.kernel import analyze_kernel
from tilelang.transform.layout_inference import infer_layouts


def gemm(M, N, K, bm=128, bn=128, bk=32, stages=3, threads=128, C_shape=None, col_offset=0, disable_tma=False):
    """C = A @ B; the epilogue writes column ``bx * bn + col_offset`` (``disable_tma``: of T.copy)."""
    C_shape = C_shape or (bm, bn)

    @T.prim_func
    def kernel(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            C_l = T.alloc_fragment(C_shape, "float32")
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * bm, bx * bn + col_offset], disable_tma=disable_tma)

    return kernel


def lowered_text(func, arch="sm_90a", pass_configs=None):
    from tilelang.engine.lower import LowerState
    from tilelang.engine.pipeline import PASSES

    st = LowerState(func, arch, "main", pass_configs=dict(pass_configs or {}))
    for name, run in PASSES:
        if name == "emit_cuda":
            break
        run(st)
    return st.lowered.script()


def test_gemm_layouts():
    layouts = infer_layouts(analyze_kernel(gemm(256, 256, 256)))
    (plan,) = layouts.gemms.values()
    assert (plan.M, plan.N, plan.K, plan.warp_m, plan.warp_n) == (128, 128, 32, 2, 2)
    frags = {b.name: f for b, f in layouts.fragments.items()}
    assert frags["C_l"].local_size == 128
    shared = {b.name: s for b, s in layouts.shared.items()}
    assert shared["A_s"].group == 4 and shared["B_s"].group == 8


def test_pipeline_structure():
    text = lowered_text(gemm(256, 256, 256, stages=3), "sm_80")
    # Two prologue stages, then one producer per iteration with wait_group(S-1).
    assert text.count("tl::cp_async_commit") == 3
    assert "tl::cp_async_wait<2>" in text
    assert text.count("__syncthreads") >= 2
    assert "tl::gemm_ss<128, 128, 32, 2, 2, false, false, false, 32, 128>" in text
    assert "fence_proxy_async" not in text


def lowered_with(func, arch, configs):
    from tilelang.engine.lower import LowerState
    from tilelang.engine.pipeline import PASSES

    st = LowerState(func, arch, "main", configs)
    for name, run in PASSES:
        if name == "emit_cuda":
            break
        run(st)
    return st


def test_sm90a_gemm_lowers_to_wgmma_with_proxy_fence():
    # cp.async feeding (TMA / warp specialisation off): wgmma kept in flight by the main loop.
    text = lowered_with(gemm(256, 256, 256, stages=3), "sm_90a", {"tl.disable_tma_lower": True}).lowered.script()
    # One warpgroup (128 threads) owns all 128 rows; the main loop keeps one wgmma in flight.
    assert "tl::wgmma_gemm_ss_async<128, 128, 32, 1, false, false, false>" in text
    assert "tl::gemm_ss<" not in text
    assert text.count("tl::cp_async_commit") == 2          # prologue: S-2 tiles ahead, plus one per iteration
    assert "tl::cp_async_wait<0>" in text                   # S-3 groups may stay pending
    assert "tl::wgmma_wait<1, 128>" in text and "tl::wgmma_wait<0, 128>" in text
    # cp.async writes are generic-proxy writes: fenced before the barrier the wgmma waits behind.
    assert text.index("tl::fence_proxy_async") < text.index("tl::wgmma_gemm_ss")


def test_sm90a_two_stage_pipeline_uses_synchronous_wgmma():
    text = lowered_with(gemm(256, 256, 256, stages=2), "sm_90a", {"tl.disable_tma_lower": True}).lowered.script()
    assert "tl::wgmma_gemm_ss<128, 128, 32, 1, false, false, false>" in text
    assert "wgmma_wait" not in text


def test_sm90a_gemm_main_loop_is_warp_specialised_with_tma():
    # (the register epilogue: tests/transform/test_persistent.py has the staged one)
    st = lowered_with(gemm(256, 256, 256, stages=3), "sm_90a", {"tl.disable_epilogue_staging": True})
    text = st.lowered.script()
    # One producer warpgroup after the 128 consumer threads: TMA boxes of A (128 x 32: one 64-byte
    # slab) and B (32 x 128: two 128-byte slabs), completing on full[s].
    assert st.extra_threads == 128
    assert [(t["param"], t["box"], t["swizzle"]) for t in st.tensormaps] == [(0, [32, 128], 64), (1, [64, 32], 128)]
    assert text.count("tl::tma_load_2d") == 3 and "cp_async" not in text
    assert "tl::mbarrier_arrive_expect_tx" in text and "16384" in text   # 8 KiB of A + 8 KiB of B per stage
    assert "tl::wgmma_gemm_ss_async<128, 128, 32, 1, false, false, false>" in text
    assert "tl::wgmma_wait<1, 128>" in text and '"tl::mbarrier_arrive"' in text
    # one consumer warpgroup of 128x128 floats: two blocks per SM, the producer's registers going to the
    # consumer (warp_specialize.plan_pair; the launch bound is st.min_blocks_per_sm)
    assert "tl::setmaxnreg_dec<40>" in text and "tl::setmaxnreg_inc<216>" in text and st.min_blocks_per_sm == 2
    # The accumulator is cleared, used and written back inside the consumer branch only: no access
    # to it before the role split's else branch, the clear and the write-back after it.
    consumer_start = text.index("else:", text.index("tl::prefetch_tma_descriptor"))
    assert "C_l[" not in text[:consumer_start]
    consumer = text[consumer_start:]
    assert consumer.index('= T.Cast("float32", 0)') < consumer.index("tl::wgmma_gemm_ss_async") < consumer.index("C[")


def test_sm90a_two_consumer_warpgroups_rebalance_registers():
    st = lowered_with(gemm(512, 512, 512, bm=128, bn=256, bk=64, stages=4, threads=256), "sm_90a", {})
    text = st.lowered.script()
    assert "tl::setmaxnreg_dec<40>" in text and "tl::setmaxnreg_inc<232>" in text
    assert text.count("tl::mbarrier_init") == 8 and "tl::fence_barrier_init" in text


def test_disable_warp_specialized_keeps_cp_async_feeding():
    st = lowered_with(gemm(256, 256, 256, stages=3), "sm_90a", {"tl.disable_warp_specialized": True})
    # no producer warpgroup, no TMA loads; the epilogue stage is still stored by TMA (C's map)
    assert st.extra_threads == 0 and [t["param"] for t in st.tensormaps] == [2]
    assert "tl::cp_async_commit" in st.lowered.script()


def test_disable_wgmma_keeps_mma_sync_on_sm90a():
    st = lowered_with(gemm(256, 256, 256, stages=3), "sm_90a", {"tl.disable_wgmma": True})
    assert "tl::gemm_ss<" in st.lowered.script() and "wgmma" not in st.lowered.script()
    # Three stages of A (128x32) and B (32x128) fp16 = 3 * 16 KiB.
    from tilelang.engine import lower
    assert lower(gemm(256, 256, 256, stages=3), "sm_80").dynamic_smem == 3 * 2 * 128 * 32 * 2
    # sm_90a (warp-specialised): the same ring and one more buffer for the wgmma group kept in flight
    # (warp_specialize.plan_ring) plus full/empty mbarriers, 8 bytes each per buffer,
    assert lower(gemm(256, 256, 256, stages=3), "sm_90a", pass_configs={"tl.disable_epilogue_staging": True}
                 ).dynamic_smem == 4 * 2 * 128 * 32 * 2 + 2 * 4 * 8
    assert lower(gemm(256, 256, 256, stages=3), "sm_90a", pass_configs={
        "tl.disable_epilogue_staging": True, "tl.disable_ring_extra_stage": True}).dynamic_smem == \
        3 * 2 * 128 * 32 * 2 + 2 * 3 * 8
    # and by default the 32 KiB epilogue stage, on the ring's bytes: two such blocks fit on an
    # SM, so the kernel keeps one tile per block (a persistent grid would keep them apart)
    art = lower(gemm(256, 256, 256, stages=3), "sm_90a")
    assert art.dynamic_smem == 4 * 2 * 128 * 32 * 2 + 2 * 4 * 8 and "NUM_SMS" not in art.grid[0]


def test_single_stage_pipeline_waits_every_iteration():
    text = lowered_text(gemm(256, 256, 256, stages=1))
    # one stage overlaps nothing: each copy is waited for on the spot; with 128 accumulator
    # registers live in the loop, as cp.async (lower_copy.COPY_STAGING_BUDGET), not plain loads
    assert "tl::cp_async_wait<0>" in text and "tl::copy_vec<16>" not in text
    assert "wait<2>" not in text


def test_unaligned_shape_gets_guards_and_no_wide_vectors():
    text = lowered_text(gemm(1000, 1000, 1001))
    # K = 1001 breaks 16-byte alignment of A's rows: element copies with bounds guards.
    assert "tl::cp_async_gs<16>" not in text.split("B_s")[0] or "cp_async_gs<2>" in text
    assert "< 1001" in text or "<= 1001" in text


def test_gemm_k_mismatch_is_located():
    @T.prim_func
    def bad(A: T.Tensor((64, 32), "float16"), B: T.Tensor((64, 64), "float16"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((64, 32), "float16")
            B_s = T.alloc_shared((64, 64), "float16")
            C_l = T.alloc_fragment((64, 64), "float32")
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.clear(C_l)
            T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C)

    with pytest.raises(TileLangCompileError) as info:
        tilelang.lower(bad, "sm_90a")
    (diag,) = info.value.diagnostics
    assert diag.code == "TL0101"
    assert diag.span.line == test_gemm_k_mismatch_is_located.__code__.co_firstlineno + 10
    assert "K mismatch" in diag.message
    assert "T.gemm(A_s, B_s, C_l)" in str(info.value)


def test_layout_conflict_names_buffer_and_both_layouts():
    @T.prim_func
    def bad(A: T.Tensor((64, 64), "float16"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((64, 64), "float16")
            C_l = T.alloc_fragment((64, 64), "float32")
            T.copy(A, A_s)
            T.clear(C_l)
            T.gemm(A_s, A_s, C_l)
            T.gemm(A_s, A_s, C_l, policy=T.GemmWarpPolicy.FullRow)
            T.copy(C_l, C)

    with pytest.raises(TileLangCompileError) as info:
        tilelang.lower(bad, "sm_80")   # on sm_90a both gemms take the same wgmma layout
    (diag,) = info.value.diagnostics
    assert diag.code == "TL0201"
    assert "C_l" in diag.message
    assert diag.span.line == test_layout_conflict_names_buffer_and_both_layouts.__code__.co_firstlineno + 9


def test_non_bijective_fragment_index_is_rejected_at_its_loop():
    @T.prim_func
    def bad(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            x = T.alloc_fragment((64, 64), "float32")
            y = T.alloc_fragment((64, 64), "float32")
            for i, j in T.Parallel(64, 64):
                y[i, j] = x[i, j // 2]
            T.copy(y, B)

    with pytest.raises(TileLangCompileError) as info:
        tilelang.lower(bad, "sm_90a")
    (diag,) = info.value.diagnostics
    assert diag.code == "TL0203"
    assert "'x'" in diag.message


def test_reduce_shape_mismatch():
    @T.prim_func
    def bad(A: T.Tensor((64, 64), "float32"), B: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=128):
            x = T.alloc_fragment((64, 64), "float32")
            r = T.alloc_fragment((32,), "float32")
            T.copy(A, x)
            T.reduce_sum(x, r, dim=1)
            T.copy(r, B)

    with pytest.raises(TileLangCompileError) as info:
        tilelang.lower(bad, "sm_90a")
    assert info.value.diagnostics[0].code == "TL0604"


def test_warp_policy_impossible():
    with pytest.raises(TileLangCompileError) as info:
        tilelang.lower(gemm(256, 256, 256, bm=16, bn=8, threads=256), "sm_90a")
    assert info.value.diagnostics[0].code == "TL0103"


def test_custom_shared_layout_pads_rows_and_disables_wide_vectors():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "gpu"))
    import language_kernels as lk

    art = tilelang.lower(lk.custom_layout(), "sm_90a")
    # 32 rows of 64 floats, physical rows of 65: (31 * 65 + 64) floats.
    assert art.dynamic_smem == (31 * 65 + 64 + 1) * 4 or art.dynamic_smem == 32 * 65 * 4
    assert "cp_async_gs<16>" not in art.source


def test_custom_layout_on_gemm_operand_is_rejected():
    @T.prim_func
    def bad(A: T.Tensor((64, 64), "float16"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((64, 64), "float16")
            T.annotate_layout({A_s: T.Layout((64, 64), lambda i, j: [j, i])})
            C_l = T.alloc_fragment((64, 64), "float32")
            T.copy(A, A_s)
            T.clear(C_l)
            T.gemm(A_s, A_s, C_l)
            T.copy(C_l, C)

    with pytest.raises(TileLangCompileError) as info:
        tilelang.lower(bad, "sm_90a")
    assert info.value.diagnostics[0].code == "TL0201"
    assert "swizzled" in info.value.diagnostics[0].message


def test_strided_tensor_indexes_with_its_strides():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "gpu"))
    import language_kernels as lk

    art = tilelang.lower(lk.strided_copy(), "sm_90a")
    assert art.params[0].strides == [80, 1]
    assert "* 80)" in art.source  # rows of X are 80 elements apart, not 64


def test_parallel_global_accesses_are_guarded_only_when_needed():
    def kernel_for(M, N, bm=64, bn=64):
        @T.prim_func
        def kernel(A: T.Tensor((M, N), "float32"), C: T.Tensor((M, N), "float32")):
            with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
                for i, j in T.Parallel(bm, bn):
                    C[by * bm + i, bx * bn + j] = A[by * bm + i, bx * bn + j] * 2.0

        return kernel

    ragged = lowered_text(kernel_for(100, 130))
    assert "< 100" in ragged  # stores skipped and loads zeroed outside the tensor
    assert "if_then_else" in ragged
    exact = lowered_text(kernel_for(128, 128))
    assert "if_then_else" not in exact and "< 128" not in exact
    off = tilelang.lower(kernel_for(100, 130), "sm_90a", pass_configs={"tl.disable_safe_memory_access": True})
    assert "< 100" not in off.source


def test_gemm_on_misaligned_subtile_is_rejected():
    @T.prim_func
    def bad(A: T.Tensor((64, 64), "float16"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((64, 64), "float16")
            B_s = T.alloc_shared((16, 64), "float16")
            C_l = T.alloc_fragment((64, 64), "float32")
            T.copy(A, A_s)
            T.copy(A[0:16, :], B_s)
            T.clear(C_l)
            T.gemm(A_s[:, 4:20], B_s, C_l)     # (columns 16:32 start at a 16-byte chunk: accepted)
            T.copy(C_l, C)

    with pytest.raises(TileLangCompileError) as info:
        tilelang.lower(bad, "sm_90a")
    assert "sub-tile" in info.value.diagnostics[0].message


def test_warp_specialised_kernel_keeps_every_consumer_barrier_off_the_producer():
    """An epilogue staged through shared memory (upstream's C_shared pattern) in a warp-specialised
    kernel: its barriers must be named barriers over the consumer threads (a __syncthreads would
    wait for the producer warpgroup forever); the generated CUDA compiles for sm_90a."""

    @T.prim_func
    def staged(A: T.Tensor((512, 512), "float16"), B: T.Tensor((512, 512), "float16"),
               C: T.Tensor((512, 512), "float16")):
        with T.Kernel(4, 4, threads=256) as (bx, by):
            A_s = T.alloc_shared((128, 64), "float16")
            B_s = T.alloc_shared((64, 128), "float16")
            C_s = T.alloc_shared((128, 128), "float16")
            C_l = T.alloc_fragment((128, 128), "float32")
            T.use_swizzle(4)
            T.clear(C_l)
            for k in T.Pipelined(8, num_stages=3):
                T.copy(A[by * 128, k * 64], A_s)
                T.copy(B[k * 64, bx * 128], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C_s)
            T.copy(C_s, C[by * 128, bx * 128])

    art = tilelang.lower(staged, "sm_90a")
    src = art.source
    assert art.block == [384, 1, 1] and len(art.tensormaps) == 3   # A, B loads; C stores
    body = src[src.index("__syncthreads();") + 1:]
    assert "__syncthreads" not in body                 # only the mbarrier-init barrier, before the split
    assert "tl::named_barrier_sync(1, 256)" in body    # the C_shared round trip
    producer, consumer = body.split("} else {", 1)
    assert "tl::tma_load_2d" in producer and "tma_store" not in producer and "named_barrier" not in producer
    assert "tl::setmaxnreg_inc<232>" in consumer and "tl::tma_store_2d(TL_TMAP(2)" in consumer


def test_a_thread_folds_its_row_into_four_independent_partial_results():
    """A row of 64 registers per thread: four partial results (chains of 16) combined as a tree,
    no init constant, then the warp butterfly; 4 registers per row keep the sequential fold."""
    def rows(R, N):
        @T.prim_func
        def kernel(A: T.Tensor((R, N), "float32"), B: T.Tensor((R,), "float32"), C: T.Tensor((R,), "float32")):
            with T.Kernel(1, threads=128) as _:
                x = T.alloc_fragment((R, N), "float32")
                r = T.alloc_fragment((R,), "float32")
                s = T.alloc_fragment((R,), "float32")
                T.copy(A, x)
                T.reduce_max(x, r, dim=1)
                T.reduce_sum(x, s, dim=1)
                T.copy(r, B)
                T.copy(s, C)
        return kernel

    text = lowered_text(rows(2, 4096), "sm_80")          # 64 lanes a row: 64 registers of it per thread
    fold = text[text.index("r_part = T.alloc_local((4,))"):text.index("tl::AllReduce<tl::MaxOp, 64")]
    assert "for w0 in T.serial(4, unroll=True):" in fold and "for w in T.serial(4, 64, unroll=True):" in fold
    assert "r_part[w % 4] = T.max(r_part[w % 4], x[" in fold
    assert "r_red = T.max(T.max(r_part[0], r_part[1]), T.max(r_part[2], r_part[3]))" in fold
    assert "-inf" not in fold
    assert "s_red = s_part[0] + s_part[1] + (s_part[2] + s_part[3])" in text
    short = lowered_text(rows(128, 32), "sm_80")          # 8 lanes a row: 4 registers of it per thread
    assert "_part" not in short and "r_red[u] = T.max(r_red[u], x[" in short


def _one_stage_attention(block_M, dim, block_N=128, threads=128, S=1024):
    """Upstream's one-stage flash attention body (S = Q K^T, online softmax, O += P V)."""
    @T.prim_func
    def kernel(Q: T.Tensor((S, dim), "float16"), K: T.Tensor((S, dim), "float16"),
               V: T.Tensor((S, dim), "float16"), O: T.Tensor((S, dim), "float16")):
        with T.Kernel(S // block_M, threads=threads) as bx:
            Q_s = T.alloc_shared((block_M, dim), "float16")
            K_s = T.alloc_shared((block_N, dim), "float16")
            V_s = T.alloc_shared((block_N, dim), "float16")
            s = T.alloc_fragment((block_M, block_N), "float32")
            p = T.alloc_fragment((block_M, block_N), "float16")
            o = T.alloc_fragment((block_M, dim), "float32")
            m = T.alloc_fragment((block_M,), "float32")
            m_prev = T.alloc_fragment((block_M,), "float32")
            l = T.alloc_fragment((block_M,), "float32")
            r = T.alloc_fragment((block_M,), "float32")
            T.copy(Q[bx * block_M, 0], Q_s)
            T.fill(o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity("float32"))
            for k in T.Pipelined(S // block_N, num_stages=1):
                T.copy(K[k * block_N, 0], K_s)
                T.gemm(Q_s, K_s, s, transpose_B=True, clear_accum=True)
                T.copy(m, m_prev)
                T.reduce_max(s, m, dim=1, clear=False)
                for i, j in T.Parallel(block_M, block_N):
                    s[i, j] = T.exp2((s[i, j] - m[i]) * 0.125)
                T.reduce_sum(s, r, dim=1)
                for i in T.Parallel(block_M):
                    l[i] = l[i] * T.exp2((m_prev[i] - m[i]) * 0.125) + r[i]
                for i, j in T.Parallel(block_M, dim):
                    o[i, j] *= T.exp2((m_prev[i] - m[i]) * 0.125)
                T.copy(s, p)
                T.copy(V[k * block_N, 0], V_s)
                T.gemm(p, V_s, o)
            for i, j in T.Parallel(block_M, dim):
                o[i, j] /= l[i]
            T.copy(o, O[bx * block_M, 0])
    return kernel


def test_fold_keeps_one_chain_per_row_where_the_loop_fragments_overflow_the_register_file():
    """128x128 attention tiles on one warpgroup: S, P and O take 320 registers a thread inside the
    loop, so each of a thread's four rows folds as one chain (four chains in all, no partials to
    spill); with 64-row tiles (two rows a thread, 160 registers) each row keeps four partials.
    (Thread widening, on by default, would run the big one on two warpgroups: switched off here.)"""
    big = lowered_text(_one_stage_attention(128, 128), "sm_90a", {"tl.enable_thread_widening": False})
    assert "m_part: T.float32" in big and "r_part: T.float32" in big
    assert "m_part = T.max(m_part, s[" in big and "m_part = T.alloc_local((4,))" not in big
    small = lowered_text(_one_stage_attention(64, 128), "sm_90a")
    assert "m_part = T.alloc_local((4,))" in small and "r_part = T.alloc_local((4,))" in small


@pytest.mark.parametrize("order", ["row", "col"])
def test_swizzled_blocks_walk_panels_in_launch_order(order):
    """T.use_swizzle(panel, order): every block index once, and the blocks launched one after
    another (blockIdx.x fastest) walk a panel of `panel` block rows (row) or columns (col) before
    the next, odd panels backwards as upstream's rasterization2DRow / Column; the row walk is the one tilelang.analysis.raster estimates for the hover. (The
    column walk used to start from the transposed launch order, so the blocks in flight together
    were scattered over the grid.)"""
    from tilelang.analysis import raster
    from tilelang.tir_utils import eval_int
    from tilelang.transform.kernel import analyze_kernel
    from tilelang.transform.layout_inference import infer_layouts
    from tilelang.transform.lower_tile_ops import Lowerer

    gx, gy, panel = 6, 4, 2

    @T.prim_func
    def kernel(A: T.Tensor((gy * 16, gx * 16), "float32")):
        with T.Kernel(gx, gy, threads=128) as (bx, by):
            T.use_swizzle(panel, order=order)
            for i, j in T.Parallel(16, 16):
                A[by * 16 + i, bx * 16 + j] = 1.0

    info = analyze_kernel(kernel)
    lw = Lowerer(info, infer_layouts(info, "sm_80"), {})
    binds = {b.var.name: b.value for b in lw._block_swizzle(panel, order)}
    walk = [tuple(eval_int(binds[v], {"bx": i % gx, "by": i // gx}) for v in ("by_swz", "bx_swz"))
            for i in range(gx * gy)]
    assert sorted(walk) == [(r, c) for r in range(gy) for c in range(gx)]
    if order == "row":
        assert walk == [raster.block_of(i, panel, gx, gy) for i in range(gx * gy)]
        assert {r for r, _ in walk[:panel * gx]} == {0, 1}
        # the second panel starts at the column where the first ended (upstream's serpentine)
        assert walk[panel * gx - 1] == (1, gx - 1) and walk[panel * gx] == (2, gx - 1)
    else:
        assert {c for _, c in walk[:panel * gy]} == {0, 1} and walk[:3] == [(0, 0), (0, 1), (1, 0)]
        assert walk[panel * gy - 1] == (gy - 1, 1) and walk[panel * gy] == (gy - 1, 2)


def test_tile_ops_under_an_if_on_the_thread_index_use_the_selected_threads():
    """Upstream's mask_op tests: a T.copy / T.Parallel over memory inside `if tx < 128` of a
    256-thread block is spread over threads 0..127 (they once skipped the excluded threads' share
    of the tile: wrong results on the H200). A tile op on a fragment there is still refused."""

    def kernel(parallel):
        @T.prim_func
        def main(A: T.Tensor((256, 128), "float16"), B: T.Tensor((256, 128), "float16")):
            with T.Kernel(2, threads=256) as bx:
                A_shared = T.alloc_shared((128, 128), "float16")
                tx = T.get_thread_binding(0)
                if tx < 128:
                    if parallel:
                        for i, k in T.Parallel(128, 128):
                            A_shared[i, k] = A[bx * 128 + i, k]
                    else:
                        T.copy(A[bx * 128, 0], A_shared)
                T.copy(A_shared, B[bx * 128, 0])
                if tx == 0:
                    B[bx * 128, 0] = A_shared[0, 0]

        return main

    for parallel in (True, False):
        src = tilelang.lower(kernel(parallel), "sm_80").source
        inner = src[src.index("if (((int)threadIdx.x) < 128)"):]
        inner = inner[:inner.index("__syncthreads")]
        # 128 threads cover the 128 x 128 tile: 16 x 8-element steps each (the T.Parallel loop
        # vectorized: transform/vectorize_parallel.py)
        assert ("i < 16" if parallel else "it < 16") in inner

    @T.prim_func
    def frag(B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=256):
            f = T.alloc_fragment((128,), "float32")
            tx = T.get_thread_binding(0)
            if tx < 128:
                T.fill(f, 1)
            T.copy(f, B)

    with pytest.raises(TileLangCompileError) as err:
        tilelang.lower(frag, "sm_80")
    assert "T.fill inside an `if` on the thread index" in err.value.diagnostics[0].message
