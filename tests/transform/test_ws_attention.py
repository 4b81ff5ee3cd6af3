"""Warp specialisation of a general loop body (flash attention on sm_90a): N-D TMA boxes for the
K / V tiles, a consumer body of synchronous wgmma that releases its stage at the end of the
iteration, and the reasons a loop keeps the cp.async path."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import tilelang.language as T
from tilelang.engine.lower import lower
from tilelang.transform.kernel import analyze_kernel
from tilelang.transform.layout_inference import infer_layouts
from tilelang.transform.lower_tile_ops import Lowerer
from tilelang.transform.warp_specialize import plan_or_reason

from test_lowering import lowered_text

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
import flash_attention as fa  # noqa: E402


def _plan(func, configs=None):
    info = analyze_kernel(func)
    return plan_or_reason(Lowerer(info, infer_layouts(info, "sm_90a"), configs or {}))


@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
def test_attention_tiles_are_tma_boxes_of_the_4d_tensors(layout):
    func = fa.flashattn.get_prim_func(2, 4, 512, 128, False, 1, layout, block_M=128, block_N=64, num_stages=2)
    ws, why = _plan(func)
    assert why is None and ws.gemm is None          # the general consumer body
    k_map = ws.tensormaps[0]
    # innermost first: D, then S (bhsd) or H (bshd)
    if layout == "bhsd":
        assert k_map["dims"] == [128, 512, 4, 2] and k_map["box"] == [64, 64, 1, 1]
        assert k_map["strides"] == [256, 512 * 256, 4 * 512 * 256]
    else:
        assert k_map["dims"] == [128, 4, 512, 2] and k_map["box"] == [64, 1, 64, 1]
        assert k_map["strides"] == [256, 4 * 256, 512 * 4 * 256]


def test_attention_consumers_release_each_stage_after_the_body():
    func = fa.flashattn.get_prim_func(2, 4, 512, 128, False, 1, "bhsd", block_M=128, block_N=128, num_stages=2)
    text = lowered_text(func, "sm_90a", {"tl.disable_wgmma_overlap": True, "tl.disable_persistent": True})
    assert text.count("tl::tma_load_4d") == 6        # Q, K and V, two 64-column slabs each
    consumer = text[text.index("tl::setmaxnreg_inc"):]
    loop = consumer[consumer.index("for k in range"):consumer.index("] / logsum[")]   # up to the epilogue
    assert "tl::wgmma_gemm_ss" in loop and "tl::wgmma_gemm_rs" in loop
    assert "__syncthreads" not in loop and "named_barrier_sync\", 1" not in loop   # no consumer-wide barrier
    assert "cp_async" not in loop
    # the release names the stage this iteration read, after the second gemm
    release = loop.index("tl::mbarrier_arrive")
    assert release > loop.index("tl::wgmma_gemm_rs")
    assert "tl_mbar[2 + k % 2]" in loop[release:release + 200]          # empty[k % S], S = 2


def test_a_staged_tile_read_after_the_loop_keeps_cp_async():
    @T.prim_func
    def kernel(A: T.Tensor((1024, 64), "float16"), B: T.Tensor((1024, 64), "float16"),
               C: T.Tensor((128, 64), "float32")):
        with T.Kernel(8, threads=128) as bx:
            A_s = T.alloc_shared((128, 64), "float16")
            B_s = T.alloc_shared((64, 64), "float16")
            S = T.alloc_fragment((128, 64), "float32")
            O = T.alloc_fragment((128, 64), "float32")
            T.copy(A[bx * 128, 0], A_s)
            T.clear(O)
            for k in T.Pipelined(16, num_stages=2):
                T.copy(B[k * 64, 0], B_s)
                T.gemm(A_s, B_s, S, transpose_B=True, clear_accum=True)
                for i, j in T.Parallel(128, 64):
                    O[i, j] += S[i, j]
            T.gemm(A_s, B_s, O, transpose_B=True)
            T.copy(O, C)

    ws, why = _plan(kernel)
    assert ws is None and why == "the staged tile 'B_s' is used outside the T.Pipelined loop"


def test_pass_configs_keep_the_cp_async_attention_loop():
    func = fa.flashattn.get_prim_func(2, 4, 512, 128, False, 1, "bhsd", block_M=128, block_N=128, num_stages=2)
    ws, why = _plan(func, {"tl.disable_tma_lower": True})
    assert ws is None and "tl.disable_tma_lower" in why



def test_three_stages_overlap_p_v_of_the_previous_iteration_with_the_softmax():
    func = fa.flashattn.get_prim_func(2, 4, 512, 128, False, 1, "bhsd", block_M=128, block_N=128, num_stages=3)
    text = lowered_text(func, "sm_90a", {"tl.disable_persistent": True})
    consumer = text[text.index("tl::setmaxnreg_inc"):]
    loop = consumer[consumer.index("for k in range"):]
    s_issue = loop.index("tl::wgmma_gemm_ss_async")
    pv_prev = loop.index("tl::wgmma_gemm_rs_async")
    assert s_issue < pv_prev < loop.index("tl::wgmma_wait<1, 64>")
    assert "(k + 2) % 3" in loop[pv_prev:pv_prev + 300]            # stage of iteration k - 1
    # P V of k-1 retires before the cast that overwrites P and the rescale of O
    wait_o = loop.index("tl::wgmma_wait<0, 64>\", T.address_of(acc_o")
    assert loop.index("tl::wgmma_fence_operand<64>") > wait_o
    assert wait_o < loop.index("acc_s_cast[w") and wait_o > loop.index("T.exp2")
    # V's stage k-1 is released after that wait; P V of the last iteration runs after the loop
    assert loop.index("tl_mbar[9 + (k - 1) % 3]") > wait_o
    after = loop[loop.index("tl::wgmma_gemm_rs<"):]
    assert after.index("tl::wgmma_gemm_rs<") < after.index("] / logsum[")
    off = lowered_text(func, "sm_90a", {"tl.disable_wgmma_overlap": True})
    assert "wgmma_gemm_rs_async" not in off and "wgmma_gemm_rs<" in off


def test_the_overlapped_attention_kernel_compiles_without_serialised_wgmma():
    import tilelang
    from tilelang.jit import nvcc

    func = fa.flashattn.get_prim_func(1, 2, 512, 128, False, 1, "bhsd", block_M=128, block_N=128, num_stages=3)
    art = tilelang.lower(func, "sm_90a", {"tl.enable_fast_math": True}, out_idx=[3])
    assert "tl::wgmma_gemm_rs_async" in art.source
    # ptxas warns ("wgmma.mma_async instructions are serialized") when it cannot keep the
    # asynchronous wgmma in flight, e.g. because their register operands are not safe
    _, log = nvcc._run_nvcc(art.source, "cubin", "sm_90a", art.compile_flags, ())
    assert "serialized" not in log


def test_k_and_v_tiles_get_barriers_of_their_own_when_p_v_overlaps():
    """With the overlap, V's tiles have full / empty barriers apart from K's: K's stage goes back
    as soon as S = Q K^T retired, V's once P V has, and two stages suffice."""
    func = fa.flashattn.get_prim_func(2, 4, 512, 128, False, 1, "bhsd", block_M=128, block_N=128, num_stages=2)
    text = lowered_text(func, "sm_90a", {"tl.disable_persistent": True})
    assert "tl_mbar = T.decl_buffer((10,)" in text     # 2 groups x (full, empty) x 2 stages, Q's pair
    producer = text[text.index("for k_tma in range"):text.index("tl::setmaxnreg_inc")]
    # each group: wait for its empty barrier, expect its own 32 KiB, load onto its full barrier
    assert producer.count("tl::mbarrier_arrive_expect_tx") == 2 and producer.count(", 32768)") == 2
    assert "tl_mbar[4 + k_tma % 2]" in producer and "tl_mbar[6 + k_tma % 2]" in producer
    assert producer.index("K_shared") < producer.index("tl_mbar[6 + k_tma % 2]") < producer.index("V_shared")
    consumer = text[text.index("tl::setmaxnreg_inc"):]
    loop = consumer[consumer.index("for k in range"):consumer.index("] / logsum[")]
    wait_s = loop.index("tl::wgmma_wait<1, 64>")
    release_k = loop.index("tl::mbarrier_arrive\", T.address_of(tl_mbar[4 + k % 2])")
    assert wait_s < release_k < loop.index("T.exp2")                  # K back before the softmax
    wait_v = loop.index("tl::mbarrier_wait\", T.address_of(tl_mbar[2 + k % 2]), k // 2 % 2)")
    release_v = loop.index("tl_mbar[6 + (k - 1) % 2]")
    assert loop.index("tl::wgmma_wait<0, 64>") < wait_v < release_v  # V of k-1 back after P V retired
    assert loop.index("tl::mbarrier_wait\", T.address_of(tl_mbar[k % 2])") < loop.index("wgmma_gemm_ss_async")


def test_every_consumer_thread_gives_k_back_right_after_s_retires():
    """The empty barriers count the 256 consumer threads and every one of them arrives, with no
    lane test: ptxas sank an arrive predicated on lane 0 below the softmax that follows it (the
    SASS of the peeled iteration had K's release after all 64 MUFU.EX2), so the producer loaded
    the next K that much later. Unpredicated, the arrive stays right after the wgmma wait."""
    func = fa.flashattn.get_prim_func(2, 4, 512, 128, False, 1, "bhsd", block_M=128, block_N=128, num_stages=2)
    text = lowered_text(func, "sm_90a", {"tl.disable_persistent": True})
    inits = re.findall(r'tl::mbarrier_init", T.address_of\(tl_mbar\[(\d+)\]\), (\d+)\)', text)
    assert sorted(int(c) for _, c in inits) == [1] * 5 + [256] * 5     # full: the TMA bytes; empty: threads
    consumer = text[text.index("tl::setmaxnreg_inc"):]
    assert "% 32 == 0" not in consumer                                  # no lane test anywhere
    for at in (consumer.index('tl::wgmma_wait<0, 64>", T.address_of(acc_s'),     # the peeled iteration
               consumer.index('tl::wgmma_wait<1, 64>", T.address_of(acc_s')):    # the loop
        next_line = consumer[at:].split("\n")[1].strip()
        assert next_line.startswith('T.call_extern("void", "tl::mbarrier_arrive", T.address_of(tl_mbar[4')


def test_non_causal_attention_runs_persistent_and_gives_back_the_last_v_stage_of_each_tile():
    func = fa.flashattn.get_prim_func(2, 4, 512, 128, False, 1, "bhsd", block_M=128, block_N=128, num_stages=2)
    text = lowered_text(func, "sm_90a")
    producer = text[text.index("if v >= 256"):text.index("tl::setmaxnreg_inc")]
    consumer = text[text.index("tl::setmaxnreg_inc"):]
    # both roles loop over the (batch, head, row block) tiles; the ring slot runs on across them
    assert "for tile_it_p in range" in producer and "for tile_it in range" in consumer
    assert "tl_mbar[4 + (tile_it_p * 4 + k_tma) % 2]" in producer
    assert "T.Div(bx + tile_it * num_blocks, 16)" in consumer                      # bz of the tile
    # P V of the tile's last iteration retires after the loop; then V's stage goes back
    tail = consumer[consumer.index("tl::wgmma_gemm_rs<"):]
    assert tail.index("tl_mbar[6 + (tile_it * 4 + 4 - 1) % 2]") < tail.index("] / logsum[")
    # O_shared has bytes of its own: thread 0 waits for the previous tile's TMA store of it just
    # before the tile's own writes (after a whole KV loop, not at the end of the previous tile), a
    # barrier then lets every consumer write; the last tile's stores are waited for after the loop
    wait = tail.index("tl::tma_store_wait<0>")
    assert wait < tail.index("named_barrier_sync", wait) < tail.index("O_shared[") < tail.index("tl::tma_store_4d")
    store = tail.index("tl::tma_store_arrive")
    assert "named_barrier_sync" not in tail[store:] and tail[store:].count("tl::tma_store_wait<0>") == 1
    # causal: the KV loop runs bx + 1 times, so a block takes row blocks x and 3 - x together
    # (``Persistent.paired_rows``), each role counting the ring slots it used
    causal = fa.flashattn.get_prim_func(2, 4, 512, 128, True, 1, "bhsd", block_M=128, block_N=128, num_stages=2)
    text = lowered_text(causal, "sm_90a")
    producer = text[text.index("if v >= 256"):text.index("tl::setmaxnreg_inc")]
    consumer = text[text.index("tl::setmaxnreg_inc"):]
    assert "tl_mbar[4 + T.truncmod(slots_issued + k_tma, 2)]" in producer
    assert "slots_issued = slots_issued + T.min(4, bx_p + 1)" in producer
    assert "slots_done = slots_done + T.min(4, bx_t + 1)" in consumer
    # pairs for all rounds but the last (then single tiles, longest first: ``_PairedTail``)
    assert ("bx_t: T.let[T.int32] = T.Select(tile_it >= tail_first, T.Select(tail_k_t < tail_nt, 3 - tail_j_t, "
            "tail_j_t), T.Select(T.truncmod(tile_it, 2) == 0, 3 - T.truncmod(bx + T.Div(tile_it, 2) * num_blocks, 2)"
            ) in consumer
    assert "tail_first: T.let[T.int32] = T.max(T.Div(16, num_blocks) - 1, 0) * 2" in text
    assert "for tile_it in range(tail_tiles)" in consumer
    plain = lowered_text(causal, "sm_90a", {"tl.disable_paired_tail_split": True})
    assert ("bx_t: T.let[T.int32] = T.Select(T.truncmod(tile_it, 2) == 0, "
            "3 - T.truncmod(bx + T.Div(tile_it, 2) * num_blocks, 2)") in plain
    assert "for tile_it in range(T.Div(16 - bx + num_blocks - 1, num_blocks) * 2)" in plain and "tail_" not in plain
    assert "tile_it * 4" not in consumer
    assert lower(causal, target="sm_90a").grid == ["min(16, NUM_SMS)", "1", "1"]   # 2 x 4 x 2 pairs
    assert "slots_" not in lowered_text(func, "sm_90a")      # tiles of equal length: slot it * n + k


def test_the_rescale_of_o_runs_under_the_next_s_and_the_first_iteration_is_peeled():
    """The rescale of O by the new row maxima moves into the next iteration, between the issue of
    S = Q K^T and that of P V (it then overlaps the tensor cores' S); iteration 0, which has no
    P V to finish, is peeled off, so the loop has no branch on the iteration around the wgmma
    (ptxas injected a wgmma wait before the rescale otherwise, C7517)."""
    func = fa.flashattn.get_prim_func(2, 4, 512, 128, False, 1, "bhsd", block_M=128, block_N=128, num_stages=2)
    text = lowered_text(func, "sm_90a", {"tl.disable_persistent": True})
    consumer = text[text.index("tl::setmaxnreg_inc"):]
    peeled = consumer[consumer.index("tl::mbarrier_wait\", T.address_of(tl_mbar[0]), 0)"):
                      consumer.index("for k in range(1, 4)")]
    assert "wgmma_gemm_rs" not in peeled and "tl::wgmma_wait<0, 64>\", T.address_of(acc_s" in peeled
    assert "acc_o[v_1] * scores_scale" not in peeled
    loop = consumer[consumer.index("for k in range(1, 4)"):consumer.index("] / logsum[")]
    body, tail = loop.split("\n        for v_1 in T.serial(64, unroll=True):\n            acc_o[v_1] = acc_o[v_1] * ", 1)
    assert "if k > 0" not in body and "tl::wgmma_wait<1, 64>" in body
    rescale = body.index("acc_o[v_1] = acc_o[v_1] * scores_scale")
    assert body.index("wgmma_gemm_ss_async") < rescale < body.index("wgmma_gemm_rs_async")
    assert body.count("acc_o[v_1] = acc_o[v_1] * scores_scale") == 1
    # after the loop: the last rescale, then P V of the last iteration, synchronous
    assert tail.index("scores_scale") < tail.index("tl::wgmma_gemm_rs<")


def test_the_causal_mask_is_built_only_where_it_bites():
    """A T.Parallel store of ``if_then_else(c, a, b)`` with c an integer comparison: interval
    analysis over the nest gives the scalar condition under which c holds everywhere; the store
    of a runs under it (a uniform branch), the nest as written otherwise. Causal attention: every
    KV tile left of the diagonal (k < bx) skips the mask, and its store of 0 is the first wgmma's
    scale-d = 0 (transform/fuse_clear.py); non-causal: the bound check folds to a fill of 0 (which
    ptxas turns into the first HGMMA's RZ inputs)."""
    causal = fa.flashattn.get_prim_func(2, 4, 512, 128, True, 1, "bhsd", block_M=128, block_N=128, num_stages=2)
    loop = lowered_text(causal, "sm_90a", {"tl.disable_persistent": True})
    loop = loop[loop.index("for k in range(1"):]
    branch = loop.index("if not 0 < bx - k:")
    assert branch < loop.index("T.if_then_else(bx * 128 +") < loop.index("wgmma_gemm_ss_async")
    assert "acc_s[v_1] = T.float32(0.0)" not in loop
    assert "T.address_of(acc_s[0]), T.Select(0 < bx - k, 0, 1))" in loop
    kept = lowered_text(causal, "sm_90a", {"tl.disable_persistent": True, "tl.disable_clear_fusion": True})
    kept = kept[kept.index("for k in range(1"):]
    branch = kept.index("if 0 < bx - k:")
    assert kept.index("acc_s[v_1] = T.float32(0.0)") > branch
    assert "T.address_of(acc_s[0]))" in kept and "T.Select" not in kept
    plain = fa.flashattn.get_prim_func(2, 4, 512, 128, False, 1, "bhsd", block_M=128, block_N=128, num_stages=2)
    text = lowered_text(plain, "sm_90a")
    assert "T.if_then_else" not in text and "acc_s[v_1] = T.float32(0.0)" in text and "T.Select" not in text


def test_the_producer_loads_q_and_the_next_tiles_q_during_the_epilogue():
    """Q, copied in front of the loop and read only by it, is the producer's: a TMA box per slab
    on a barrier pair of its own. In a persistent kernel the producer waits until the consumers
    gave the previous tile's Q back (right after the loop, before P V of the last iteration) and
    O_shared gets bytes of its own, since the next tile's Q lands while O is stored (here with
    one Q buffer: ``tl.disable_double_head_buffer``)."""
    func = fa.flashattn.get_prim_func(2, 4, 512, 128, False, 1, "bhsd", block_M=128, block_N=128, num_stages=2)
    text = lowered_text(func, "sm_90a", {"tl.disable_double_head_buffer": True})
    assert "tl_mbar = T.decl_buffer((10,)" in text      # the ring's 8, then Q's full (8) and empty (9)
    producer = text[text.index("for tile_it_p in range"):text.index("tl::setmaxnreg_inc")]
    q = producer.index("tl::mbarrier_wait\", T.address_of(tl_mbar[9]), tile_it_p % 2 ^ 1)")
    assert q < producer.index("tl::mbarrier_arrive_expect_tx\", T.address_of(tl_mbar[8]), 32768)") \
        < producer.index("T.address_of(Q_shared[8192])") < producer.index("for k_tma in range")
    consumer = text[text.index("tl::setmaxnreg_inc"):]
    assert "cp_async" not in consumer and "named_barrier_sync" not in consumer[:consumer.index("for k in range")]
    assert consumer.index("tl_mbar[8]), tile_it % 2)") < consumer.index("tl::wgmma_gemm_ss_async")
    after = consumer[consumer.index("tl_mbar[9]"):]
    assert after.index("tl::wgmma_gemm_rs<") < after.index("] / logsum[")      # Q goes back before P V
    assert _offset(text, "O_shared") - _offset(text, "Q_shared") >= 16384


def test_persistent_attention_double_buffers_q_where_shared_memory_holds_two():
    """With two stages of K and V (64 KiB each), O's 32 KiB and Q twice fit the 227 KiB of an
    SM: tile ``it`` reads Q buffer ``it % 2``, each with its full / empty pair (phase ``it // 2``),
    so the producer loads the next tile's Q as soon as it issued this tile's K / V, not once the
    consumers are past this tile's loop (here 320 tiles: more than the SMs). With three stages
    only one Q fits; with at most one tile per SM there is nothing to load ahead (one buffer)."""
    func = fa.flashattn.get_prim_func(2, 40, 512, 128, False, 1, "bhsd", block_M=128, block_N=128, num_stages=2)
    text = lowered_text(func, "sm_90a")
    assert "tl_mbar = T.decl_buffer((12,)" in text      # the ring's 8, Q's full 8-9 and empty 10-11
    producer = text[text.index("for tile_it_p in range"):text.index("tl::setmaxnreg_inc")]
    wait = producer.index('tl::mbarrier_wait", T.address_of(tl_mbar[10 + tile_it_p % 2]), tile_it_p // 2 % 2 ^ 1)')
    assert wait < producer.index('tl::mbarrier_arrive_expect_tx", T.address_of(tl_mbar[8 + tile_it_p % 2]), 32768)') \
        < producer.index("T.address_of(Q_shared[tile_it_p % 2 * 16384 + 8192])") < producer.index("for k_tma in range")
    consumer = text[text.index("tl::setmaxnreg_inc"):]
    assert consumer.index('tl_mbar[8 + tile_it % 2]), tile_it // 2 % 2)') < consumer.index("tl::wgmma_gemm_ss_async")
    assert consumer.count("T.address_of(Q_shared[tile_it % 2 * 16384])") == 2    # peeled first S = Q K^T, the loop's
    after = consumer[consumer.index("tl_mbar[10 + tile_it % 2]"):]
    assert after.index("tl::wgmma_gemm_rs<") < after.index("] / logsum[")      # Q goes back before P V
    assert _offset(text, "O_shared") - _offset(text, "Q_shared") >= 2 * 16384
    assert _offset(text, "tl_mbar") * 8 + 12 * 8 <= 227 * 1024
    three = fa.flashattn.get_prim_func(2, 40, 512, 128, False, 1, "bhsd", block_M=128, block_N=128, num_stages=3)
    assert "tl_mbar = T.decl_buffer((14,)" in lowered_text(three, "sm_90a")     # 12 for the ring, Q's pair
    one_wave = fa.flashattn.get_prim_func(2, 4, 512, 128, False, 1, "bhsd", block_M=128, block_N=128, num_stages=2)
    assert "tl_mbar = T.decl_buffer((10,)" in lowered_text(one_wave, "sm_90a")  # 16 tiles on 132 SMs
    causal = fa.flashattn.get_prim_func(2, 4, 512, 128, True, 1, "bhsd", block_M=128, block_N=128, num_stages=2)
    assert "tl_mbar = T.decl_buffer((12,)" in lowered_text(causal, "sm_90a")    # pairs: two tiles a block


def _offset(text, name):
    """Element offset of a shared buffer's view in the dynamic allocation."""
    import re

    decl = re.search(rf"{name} = T.decl_buffer\(.*", text).group(0)
    found = re.search(r"elem_offset=(\d+)", decl)
    return int(found.group(1)) if found else 0


def test_one_tile_per_block_loads_q_once_and_o_keeps_q_bytes():
    func = fa.flashattn.get_prim_func(2, 4, 512, 128, True, 1, "bhsd", block_M=128, block_N=128, num_stages=3)
    text = lowered_text(func, "sm_90a", {"tl.disable_persistent": True})
    producer = text[text.index("tl::setmaxnreg_dec"):text.index("tl::setmaxnreg_inc")]
    assert producer.count("T.address_of(Q_shared[") == 2 and "tl_mbar[13]" not in producer   # no wait for Q's return
    assert producer.index("T.address_of(Q_shared[8192])") < producer.index("for k_tma in range")
    consumer = text[text.index("tl::setmaxnreg_inc"):]
    assert "tl_mbar[13]" not in consumer and "cp_async" not in consumer
    assert _offset(text, "O_shared") == _offset(text, "Q_shared") == 0


def test_q_stays_with_the_consumers_where_the_producer_cannot_take_it():
    func = fa.flashattn.get_prim_func(2, 4, 512, 128, False, 1, "bhsd", block_M=128, block_N=128, num_stages=2)
    text = lowered_text(func, "sm_90a", {"tl.disable_tma_prologue": True})
    assert "tl_mbar = T.decl_buffer((8,)" in text and text.count("tl::tma_load_4d") == 4
    # Q is loaded by the consumers themselves (plain 16-byte copies: nothing overlaps with them)
    assert "tl::copy_vec<16>" in text[text.index("tl::setmaxnreg_inc"):]

    @T.prim_func
    def kernel(A: T.Tensor((1024, 64), "float16"), B: T.Tensor((1024, 64), "float16"),
               C: T.Tensor((1024, 64), "float16")):
        with T.Kernel(8, threads=128) as bx:
            A_s = T.alloc_shared((128, 64), "float16")
            B_s = T.alloc_shared((64, 64), "float16")
            S = T.alloc_fragment((128, 64), "float32")
            P = T.alloc_fragment((128, 64), "float16")
            O = T.alloc_fragment((128, 64), "float32")
            T.copy(A[bx * 128, 0], A_s)
            T.clear(O)
            for k in T.Pipelined(16, num_stages=2):
                T.copy(B[k * 64, 0], B_s)
                T.gemm(A_s, B_s, S, transpose_B=True, clear_accum=True)
                T.copy(S, P)
                T.gemm(P, B_s, O)
            T.copy(A_s, C[bx * 128, 0])        # A_s is read after the loop too: not a head
            T.copy(O, C[bx * 128, 0])

    ws, why = _plan(kernel)
    assert why is None and ws.heads == []


def test_where_q_cannot_keep_its_bytes_it_goes_back_at_the_end_of_the_tile():
    """Three stages of K and V leave no room for O_shared beside Q_shared in a persistent
    kernel: O keeps Q's bytes, and the consumers give Q back only after the tile's closing
    barrier (its TMA store has read O), so the next tile's Q cannot land on an O being stored."""
    func = fa.flashattn.get_prim_func(2, 4, 512, 128, False, 1, "bhsd", block_M=128, block_N=128, num_stages=3)
    text = lowered_text(func, "sm_90a")
    assert "for tile_it in range" in text and _offset(text, "O_shared") == _offset(text, "Q_shared") == 0
    consumer = text[text.index("tl::setmaxnreg_inc"):]
    release = consumer.index("tl::mbarrier_arrive\", T.address_of(tl_mbar[13]))")
    assert consumer.index("tl::tma_store_wait<0>") < consumer.rindex("tl::named_barrier_sync", 0, release) < release
    assert consumer.count("tl_mbar[13]") == 1


def test_the_ring_never_lends_its_bytes_to_a_tile_used_before_the_loop():
    """The producer starts filling the ring as the kernel starts, while the consumers still load
    A's tile and copy it into registers: the ring's stages must not share A_s's bytes although
    A_s is dead once the loop runs (they did, and causal attention with Q in registers read K
    where Q should have been)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "gpu"))
    import language_kernels as lk

    text = lowered_text(lk.a_in_registers(), "sm_90a")
    assert "k_tma" in text and "tl::wgmma_gemm_rs" in text
    a, b = _offset(text, "A_s"), _offset(text, "B_s")
    assert a + 128 * 64 <= b or b + 2 * 64 * 64 <= a


def _tile_decode(src, role):
    """(the kernel's grid-level bindings, trip count, the tile's bindings up to bz) of a persistent
    kernel's tile loop for ``role`` ("p": the producer's, "t": the consumers'), as C++ lines taken
    from its CUDA (``blockIdx.x`` read as ``b``)."""
    lines = src.splitlines()
    top = next(i for i, x in enumerate(lines) if "int num_blocks = tl::num_blocks();" in x)
    split = next(i for i in range(top, len(lines)) if lines[i].lstrip().startswith("if ("))
    it = "tile_it_p" if role == "p" else "tile_it"
    head = next(i for i, x in enumerate(lines) if re.search(rf"for \(int {it} = 0; ", x))
    count = re.search(rf"for \(int {it} = 0; {it} < (.*); \+\+{it}\) {{", lines[head]).group(1)
    last = next(i for i in range(head, len(lines)) if re.search(rf"int bz_{role} = ", lines[i]))
    body = [x.strip() for x in lines[head + 1:last + 1]]
    assert all(x.strip().startswith("int ") for x in lines[top + 1:split] + body)
    fix = lambda x: x.replace("((int)blockIdx.x)", "b")   # noqa: E731
    return [fix(x.strip()) for x in lines[top + 1:split]], fix(count), [fix(x) for x in body]


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs a host C++ compiler")
@pytest.mark.parametrize("B,H,S", [(2, 4, 512), (1, 3, 1000), (2, 1, 256)])
def test_paired_causal_tiles_cover_every_tile_once_with_even_work(tmp_path, B, H, S):
    """The paired persistent schedule, evaluated as the generated CUDA writes it (compiled for the
    host with both roles' index expressions): for grids of 1 .. pairs blocks, every (row block,
    head, batch) tile is taken exactly once, the producer and the consumers of a block walk the
    same tiles in the same order, and no block runs more KV iterations than a whole number of
    pairs' worth (row blocks x and gx - 1 - x: gx + 1 iterations); with the last rounds dealt as
    single tiles (the default, ``_PairedTail``) no more than the even share rounded up plus one
    short tile, and never more than pairs to the end."""
    _check_paired_schedule(tmp_path, B, H, S, {"tl.disable_paired_tail_split": True}, split=False)
    _check_paired_schedule(tmp_path, B, H, S, {}, split=True)


def test_paired_tail_split_evens_the_benchmark_grid(tmp_path):
    """Causal B8 H32 S4096 on 132 blocks: pairs to the end leave 4 blocks a 32nd pair (1056
    iterations against an even 1024); dealing the last rounds as single tiles ends at 1025."""
    if shutil.which("g++") is None:
        pytest.skip("needs a host C++ compiler")
    work = _check_paired_schedule(tmp_path, 8, 32, 4096, {}, split=True, grids=[132, 114, 7])
    assert max(work[132]) == 1025 and min(work[132]) >= 1023
    plain = _check_paired_schedule(tmp_path, 8, 32, 4096, {"tl.disable_paired_tail_split": True}, split=False,
                                   grids=[132])
    assert max(plain[132]) == 1056


def _check_paired_schedule(tmp_path, B, H, S, configs, split, grids=None):
    """Per grid, the KV iterations of each block (after checking coverage and the two roles)."""
    func = fa.flashattn.get_prim_func(B, H, S, 128, True, 1, "bhsd", block_M=128, block_N=128, num_stages=2)
    art = lower(func, target="sm_90a", pass_configs=configs)
    gx = -(-S // 128)
    pairs = gx // 2 * H * B
    assert art.grid == [f"min({pairs}, NUM_SMS)", "1", "1"]
    (grid_binds, count_p, p), (_, count_t, t) = _tile_decode(art.source, "p"), _tile_decode(art.source, "t")
    nl = "\n        "
    program = tmp_path / "decode.cpp"
    program.write_text(f"""#include <algorithm>
#include <cstdio>
using std::max;
using std::min;
namespace tl {{ inline int opaque(int x) {{ return x; }} }}
int main() {{
  for (int num_blocks : {{{", ".join(map(str, grids or range(1, pairs + 1)))}}}) {{
    for (int b = 0; b < num_blocks; ++b) {{
      {nl.join(grid_binds)}
      int n = {count_t};
      if (n != {count_p}) {{ printf("count %d %d\\n", num_blocks, b); return 1; }}
      int work = 0;
      for (int tile_it = 0; tile_it < n; ++tile_it) {{
        int tile_it_p = tile_it;
        {nl.join(p)}
        {nl.join(t)}
        if (bx_t != bx_p || by_t != by_p || bz_t != bz_p) {{ printf("roles %d %d\\n", num_blocks, b); return 1; }}
        work += bx_t + 1;
        printf("%d %d %d %d\\n", num_blocks, bx_t, by_t, bz_t);
      }}
      printf("work %d %d %d\\n", num_blocks, b, work);
    }}
  }}
  return 0;
}}
""")
    subprocess.run(["g++", "-O1", "-o", str(tmp_path / "decode"), str(program)], check=True)
    out = subprocess.run([str(tmp_path / "decode")], capture_output=True, text=True, check=True).stdout
    seen, work = {}, {}
    for line in out.splitlines():
        f = line.split()
        if f[0] == "work":
            work.setdefault(int(f[1]), []).append(int(f[3]))
        else:
            seen.setdefault(int(f[0]), []).append(tuple(map(int, f[1:])))
    every = sorted((x, y, z) for x in range(gx) for y in range(H) for z in range(B))
    total = sum(x + 1 for x, _, _ in every)
    for grid in grids or range(1, pairs + 1):
        assert sorted(seen[grid]) == every, grid
        pairs_to_the_end = -(-pairs // grid) * (gx + 1)
        if split:
            assert max(work[grid]) <= pairs_to_the_end, grid
            assert max(work[grid]) <= -(-total // grid) + gx // 2, grid
        else:
            assert max(work[grid]) == pairs_to_the_end, grid
    return work
