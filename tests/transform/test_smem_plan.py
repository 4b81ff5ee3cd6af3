"""Shared-memory planning (transform.smem_plan): buffers with disjoint lifetimes share bytes, the
barrier planner treats them as one buffer, and the checker and hovers count the same bytes."""

import tilelang
import tilelang.language as T
from tvm import tirx
from tilelang.analysis import check
from tilelang.transform import smem_plan, thread_sync
from tilelang.transform.kernel import analyze_kernel
from tilelang.transform.layout_inference import infer_layouts
from tilelang.transform.lower_tile_ops import Lowerer

from test_lowering import lowered_text


def test_first_fit_shares_bytes_only_between_disjoint_lifetimes():
    items = [smem_plan.Item("q", 1000, 128, (0, 3)), smem_plan.Item("k", 500, 128, (1, 3)),
             smem_plan.Item("o", 1000, 128, (4, 5)), smem_plan.Item("x", 100, 1024, (3, 4))]
    offsets, total = smem_plan.place(items)
    assert offsets == {"q": 0, "k": 1024, "o": 0, "x": 2048}   # o takes q's bytes; x overlaps all three
    assert total == 2148
    alias = smem_plan.aliases(items, offsets)
    assert alias == {"q": {"o"}, "o": {"q"}}


def test_all_live_together_is_the_plain_sequential_layout():
    items = [smem_plan.Item(n, 300, 128, (0, 1)) for n in "abc"]
    assert smem_plan.place(items) == ({"a": 0, "b": 384, "c": 768}, 1068)


def attention_like(block_M=128, block_N=64, dim=128, stages=2):
    @T.prim_func
    def kernel(Q: T.Tensor((4096, dim), "float16"), K: T.Tensor((4096, dim), "float16"),
               O: T.Tensor((4096, dim), "float16")):
        with T.Kernel(4096 // block_M, threads=128) as bx:
            Q_s = T.alloc_shared((block_M, dim), "float16")
            K_s = T.alloc_shared((block_N, dim), "float16")
            O_s = T.alloc_shared((block_M, dim), "float16")
            S = T.alloc_fragment((block_M, block_N), "float32")
            P = T.alloc_fragment((block_M, block_N), "float16")
            acc = T.alloc_fragment((block_M, dim), "float32")
            T.copy(Q[bx * block_M, 0], Q_s)
            T.clear(acc)
            for k in T.Pipelined(4096 // block_N, num_stages=stages):
                T.copy(K[k * block_N, 0], K_s)
                T.gemm(Q_s, K_s, S, transpose_B=True, clear_accum=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(S, P)
                T.gemm(P, K_s, acc, policy=T.GemmWarpPolicy.FullRow)
            T.copy(acc, O_s)
            T.copy(O_s, O[bx * block_M, 0])

    return kernel


def _lowerer(func, arch):
    info = analyze_kernel(func)
    return Lowerer(info, infer_layouts(info, arch), {})


def test_the_output_tile_takes_the_bytes_of_q_and_waits_for_its_last_reader():
    lw = _lowerer(attention_like(), "sm_80")
    views = {b.name: v for b, v in lw.smem_views.items()}
    assert int(views["O_s"].elem_offset) == int(views["Q_s"].elem_offset) == 0
    assert lw.smem_bytes == 128 * 128 * 2 + 2 * 64 * 128 * 2          # Q + two K stages; O is free
    # The barrier planner sees O_s's write after the loop as a write over Q_s's bytes.
    stmts = smem_plan.top_level(lw.info.body)
    o_write = next(k for k, s in enumerate(stmts) if "O_s" in str(s) and "acc" in str(s))
    assert o_write in thread_sync.plan_sequence(stmts, lw.smem_alias)[0]
    assert o_write not in thread_sync.plan_sequence(stmts)[0]          # what separate buffers would need
    text = lowered_text(attention_like(), "sm_80")
    tail = text[text.rindex("tl::cp_async_wait<0>"):]
    assert tail.index("__syncthreads") < tail.index("O_s[")


def test_checker_counts_the_shared_bytes_once():
    # 128x256 Q + O tiles (64 KiB each) and 3 x 128x256 K stages (192 KiB): 320 KiB as separate
    # buffers, 256 KiB with O on Q's bytes. On sm_90a (227 KiB) both are over; the note says why
    # the figure is smaller than the sum.
    (diag,) = [d for d in check(attention_like(128, 128, 256, 3), "sm_90a") if d.code == "TL0501"]
    assert "256 KiB" in diag.message
    assert any("'O_s' and 'Q_s'" in n.message for n in diag.notes)
    # 2 stages: 64 + 128 KiB fits; counted without sharing it would be 256 KiB, a false error
    assert not [d for d in check(attention_like(128, 128, 256, 2), "sm_90a") if d.code == "TL0501"]


def test_hover_summary_names_the_buffers_sharing_bytes():
    from tilelang_lsp.hover import shared_markdown
    from tilelang.analysis.summary import summarize

    summary = summarize(attention_like(), "sm_80")
    assert summary["buffers"]["O_s"]["shares_with"] == ["Q_s"]
    assert "shares_with" not in summary["buffers"]["K_s"]
    assert summary["smem_total"] == 128 * 128 * 2 + 2 * 64 * 128 * 2
    text = shared_markdown("O_s", summary["buffers"]["O_s"], summary)
    assert "shares its bytes with `Q_s`" in text


def _barriers(src):
    return src.count("__syncthreads()") + src.count("named_barrier_sync")


def test_occupancy_neutral_reuse_gives_small_buffers_their_own_bytes():
    """``tl.enable_occupancy_neutral_reuse`` (opt-in): by default the store's tile ``C_s`` takes
    the bytes of the row scale ``s_s`` (read in the loop), which costs a proxy fence after
    ``s_s``'s writes (its bytes are the TMA store's source); the barrier before ``C_s``'s write is
    the loop's own (``thread_sync.closes_with_barrier``). Apart they take 8 KiB more, which loses no
    block per SM (the registers bound the block count first), so with the key each keeps its own
    bytes, and that fence goes."""
    import tilelang
    from test_proxy_fences import scaled_rows_gemm_then_store

    key = {"tl.enable_occupancy_neutral_reuse": True}
    info = analyze_kernel(scaled_rows_gemm_then_store())
    shared = Lowerer(info, infer_layouts(info, "sm_90a"), {})
    apart = Lowerer(info, infer_layouts(info, "sm_90a"), key)
    assert shared.smem_alias and not shared.own_bytes
    assert apart.own_bytes and not apart.smem_alias
    assert apart.smem_bytes > shared.smem_bytes
    assert apart.blocks_per_sm(apart.smem_bytes) == shared.blocks_per_sm(shared.smem_bytes)
    plain = tilelang.lower(scaled_rows_gemm_then_store(), "sm_90a").source
    own = tilelang.lower(scaled_rows_gemm_then_store(), "sm_90a", pass_configs=key).source
    assert (_barriers(plain), _barriers(own)) == (4, 4)
    assert (plain.count("tl::fence_proxy_async"), own.count("tl::fence_proxy_async")) == (3, 2)

    def after_loop(src):       # the barriers between the loop's last gemm and the write of C_s
        tail = src[src.index("tl::wgmma_gemm_rs"):]
        return _barriers(tail[:tail.index("for (int w = 0;")])
    assert (after_loop(plain), after_loop(own)) == (1, 1)          # (the loop's own)


def test_occupancy_neutral_reuse_keeps_sharing_that_lets_two_blocks_in():
    """On sm_80 the attention tile O on Q's bytes is what lets two blocks share an SM (64 of
    164 KiB each, 96 KiB apart): the key leaves that sharing alone."""
    info = analyze_kernel(attention_like())
    lw = Lowerer(info, infer_layouts(info, "sm_80"), {"tl.enable_occupancy_neutral_reuse": True}, arch="sm_80")
    assert not lw.own_bytes
    views = {b.name: v for b, v in lw.smem_views.items()}
    assert int(views["O_s"].elem_offset) == int(views["Q_s"].elem_offset) == 0
    assert lw.blocks_per_sm(lw.smem_bytes) == 2
    assert lw.blocks_per_sm(lw.smem_bytes + 128 * 128 * 2) == 1


# the zero-stage loop as written: the one-gemm promotion (on by default since session 57) would give
# it a ring of three stages
AS_WRITTEN = {"tl.enable_zero_stage_promotion_any": False}


def scale_then_stage(blocks=2048, stages=0, carry=False):
    """Upstream's gated-delta-net W / U shape: each iteration loads a tile, scales it into another,
    multiplies, and stages the product for a store. ``carry``: the loaded tile is read before it
    is loaded again (its last row kept across iterations), so it is not private to an iteration."""
    S, D = 64, 64

    @T.prim_func
    def kernel(A: T.Tensor((blocks * S, S), "bfloat16"), K: T.Tensor((blocks * S, 4 * D), "bfloat16"),
               W: T.Tensor((blocks * S, 4 * D), "bfloat16")):
        with T.Kernel(blocks, threads=128) as bx:
            A_s = T.alloc_shared((S, S), "bfloat16")
            K_s = T.alloc_shared((S, D), "bfloat16")
            Kb_s = T.alloc_shared((S, D), "bfloat16")
            W_s = T.alloc_shared((S, D), "bfloat16")
            W_f = T.alloc_fragment((S, D), "float32")
            T.copy(A[bx * S, 0], A_s)
            for i in T.Pipelined(4, num_stages=stages):
                if carry:
                    for j in T.Parallel(D):
                        Kb_s[0, j] = K_s[S - 1, j]
                T.copy(K[bx * S, i * D], K_s)
                for s, d in T.Parallel(S, D):
                    Kb_s[s, d] = K_s[s, d] * 2.0
                T.gemm(A_s, Kb_s, W_f, clear_accum=True)
                T.copy(W_f, W_s)
                T.copy(W_s, W[bx * S, i * D])

    return kernel


def test_a_tile_private_to_loop_iterations_lends_its_bytes_within_the_iteration():
    """The staged product W_s is written after the last read of the loaded tile K_s in each
    iteration, and K_s is loaded whole before it is read: they share bytes (24 -> 16 KiB of loop
    tiles), and the barrier planner orders the TMA store's read of W_s before the next load."""
    func = scale_then_stage()
    info = analyze_kernel(func)
    live = smem_plan.live_ranges(info.body, info.shared_buffers())
    refined = {b.name: v for b, v in smem_plan.refine(info.body, live).items()}
    k = next(i for i, s in enumerate(smem_plan.top_level(info.body)) if isinstance(s, tirx.For))
    assert refined["K_s"] == ((k, 0), (k, 1)) and refined["Kb_s"] == ((k, 1), (k, 2))
    assert refined["W_s"] == ((k, 3), (k, 4)) and refined["A_s"] == (k - 1, k)
    lw = _lowerer(func, "sm_90a")
    assert lw.loop_reuse
    views = {b.name: int(v.elem_offset) for b, v in lw.smem_views.items()}
    assert views["W_s"] == views["K_s"] and views["Kb_s"] not in (views["K_s"], views["A_s"])
    assert lw.smem_bytes == 3 * 64 * 64 * 2
    src = tilelang.lower(func, "sm_90a", pass_configs=AS_WRITTEN).source   # (not promoted to a ring)
    body = src[src.index("for (int i = 0;"):]
    store = body.index("tl::tma_store_wait")
    assert "__syncthreads" in body[store:]          # before the next iteration loads over W_s's bytes


def test_only_serial_loops_whose_iterations_overwrite_the_tile_first_are_narrowed():
    for func in (scale_then_stage(stages=2), scale_then_stage(carry=True)):
        info = analyze_kernel(func)
        live = smem_plan.live_ranges(info.body, info.shared_buffers())
        refined = {b.name: v for b, v in smem_plan.refine(info.body, live).items()}
        assert not isinstance(refined["K_s"][0], tuple)
    # (carry: Kb_s's first use in the body is a one-row write, so it is not narrowed either)
    assert not isinstance(refined["Kb_s"][0], tuple)


def test_loop_private_sharing_is_kept_only_where_it_lets_more_blocks_onto_an_sm():
    many, one_wave = _lowerer(scale_then_stage(2048), "sm_90a"), _lowerer(scale_then_stage(64), "sm_90a")
    assert many.loop_reuse and many.smem_bytes == 3 * 8192
    assert not one_wave.loop_reuse and one_wave.smem_bytes == 4 * 8192     # one block an SM either way
    from tilelang.analysis.summary import summarize

    assert summarize(scale_then_stage(64), "sm_90a", AS_WRITTEN)["smem_total"] == 4 * 8192
    assert summarize(scale_then_stage(2048), "sm_90a", AS_WRITTEN)["buffers"]["W_s"]["shares_with"] == ["K_s"]


def test_a_copy_from_a_smaller_fragment_does_not_overwrite_the_whole_tile():
    """T.copy sizes its tile by the more local side: 32 rows of a 64-row tile are written, the other
    32 keep the last iteration's values, so the tile is not private to an iteration."""
    @T.prim_func
    def kernel(W: T.Tensor((256, 64), "float32")):
        with T.Kernel(8, threads=128) as bx:
            W_s = T.alloc_shared((64, 64), "float32")
            W_f = T.alloc_fragment((32, 64), "float32")
            for i in T.Pipelined(4, num_stages=0):
                T.fill(W_f, i + bx)
                T.copy(W_f, W_s)
                T.copy(W_s, W[i * 64, 0])

    info = analyze_kernel(kernel)
    live = smem_plan.live_ranges(info.body, info.shared_buffers())
    assert smem_plan.refine(info.body, live) == live
