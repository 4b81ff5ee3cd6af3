"""Warp specialisation of a one-stage attention loop (``tl.enable_ws_single_stage``,
``warp_specialize._lower_windows``): K and V each get a full / empty mbarrier pair; the consumers
wait for K in front of S = Q K^T and give it back right after it, wait for V in front of
O += P V and give it back after it, so the producer loads the next K under the softmax and P V
and the next V under the next S = Q K^T. With the key unset, a grid of at most one block per SM
takes it (``attention_schedule.decide_single_stage``) and a larger grid keeps the cp.async path
(CUDA unchanged); True / False force either."""

import re

import sys
from pathlib import Path

import tilelang
import tilelang.language as T

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_copy_staging import attention_like  # noqa: E402  (the same one-stage attention loop)

SM90 = "cuda -arch=sm_90a"
KEY = "tl.enable_ws_single_stage"




def source(func, **configs):
    return tilelang.compile(func, target=SM90, pass_configs=configs).get_kernel_source()


def consumer_loop(src):
    body = src[src.index("for (int k = 0;"):]
    depth, i = 0, body.index("{")
    for i in range(body.index("{"), len(body)):
        depth += {"{": 1, "}": -1}.get(body[i], 0)
        if depth == 0:
            break
    return body[:i + 1]


def test_default_keeps_the_cp_async_path_where_the_fragments_fill_the_registers():
    src = source(attention_like(128, 1))     # 8 blocks, but 320 fragment registers a thread
    assert "mbarrier" not in src and "tma_load" not in src and "cp_async_gs" in src


def test_one_stage_attention_gets_a_barrier_pair_per_tile():
    src = source(attention_like(128, 1), **{KEY: True})
    assert "__launch_bounds__(256" in src and "tma_load" not in consumer_loop(src)
    inits = re.findall(r"tl::mbarrier_init\(\(&\(\(\(uint64_t\*\)smem\)\[(\d+)\]\)\), (\d+)\)", src)
    counts = sorted(int(c) for _, c in inits)
    assert counts == [1, 1, 1, 128, 128, 128]      # full / empty (every consumer thread) for K, V, Q
    loop = consumer_loop(src)
    waits = [m.start() for m in re.finditer(r"tl::mbarrier_wait", loop)]
    arrives = [m.start() for m in re.finditer(r"tl::mbarrier_arrive\(", loop)]
    g1, g2 = loop.index("wgmma_gemm_ss"), loop.index("wgmma_gemm_rs")
    assert len(waits) == 2 and len(arrives) == 2
    # wait K < S = Q K^T < give K back < wait V < O += P V < give V back
    assert waits[0] < g1 < arrives[0] < waits[1] < g2 < arrives[1]
    assert "(k & 1)" in loop                       # one buffer: the phase flips every iteration
    # the producer: for each iteration, wait until K is given back, load it, then the same for V
    prod = src[src.index("for (int k_tma = 0;"):]
    assert prod.index("tl::mbarrier_wait") < prod.index("tl::tma_load") \
        < prod.index("tl::mbarrier_wait", prod.index("tl::tma_load"))
    assert "^ 1)" in prod


def test_a_small_attention_goes_to_the_producer_not_to_the_early_loads():
    """64x64 tiles fit the attention schedule's register budget, whose early T.async_copy loads
    used to keep the loop off warp specialisation even with the key; asked for on sm_90a, the
    loop is left to it (bench_launch's small attention, upstream's schedule there)."""
    src = source(attention_like(64, 1, dim=64, block_M=64), **{KEY: True})
    assert "cp_async" not in src and "tl::tma_load" in src and "__launch_bounds__(256" in src
    assert len(re.findall(r"tl::mbarrier_wait", consumer_loop(src))) == 2


def test_unset_a_one_wave_grid_takes_the_producer():
    """16 blocks of 64x64 attention (fragments within the register budget): the key unset gives
    the warp-specialised kernel, False the cp.async one."""
    small = attention_like(64, 1, dim=64, block_M=64)
    auto = source(small)
    assert auto == source(small, **{KEY: True})
    assert "tl::tma_load" in auto and "cp_async" not in auto
    off = source(small, **{KEY: False})
    assert "cp_async" in off and "mbarrier" not in off


def test_unset_a_grid_of_many_waves_keeps_the_cp_async_path():
    # 133 blocks: more than the SMs (the default there is stage promotion: without it, cp.async)
    big = attention_like(64, 1, dim=64, block_M=64, S_LEN=64 * 133)
    plain = {"tl.enable_stage_promotion": False}
    assert source(big, **plain) == source(big, **{KEY: False, **plain})
    assert "mbarrier" not in source(big, **plain)


def test_the_decision_leaves_what_it_does_not_take_alone():
    from tilelang.transform.attention_schedule import decide_single_stage

    small = attention_like(64, 1, dim=64, block_M=64)
    configs = {"tl.some_key": 1}
    assert decide_single_stage(small, "sm_90a", configs) == {"tl.some_key": 1, KEY: True}
    assert configs == {"tl.some_key": 1}                                   # a new dict, not the caller's
    for func, arch, given in [(small, "sm_80", {}),                       # no TMA producer there
                              (small, "sm_90a", {KEY: False}),            # the user's word stands
                              (small, "sm_90a", {"tl.enable_one_stage_refill": True}),   # another schedule asked for
                              (small, "sm_90a", {"tl.disable_attention_schedule": True}),
                              (attention_like(64, 2, dim=64, block_M=64), "sm_90a", {}),   # two stages
                              (attention_like(128, 1), "sm_90a", {})]:     # 320 fragment registers
        assert decide_single_stage(func, arch, given) is given


def test_the_hover_describes_the_kernel_the_compiler_makes():
    from tilelang.analysis.summary import summarize

    small = attention_like(64, 1, dim=64, block_M=64)
    assert summarize(small, "sm_90a")["pipelines"][0]["warp_specialized"] is True
    assert summarize(small, "sm_90a", {KEY: False})["pipelines"][0]["warp_specialized"] is False


def test_two_stage_loops_are_unchanged_by_the_key():
    a = source(attention_like(128, 2))
    b = source(attention_like(128, 2), **{KEY: True})
    assert a == b



def test_the_sass_gives_k_back_right_after_its_wgmma_retires():
    """In the SASS of a one-stage attention with a softmax (benchmarks/bench_launch.py's, B2 H4
    S512 D64), K's release (SYNCS.ARRIVE on its empty barrier) comes right after the wait for
    S = Q K^T (WARPGROUP.DEPBAR), unpredicated. Released by lane 0 (``if lane == 0``), ptxas made
    it a predicated arrive and sank it below the softmax, after its 32 MUFU.EX2 (session 32), so
    the producer loaded the next K that much later. Needs cuobjdump or nvdisasm (not in CI)."""
    import pytest

    from tilelang.jit import nvcc

    if not (nvcc.find_cuda_tool("cuobjdump") or nvcc.find_cuda_tool("nvdisasm")):
        pytest.skip("no CUDA disassembler (cuobjdump / nvdisasm)")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import bench_launch

    _, _, attention = bench_launch.build_kernels()
    kernel = tilelang.compile(attention.get_prim_func(2, 4, 512, 64), out_idx=[3], target=SM90,
                              pass_configs={KEY: True})
    sass = [line.split(";")[0].split("*/", 1)[-1].strip()
            for line in kernel.get_sass().splitlines() if re.match(r"\s+/\*[0-9a-f]{4}\*/", line)]
    arrive = next(i for i, ins in enumerate(sass) if "SYNCS.ARRIVE.TRANS64.A1T0" in ins)
    wait = max(i for i in range(arrive) if sass[i].startswith("WARPGROUP.DEPBAR"))
    assert arrive - wait <= 2 and not any("MUFU.EX2" in ins for ins in sass[wait:arrive]), sass[wait:arrive + 1]
    assert not any(ins.startswith("@") and "SYNCS.ARRIVE.TRANS64.A1T0" in ins for ins in sass)


def test_a_loop_the_producer_cannot_take_keeps_the_early_loads():
    """64 threads (mma gemms, no wgmma): the one-wave default asks for a producer that
    warp_specialize refuses; the engine starts again without the key (the attention schedule's
    early loads, as before the default existed) and the hover says the same."""
    from tilelang.analysis.summary import summarize

    small = attention_like(64, 1, threads=64, dim=64, block_M=64)
    auto = source(small)
    assert auto == source(small, **{KEY: False})
    assert "mbarrier" not in auto and "tl::cp_async_wait<1>" in auto
    pipe = summarize(small, "sm_90a")["pipelines"][0]
    assert pipe["warp_specialized"] is False and "issued together at the top" in pipe["mechanism"]


def test_stage_promotion_gives_a_one_stage_attention_the_two_stage_path():
    """tl.enable_stage_promotion (on by default): a one-stage attention loop over many waves (140
    blocks) compiles as the same loop written with num_stages=2 (a TMA producer and a ring of two);
    with the key false it is left as written; a one-wave grid keeps the one-stage producer instead."""
    from tilelang.transform.attention_schedule import promote_stages

    big = dict(dim=64, block_M=64, S_LEN=64 * 140)
    one, two = attention_like(64, 1, **big), attention_like(64, 2, **big)
    promoted = source(one)
    assert promoted == source(two) and "mbarrier_wait" in promoted
    assert source(one, **{"tl.enable_stage_promotion": False}) != promoted
    assert "mbarrier" not in source(one, **{"tl.enable_stage_promotion": False})
    assert promote_stages(one, "sm_90a", {}) is not one                              # on by default
    assert promote_stages(one, "sm_90a", {"tl.enable_stage_promotion": False}) is one
    assert promote_stages(one, "sm_80", {}) is one                                   # sm_90+ only
    small = attention_like(64, 1, dim=64, block_M=64)                               # 16 blocks: one wave
    assert source(small) == source(small, **{"tl.enable_stage_promotion": False})


def _chunk_like(trips, blocks=264):
    """Two gemms a trip over ``trips`` 64-wide slices of the reduction dimension (upstream's gdn
    chunk_o shape: DK = block_DK makes one), in ``blocks`` blocks."""

    @T.prim_func
    def main(Q: T.Tensor((blocks * 64, trips * 64), T.float16), H: T.Tensor((trips * 64, 64), T.float16),
             K: T.Tensor((blocks * 64, trips * 64), T.float16), O: T.Tensor((blocks * 64, 64), T.float32),
             A: T.Tensor((blocks * 64, 64), T.float32)):
        with T.Kernel(blocks, threads=128) as bx:
            Q_s = T.alloc_shared((64, 64), T.float16)
            K_s = T.alloc_shared((64, 64), T.float16)
            H_s = T.alloc_shared((64, 64), T.float16)
            o = T.alloc_fragment((64, 64), T.float32)
            a = T.alloc_fragment((64, 64), T.float32)
            T.clear(o)
            T.clear(a)
            for k in T.Pipelined(trips, num_stages=1):
                T.copy(Q[bx * 64, k * 64], Q_s)
                T.copy(K[bx * 64, k * 64], K_s)
                T.copy(H[k * 64, 0], H_s)
                T.gemm(Q_s, H_s, o)
                T.gemm(Q_s, K_s, a, transpose_B=True)
            T.copy(o, O[bx * 64, 0])
            T.copy(a, A[bx * 64, 0])
    return main


def test_stage_promotion_leaves_a_loop_of_few_trips_as_written():
    """A constant trip count under PROMOTE_MIN_TRIPS keeps one stage: nothing much to load ahead,
    and the second buffers would cost blocks per SM (upstream's gdn chunk_o: one trip, 0.415 ->
    0.62 ms promoted on the H200)."""
    from tilelang.transform.attention_schedule import PROMOTE_MIN_TRIPS, promote_stages

    few, many = _chunk_like(PROMOTE_MIN_TRIPS - 1), _chunk_like(PROMOTE_MIN_TRIPS)
    assert promote_stages(few, "sm_90a", {}) is few
    assert promote_stages(many, "sm_90a", {}) is not many
    one = _chunk_like(1)                                   # upstream's gdn chunk_o: a single trip
    assert promote_stages(one, "sm_90a", {}) is one


def _varlen_like(blocks=140, block=64, dim=64):
    """attention_like whose K / V rows start at a value read from memory (a varlen kernel's
    ``kv_start_idx = cu_seqlens_k[bz]``)."""
    S = blocks * block

    @T.prim_func
    def main(Q: T.Tensor((S, dim), T.float16), K: T.Tensor((S, dim), T.float16), V: T.Tensor((S, dim), T.float16),
             starts: T.Tensor((blocks,), T.int32), O: T.Tensor((S, dim), T.float16)):
        with T.Kernel(blocks, threads=128) as bx:
            Q_s = T.alloc_shared((block, dim), T.float16)
            K_s = T.alloc_shared((block, dim), T.float16)
            V_s = T.alloc_shared((block, dim), T.float16)
            acc_s = T.alloc_fragment((block, block), T.float32)
            acc_p = T.alloc_fragment((block, block), T.float16)
            acc_o = T.alloc_fragment((block, dim), T.float32)
            start = starts[bx]
            T.copy(Q[bx * block, 0], Q_s)
            T.clear(acc_o)
            for k in T.Pipelined(blocks - bx, num_stages=1):
                T.copy(K[start + k * block, 0], K_s)
                T.gemm(Q_s, K_s, acc_s, transpose_B=True, clear_accum=True)
                T.copy(acc_s, acc_p)
                T.copy(V[start + k * block, 0], V_s)
                T.gemm(acc_p, V_s, acc_o)
            T.copy(acc_o, O[bx * block, 0])
    return main


def test_stage_promotion_leaves_loads_a_tma_producer_cannot_issue():
    """K / V addressed by a value the kernel reads (varlen): the promoted loop could not have a TMA
    producer, and two cp.async stages measured slower than the one-stage schedule (upstream's
    mha_fwd_varlen 2.21 -> 2.42 ms on the H200), so it keeps its stage; the same loop addressed by
    the block index is promoted."""
    from tilelang.transform.attention_schedule import promote_stages

    varlen = _varlen_like()
    assert promote_stages(varlen, "sm_90a", {}) is varlen
    assert "mbarrier" not in source(varlen)
    big = attention_like(64, 1, dim=64, block_M=64, S_LEN=64 * 140)
    assert promote_stages(big, "sm_90a", {}) is not big
