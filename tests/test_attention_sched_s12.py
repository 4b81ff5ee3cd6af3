"""Issue 20: upstream-style flash attention forward on our compiler (CPU: IR and generated CUDA).

- At B8 H32 S4096 D128, 128x128 tiles, 2 stages, 256 threads, upstream's example source
  (examples/flash_attention/example_mha_fwd_bhsd.py, unchanged) lowers to the same CUDA as our
  examples/flash_attention.py: the warp-specialised, overlapped schedule with the causal mask
  unswitched off the diagonal.
- transform/attention_schedule.py: a one-stage ``T.Pipelined`` attention loop issues its K and V
  loads together at the top of the body (two cp.async groups), waiting for each before its gemm
  (with ``tl.enable_pipeline_split_groups`` False; by default it refills each tile for the next
  iteration instead, tests/transform/test_one_stage_refill.py);
  anything not attention-shaped (one gemm, two stages, fragments filling the register file, user
  cp.async) is left alone.
- thread_sync: a ``T.async_copy`` tile counts as written where ``T.ptx_wait_group`` retires it.
"""

from __future__ import annotations

import importlib
import shutil
import sys
from pathlib import Path

import pytest

import tilelang
import tilelang.language as T
from tilelang.engine.lower import lower
from tilelang.transform import attention_schedule

ROOT = Path(__file__).resolve().parents[1]
UPSTREAM_FA = ROOT.parent / "shared" / "conformance" / "upstream" / "examples" / "flash_attention"
FAST = {"tl.enable_fast_math": True}
# (and no TMA producer: these 64x64 grids are one wave, which warp-specialises by default on sm_90a)
NO_REFILL = {"tl.enable_pipeline_split_groups": False, "tl.enable_ws_single_stage": False}


def _upstream(module):
    if not (UPSTREAM_FA / f"{module}.py").is_file():
        pytest.skip("upstream's examples are not beside the checkout")
    if str(UPSTREAM_FA) not in sys.path:
        sys.path.insert(0, str(UPSTREAM_FA))
    mod = importlib.import_module(module)
    factory = mod.flashattn
    return getattr(factory, "_target", factory)      # the @tilelang.jit under @autotune


def _ours():
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        import flash_attention
    finally:
        sys.path.remove(str(ROOT / "examples"))
    return flash_attention.flashattn


def _src(func, arch="sm_90a", **configs):
    return lower(func, target=arch, out_idx=[3], pass_configs={**FAST, **configs}).source


def _loop(src):
    """The text of the main KV loop (from its `for (int k` to the end)."""
    at = src.index("for (int k")
    return src[at:]


@pytest.mark.parametrize("causal", [False, True])
def test_upstream_style_bhsd_lowers_like_our_example(causal):
    up = _upstream("example_mha_fwd_bhsd").get_prim_func(8, 32, 4096, 4096, 128, causal, block_M=128, block_N=128,
                                                         num_stages=2, threads=256)
    ours = _ours().get_prim_func(8, 32, 4096, 128, causal, 1, "bhsd", block_M=128, block_N=128, num_stages=2,
                                 threads=256)
    a, b = _src(up), _src(ours)
    assert a == b
    assert "__launch_bounds__(384" in a            # two consumer warpgroups + the TMA producer
    assert "tl::cp_async" not in a                 # K, V and Q by TMA, no cp.async
    # the upstream-style source is not rewritten by the one-stage schedule
    assert _src(up, **{"tl.disable_attention_schedule": True}) == a


def _bshd_upstream(bm, bn, threads, causal=False):
    return _upstream("example_mha_fwd_bshd").get_prim_func(2, 4, 512, 64, causal, block_M=bm, block_N=bn,
                                                           num_stages=1, threads=threads)


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
@pytest.mark.parametrize("causal", [False, True])
def test_one_stage_attention_issues_k_and_v_together(arch, causal):
    # (by default such a loop refills each tile for the next iteration instead:
    # tests/transform/test_one_stage_refill.py; split groups off keeps this schedule)
    func = _bshd_upstream(64, 64, 128, causal)
    loop = _loop(_src(func, arch, **NO_REFILL))
    first_gemm = loop.index("gemm_")        # tl::wgmma_gemm_ss / tl::gemm_ss
    # both loads committed before the first gemm; K retired first (V still in flight), then V
    assert loop[:first_gemm].count("tl::cp_async_commit()") == 2
    assert "tl::cp_async_wait<1>()" in loop[:first_gemm]
    wait0 = loop.index("tl::cp_async_wait<0>()")
    assert wait0 > first_gemm
    # every thread's V lands before any thread's P V reads it: a barrier between the wait and the gemm
    after = loop[wait0:]
    second_gemm = after.index("gemm", after.index("__syncthreads"))
    assert "__syncthreads" in after[:second_gemm]
    assert "V[" in loop[:first_gemm]
    # disabled: each copy stays where it is written (V loaded after the softmax)
    plain = _loop(_src(func, arch, **{"tl.disable_attention_schedule": True}))
    assert "tl::cp_async_wait<1>()" not in plain
    assert "V[" not in plain[:plain.index("gemm_")] and "V[" in plain


def test_one_stage_attention_the_ir_rewrite():
    func = _bshd_upstream(64, 64, 128)
    new = attention_schedule.schedule(func, "sm_90a", NO_REFILL)
    assert not new.same_as(func)
    text = str(new.body)
    # both copies carry the T.async_copy flag (3) at the top of the loop body
    copies = [ln.strip() for ln in text.splitlines() if "tl_copy(" in ln and "K[" in ln or "V[" in ln]
    assert len(copies) == 2 and all(ln.endswith(", 0, 3)") for ln in copies)
    assert "tl::cp_async_wait<1>" in text and "tl::cp_async_wait<0>" in text
    assert attention_schedule.schedule(func, "sm_75", {}).same_as(func)               # no cp.async
    assert attention_schedule.schedule(func, "sm_90a", {"tl.disable_async_copy": True}).same_as(func)


def test_not_attention_shaped_is_left_alone():
    # one gemm per iteration (a GEMM main loop of one stage)
    @T.prim_func
    def gemm(A: T.Tensor((256, 256), "float16"), B: T.Tensor((256, 256), "float16"),
             C: T.Tensor((256, 256), "float32")):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            A_s = T.alloc_shared((128, 64), "float16")
            B_s = T.alloc_shared((64, 128), "float16")
            C_f = T.alloc_fragment((128, 128), "float32")
            T.clear(C_f)
            for k in T.Pipelined(4, num_stages=1):
                T.copy(A[by * 128, k * 64], A_s)
                T.copy(B[k * 64, bx * 128], B_s)
                T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C[by * 128, bx * 128])

    assert attention_schedule.schedule(gemm, "sm_90a", {}).same_as(gemm)
    # two stages: the pipeliner / warp specialisation own the loop
    two = _upstream("example_mha_fwd_bshd").get_prim_func(2, 4, 512, 64, False, block_M=64, block_N=64,
                                                          num_stages=2, threads=128)
    assert attention_schedule.schedule(two, "sm_90a", {}).same_as(two)
    # 128x128 tiles on one warpgroup: S, O and P already overfill the registers; kept as written
    big = _bshd_upstream(128, 128, 128)
    from tilelang.tir_utils import walk_stmts
    from tilelang.transform.pipelined_loop import is_pipelined

    loops = []
    walk_stmts(big.body, lambda s: loops.append(s) if is_pipelined(s) else None)
    regs = attention_schedule.loop_fragment_registers(big.body, loops[0], attention_schedule._threads(big.body))
    assert regs > attention_schedule.REGISTER_BUDGET
    assert attention_schedule.schedule(big, "sm_90a", {}).same_as(big)


def test_async_copy_lands_at_its_wait():
    """A barrier between a T.async_copy and the wait retiring it does not order the tile's data:
    the reader after the wait gets a barrier of its own."""
    @T.prim_func
    def k(A: T.Tensor((128, 64), "float16"), B: T.Tensor((128, 64), "float16"),
          C: T.Tensor((128, 64), "float16"), D: T.Tensor((128, 64), "float16")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((128, 64), "float16")
            B_s = T.alloc_shared((128, 64), "float16")
            a_f = T.alloc_fragment((128, 64), "float16")
            b_f = T.alloc_fragment((128, 64), "float16")
            T.async_copy(A, A_s)
            T.async_copy(B, B_s)
            T.ptx_wait_group(1)
            T.copy(A_s, a_f)
            T.ptx_wait_group(0)
            T.copy(B_s, b_f)
            T.copy(a_f, C)
            T.copy(b_f, D)

    src = lower(k, target="sm_90a").source
    body = src[src.index("__global__"):]
    wait1, wait0 = body.index("tl::cp_async_wait<1>()"), body.index("tl::cp_async_wait<0>()")
    assert "__syncthreads" in body[wait1:wait0]                    # A_s read after its wait
    after = body[wait0:]
    assert after.index("__syncthreads") < after.index("b_f")       # and B_s after its own


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_one_stage_attention_registers_no_spill():
    from tilelang.jit import nvcc

    func = _bshd_upstream(64, 64, 128)
    for configs in ({}, NO_REFILL, {"tl.disable_attention_schedule": True}):
        src = _src(func, **configs)
        info = next(iter(nvcc.ptxas_info(src, "sm_90a", ["--use_fast_math"]).values()))
        assert info.spill_stores == 0 and info.spill_loads == 0
        # (64 blocks, one wave: a warp-specialised block alone on its SM takes the producer's
        # registers, setmaxnreg 24 / 240: warp_specialize.plan_single_wave)
        assert info.registers <= (240 if "setmaxnreg_inc<240>" in src else 168)


def _two_gemm_loop(dependent_v):
    @T.prim_func
    def k(Q: T.Tensor((128, 64), "float16"), K: T.Tensor((512, 64), "float16"), V: T.Tensor((512, 64), "float16"),
          Idx: T.Tensor((4,), "int32"), O: T.Tensor((128, 64), "float32")):
        with T.Kernel(1, threads=128):
            Q_s = T.alloc_shared((128, 64), "float16")
            K_s = T.alloc_shared((64, 64), "float16")
            V_s = T.alloc_shared((64, 64), "float16")
            idx = T.alloc_fragment((1,), "int32")
            S = T.alloc_fragment((128, 64), "float32")
            P = T.alloc_fragment((128, 64), "float16")
            acc = T.alloc_fragment((128, 64), "float32")
            T.copy(Q, Q_s)
            T.clear(acc)
            for j in T.Pipelined(4, num_stages=1):
                idx[0] = Idx[j]
                T.copy(K[j * 64:(j + 1) * 64, :], K_s)
                T.clear(S)
                T.gemm(Q_s, K_s, S, transpose_B=True)
                T.copy(S, P)
                if dependent_v:
                    T.copy(V[idx[0] * 64:idx[0] * 64 + 64, :], V_s)
                else:
                    T.copy(V[j * 64:(j + 1) * 64, :], V_s)
                T.gemm(P, V_s, acc)
            T.copy(acc, O)

    return k


def test_loads_whose_rows_the_iteration_computes_stay_in_place():
    plain = _two_gemm_loop(False)
    assert not attention_schedule.schedule(plain, "sm_90a", {}).same_as(plain)
    dependent = _two_gemm_loop(True)
    assert attention_schedule.schedule(dependent, "sm_90a", {}).same_as(dependent)
