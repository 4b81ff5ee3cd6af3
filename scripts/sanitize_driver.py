#!/usr/bin/env python3
"""The program scripts/sanitize.sh runs under compute-sanitizer: builds one or more of our kernels
through the JIT (disk cache: TILELANG_CACHE_DIR), launches each ONCE and checks the result against
torch computed on the CPU, so that the only kernels on the GPU are ours (the inputs reach the GPU
by plain copies and the results come back the same way).

    python3 scripts/sanitize_driver.py [--kernel gemm|fa|fa_causal|all ...] [--list]

Kernels (small shapes, chosen for the checks the sanitizers make):
    gemm       C = A @ B, fp16, 256 x 256 x 256, tiles 128x128x32, 3 pipeline stages, 128
               threads: 8 K iterations, not a multiple of the 3 stages
    gemm_persistent  the same GEMM on a persistent grid of 2 blocks (the launcher's SM count forced
               down): each block takes 2 of the 4 tiles, the mbarrier ring running on across them
    gemm_tma_epilogue  the persistent GEMM (2 blocks) with its epilogue through a swizzled shared
               tile written by TMA stores (tiles 128x128x64: the tile is reused for each block's
               second tile)
    gemm_cluster  the first GEMM in clusters of two blocks (tl.cluster_multicast): each block
               multicasts half of the B tile into both, remote mbarrier arrivals release the stages
    fa         flash attention fwd, fp16, BHSD B1 H2 S256 D64, not causal, tiles 128x64, 3 stages,
               256 threads: 4 KV iterations
    fa_causal  the same, causal: 2 KV iterations in the first row block (fewer than the stages), 4
               in the second; persistent, a block taking the two row blocks of a head as a pair
    fa_causal_persistent  fa_causal on one block (the launcher's SM count forced down): it takes
               both heads' pairs, 4, 2, 4, 2 KV iterations, the rings running on across them
    gemm_tf32 / gemm_tf32_rs  C = A B^T through tf32 wgmma (T.tfloat32 tiles), 256^3, tiles
               128x128x32, 3 stages, 128 threads; A read from shared memory / from registers
    gemv_er    y = A x, fp16, 512 x 640, 128x128 tiles, 3 stages, 256 threads: the early-release
               pipeline (each stage refilled right after its registers are read, x's slice loaded
               before the wait), 5 K iterations, not a multiple of the 3 stages
    zero_stage the zero-stage recurrence of tests/test_early_loads_zero_stage.py (4 steps, K, G
               and Dv loaded at the top of each step, each waited for before its first reader)
    fa_persistent  fa on a persistent grid of 2 blocks (the launcher's SM count forced down): each
               block takes 2 of the 4 (head, row block) tiles, the K and V rings running on
    fa_double_q  fa with 67 heads (134 tiles: more than the SMs, so Q gets two buffers, tile it
               reading buffer it % 2) on a persistent grid of 2 blocks
    refill     bench_launch's one-stage attention (B2 H4 S512 D64) with K and V refilled after
               their last reader (tl.enable_one_stage_refill)
    early_prologue  the same with K(0) and V(0) issued before Q's copy (tl.enable_early_prologue)
    bwd        upstream's mha_bwd_bshd and gqa_sink_bwd_bhsd (S256 D64, 2 and 4 heads) as compiled by
               default: the warp-specialised backward whose consumers give a slot of lse / Delta
               rows back early (fenced with __syncwarp, session 26), those rows loaded by tensor-map
               boxes (session 27: racecheck cannot order the raw bulk copies used before) and dQ's
               atomics staged through shared memory by whole lines (default since session 27);
               their main() checks against torch on the GPU
    dsv4_sparse  upstream's deepseek_v4 sparse_attn_fwd_sm90 (B1 S8 SKV512 H64 D512, top-128 random
               rows, some -1): the gathered cp.async pipeline whose iterations end without a
               barrier since session 29 (nothing after the last reissue touches shared memory)
    gemm_chunked  upstream's example_gemm_autotune kernel (bf16, 512 x 768 x 256, tiles 128x256x64, 3
               stages) with its epilogue chunked (tl.enable_chunked_epilogue, the default) on a persistent
               grid of 2 blocks: 3 tiles each, the two 64-column chunk tiles reused 6 times a block,
               each chunk's store waited for in front of the next one's barrier
    fa_pingpong / fa_causal_pingpong  fa_persistent / fa_causal_persistent with the consumer warpgroups
               taking turns at the tensor cores (tl.enable_warpgroup_pingpong true: named barriers
               3 and 4 handed back and forth around each iteration's gemm issues; by default since
               session 38 the paired causal schedule takes turns, so fa_causal* do as well)
    fa_converted  upstream's example_mha_fwd_bhsd (B1 H2 S256 D64, causal) at block_M = 64 on 256
               threads: the two warpgroups split S's columns, so P moves to whole rows through a
               shared workspace between two barriers (session 37's layout conversion), 4 KV tiles
    gemm_split_512  C = A @ B, fp16, 512^3, 256 x 256 tiles on 512 threads: 2 x 2 warpgroups of
               m64n128 (session 37: one m64n256 each would not fit __launch_bounds__(512))
    hoist      shared-memory exchanges under `if tx < 48` (64 threads) and under `if` on every 4th
               thread / `Mask[tx]` around a loop: the barrier split out of the branch (session 41)
    ordered_roles  attention in two computing T.ws roles ordered by mbarriers, TMA stages indexed
               by hand (session 43)
    closing_loop  a loop closed by its loop-back barrier with no barrier after it (session 43)
    bwd_head_barrier / bwd_in_place  the same with the loop-back barrier at the loop head
               (tl.enable_loop_head_barrier) / with dQ's in-place packed atomics
               (tl.enable_atomic_line_staging false)

Prints ``RESULT <kernel> PASS ...`` or ``RESULT <kernel> FAIL <reason>`` per kernel; exits 1 when
any kernel failed, 0 otherwise.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))
try:
    import tilelang  # noqa: F401
except ImportError:  # not installed: use the checkout's package
    sys.path.insert(0, str(ROOT))

GEMM_CASE = {"M": 256, "N": 256, "K": 256, "block_M": 128, "block_N": 128, "block_K": 32,
             "num_stages": 3, "threads": 128}
FA_CASE = {"B": 1, "H": 2, "S": 256, "D": 64, "block_M": 128, "block_N": 64, "num_stages": 3,
           "threads": 256}


def log(msg: str) -> None:
    print(msg, flush=True)


def run_gemm(sms: int | None = None, pass_configs=None, **over) -> str:
    import torch

    import gemm
    import tilelang
    from tilelang.jit import adapter_args

    if sms is not None:
        adapter_args._SM_COUNTS[torch.cuda.current_device()] = sms

    c = {**GEMM_CASE, **over}
    extra = {"smem_epilogue": True} if c.pop("smem_epilogue", False) else {}
    shape = dict(block_M=c["block_M"], block_N=c["block_N"], block_K=c["block_K"], num_stages=c["num_stages"],
                 threads=c["threads"], dtype="float16", **extra)
    # (gemm.matmul is @tilelang.jit(out_idx=[-1]); compiled here to pass the configs)
    kernel = tilelang.compile(gemm.matmul.get_prim_func(c["M"], c["N"], c["K"], **shape), out_idx=[-1],
                              pass_configs=pass_configs)
    log(f"  compiled {kernel.name}: grid over {c['M']}x{c['N']}, {c['K'] // c['block_K']} K iterations, "
        f"{c['num_stages']} stages")
    torch.manual_seed(0)
    a = torch.randn(c["M"], c["K"], dtype=torch.float16)
    b = torch.randn(c["K"], c["N"], dtype=torch.float16)
    out = kernel(a.cuda(), b.cuda())
    torch.cuda.synchronize()
    got = out.cpu().float()
    ref = a.float() @ b.float()
    torch.testing.assert_close(got, ref, rtol=1e-2, atol=1e-2)
    return f"max |diff| {(got - ref).abs().max().item():.3g}"


def run_chunked() -> str:
    import torch

    import tilelang
    from tilelang.jit import adapter_args

    sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "transform")]   # (it imports tests/host_cuda)
    from test_chunked_epilogue import KEY, upstream_gemm

    adapter_args._SM_COUNTS[torch.cuda.current_device()] = 2
    M, N, K = 512, 768, 256
    kernel = tilelang.compile(upstream_gemm(M, N, K), pass_configs=KEY)
    log(f"  compiled {kernel.name}: grid {kernel.artifact.grid}, "
        f"{kernel.get_kernel_source().count('tl::tma_store_2d')} chunk stores a tile")
    torch.manual_seed(0)
    a = torch.randn(M, K, dtype=torch.bfloat16)
    b = torch.randn(N, K, dtype=torch.bfloat16)
    c = torch.zeros(M, N, dtype=torch.bfloat16).cuda()
    kernel(a.cuda(), b.cuda(), c)
    torch.cuda.synchronize()
    got = c.cpu().float()
    ref = a.float() @ b.float().T
    torch.testing.assert_close(got, ref, rtol=2e-2, atol=2e-1)
    return f"max |diff| {(got - ref).abs().max().item():.3g}"


def run_fa(causal: bool, pass_configs=None, sms: int | None = None, heads: int | None = None) -> str:
    import torch
    import torch.nn.functional as F

    import flash_attention as fa
    import tilelang
    from tilelang.jit import adapter_args

    if sms is not None:
        adapter_args._SM_COUNTS[torch.cuda.current_device()] = sms
    c = FA_CASE if heads is None else {**FA_CASE, "H": heads}
    func = fa.flashattn.get_prim_func(c["B"], c["H"], c["S"], c["D"], causal, 1, "bhsd", block_M=c["block_M"],
                                      block_N=c["block_N"], num_stages=c["num_stages"], threads=c["threads"])
    kernel = tilelang.compile(func, out_idx=[3], pass_configs={"tl.enable_fast_math": True, **(pass_configs or {})})
    log(f"  compiled {kernel.name}: B{c['B']} H{c['H']} S{c['S']} D{c['D']} causal={causal}, "
        f"{c['S'] // c['block_N']} KV tiles, {c['num_stages']} stages")
    torch.manual_seed(0)
    q, k, v = (torch.randn(c["B"], c["H"], c["S"], c["D"], dtype=torch.float16) for _ in range(3))
    out = kernel(q.cuda(), k.cuda(), v.cuda())
    torch.cuda.synchronize()
    got = out.cpu().float()
    ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
    torch.testing.assert_close(got, ref, rtol=1e-2, atol=1e-2)
    return f"max |diff| {(got - ref).abs().max().item():.3g}"


def run_tf32(a_in_registers: bool) -> str:
    import torch

    import tilelang

    sys.path.insert(0, str(ROOT / "tests"))
    from test_tf32_wgmma import tf32_matmul

    M, N, K = 256, 256, 256
    kernel = tilelang.compile(tf32_matmul(M, N, K, 128, 128, 32, a_in_registers=a_in_registers))
    log(f"  compiled {kernel.name}: tf32 wgmma {'rs' if a_in_registers else 'ss'}, {K // 32} K iterations, 3 stages")
    torch.manual_seed(0)
    a, b = torch.randn(M, K), torch.randn(N, K)
    c = torch.empty(M, N, device="cuda")
    kernel(a.cuda(), b.cuda(), c)
    torch.cuda.synchronize()
    got, ref = c.cpu().double(), a.double() @ b.double().T
    err = ((got - ref).abs().max() / ref.abs().max()).item()
    if not err < 5e-3:
        raise AssertionError(f"relative error {err:.3g}")
    return f"relative error {err:.3g}"


def run_gemv_er() -> str:
    import torch

    import tilelang

    sys.path.insert(0, str(ROOT / "tests"))
    from test_pipeline_early_release import _gemv

    M, N = 512, 640
    kernel = tilelang.compile(_gemv(M=M, N=N, stages=3))
    log(f"  compiled {kernel.name}: early-release pipeline, {N // 128} K iterations, 3 stages")
    torch.manual_seed(0)
    a, x = torch.randn(M, N, dtype=torch.float16), torch.randn(N, dtype=torch.float16)
    o = torch.empty(M, device="cuda", dtype=torch.float16)
    kernel(a.cuda(), x.cuda(), o)
    torch.cuda.synchronize()
    got, ref = o.cpu().float(), (a.float() * x.float()).sum(1)
    torch.testing.assert_close(got, ref, atol=0.25, rtol=2e-2)
    return f"max |diff| {(got - ref).abs().max().item():.3g}"


def run_zero_stage() -> str:
    import torch

    import tilelang

    sys.path.insert(0, str(ROOT / "tests"))
    sys.path.insert(0, str(ROOT / "tests" / "gpu"))
    import test_early_loads_zero_stage as z
    from test_early_loads_zero_stage_gpu import _reference

    kernel = tilelang.compile(z.recurrence())
    log(f"  compiled {kernel.name}: {z.S // 64} steps, three loads at the top of each")
    torch.manual_seed(0)
    K = (torch.randn(z.B, z.S, z.D) * 0.1).bfloat16()
    G = torch.rand(z.B, z.S, 2) * -0.5
    Dv = (torch.randn(z.S, z.D) * 0.1).bfloat16()
    Idx = torch.arange(z.S // 64, dtype=torch.int32)
    O = torch.empty(z.B, z.S, z.D, device="cuda")
    H = torch.empty(z.B, z.D, z.D, device="cuda")
    kernel(K.cuda(), G.cuda(), Dv.cuda(), Idx.cuda(), O, H)
    torch.cuda.synchronize()
    o_ref, h_ref = _reference(K, G, Dv, Idx, "plain")
    torch.testing.assert_close(H.cpu(), h_ref, atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(O.cpu(), o_ref, atol=2e-2, rtol=2e-2)
    return f"max |diff| {(H.cpu() - h_ref).abs().max().item():.3g}"


def run_streaming() -> str:
    """Session 23: a register-streaming gemv (``__launch_bounds__(T, 1)``), a shared-memory cumsum
    whose repeated barriers were dropped, and a per-thread loop whose stores past a dynamic row's
    end are skipped: tests/gpu/test_launch_streaming_gpu.py's checks, run here."""
    sys.path.insert(0, str(ROOT / "tests" / "gpu"))
    import test_launch_streaming_gpu as g

    g.test_streaming_gemv({})
    g.test_shared_cumsum()
    g.test_stores_past_the_row_are_skipped(1000)
    return "gemv, cumsum and row clean match torch"


def run_widened() -> str:
    """Session 24 (default since 25): upstream's one-stage 128x128 attention widened to 256 threads
    (``tl.enable_thread_widening``): tests/gpu/test_widen_threads_gpu.py's check, run here."""
    sys.path.insert(0, str(ROOT / "tests" / "gpu"))
    import test_widen_threads_gpu as g

    g.test_one_stage_attention({})      # widened by default
    return "widened one-stage attention matches torch"


def run_ws_early_release() -> str:
    """Session 24 (default since 25): a block-scaled GEMM whose consumers give the ring slot back
    right after the wgmma (``tl.enable_ws_early_release``): tests/gpu/test_ws_early_release_gpu.py's
    check."""
    sys.path.insert(0, str(ROOT / "tests" / "gpu"))
    import test_ws_early_release_gpu as g

    g.test_scaled_gemm({}, False)       # early release by default
    return "early-release scaled GEMM matches torch"


def run_ws_single_stage() -> str:
    """A one-stage attention, warp-specialised (``tl.enable_ws_single_stage``): K and V each in one
    buffer, given back by every consumer thread right after its last reader (session 32), the
    producer loading the next one into the same bytes: tests/gpu/test_ws_single_stage_gpu.py's
    check at S=1024, causal (needs upstream's examples, as that test)."""
    sys.path.insert(0, str(ROOT / "tests" / "gpu"))
    import test_ws_single_stage_gpu as g

    g.test_one_stage_mha_bshd_matches_torch(True, True)
    return "one-stage warp-specialised attention matches torch"


def run_refill(early_prologue: bool = False) -> str:
    """Session 25 (opt-in ``tl.enable_one_stage_refill``): a one-stage attention whose K and V tiles
    are refilled for the next iteration right after their last reader: bench_launch's attention
    (B2 H4 S512 D64, 64x64 tiles), checked against SDPA on the CPU (cuDNN's SDPA on the GPU
    overflows synccheck's barrier tracking)."""
    import torch
    import torch.nn.functional as F

    import tilelang

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_launch import build_kernels

    func = build_kernels()[2].get_prim_func(2, 4, 512, 64)
    configs = {"tl.enable_one_stage_refill": True, **({"tl.enable_early_prologue": True} if early_prologue else {})}
    kernel = tilelang.compile(func, out_idx=[3], pass_configs=configs)
    if "if (kb < 7)" not in kernel.get_kernel_source():
        raise AssertionError("the kernel was not refilled (no 'if (kb < 7)' refill guard in its CUDA)")
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 512, 64, dtype=torch.float16) for _ in range(3))
    out = kernel(q.cuda(), k.cuda(), v.cuda())
    torch.cuda.synchronize()
    got = out.cpu().float()
    ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float())
    torch.testing.assert_close(got, ref, rtol=1e-2, atol=1e-2)
    return f"max |diff| {(got - ref).abs().max().item():.3g}"


def run_bwd(config: str) -> str:
    """Upstream's attention backward examples (mha_bwd_bshd, gqa_sink_bwd_bhsd) at small shapes
    under one of tests/gpu/test_bwd_schedules_gpu.py's configurations (``default``: no pass
    configs); their main() checks against torch's autograd."""
    import json

    sys.path.insert(0, str(ROOT / "tests" / "gpu"))
    import test_bwd_schedules_gpu as g

    os.environ["TILELANG_PASS_CONFIGS"] = json.dumps(g.CONFIGS[config])
    try:
        for case in [("flash_attention", "example_mha_bwd_bshd"), ("attention_sink", "example_gqa_sink_bwd_bhsd")]:
            g.run_example(*case, **{**g.CASES[case], "H": 2 * g.CASES[case].get("groups", 1)})
    finally:
        del os.environ["TILELANG_PASS_CONFIGS"]
    return f"mha_bwd_bshd and gqa_sink_bwd_bhsd ({config}) match torch"


def run_dsv4_sparse() -> str:
    """Upstream's deepseek_v4 sparse_attn_fwd_sm90 at a small shape against its own torch reference
    on the CPU (``torch_sparse_attention``)."""
    import torch

    sys.path.insert(0, str(ROOT / "tests"))
    from upstream_paths import examples

    base = examples("deepseek_v4")
    if base is None:
        raise RuntimeError("upstream's examples/deepseek_v4 not found (tests/upstream_paths.py)")
    sys.path.insert(0, str(base))
    import sparse_attn_fwd_sm90 as m

    B, S, SKV, H, D, TOPK = 1, 8, 512, 64, 512, 128
    torch.manual_seed(0)
    q = torch.randn(B, S, H, D, dtype=torch.bfloat16)
    kv = torch.randn(B, SKV, D, dtype=torch.bfloat16)
    sink = torch.randn(H, dtype=torch.bfloat16)
    idx = torch.randint(0, SKV, (B, S, TOPK), dtype=torch.int32)
    idx[:, :, -5:] = -1                                   # padding rows: masked, their loads skipped
    kernel = m.sparse_attn_fwd(B, H, S, SKV, D, TOPK, dtype=m.T.bfloat16)
    out = kernel(q.cuda(), kv.cuda(), idx.cuda(), sink.cuda())
    torch.cuda.synchronize()
    got = out.cpu().float()
    valid = idx.clamp(min=0)
    # the example's torch_sparse_attention with the -1 rows masked (it gathers them as row 0)
    rows = torch.gather(kv[:, None].expand(B, S, SKV, D).float(), 2, valid[..., None].expand(B, S, TOPK, D).long())
    scores = torch.einsum("bmhd,bmtd->bmht", q.float(), rows) / D ** 0.5
    scores[..., -5:] = float("-inf")
    attn = torch.softmax(torch.cat([scores, sink.float()[None, None, :, None].expand(B, S, H, 1)], -1), -1)
    ref = torch.einsum("bmht,bmtd->bmhd", attn[..., :-1], rows)
    torch.testing.assert_close(got, ref.to(torch.bfloat16).float(), rtol=2e-2, atol=2e-2)
    return f"max |diff| {(got - ref).abs().max().item():.3g}"


def run_fa_converted() -> str:
    import importlib.util

    import torch
    import torch.nn.functional as F

    sys.path.insert(0, str(ROOT / "tests"))
    from upstream_paths import examples

    base = examples("flash_attention")
    if base is None:
        raise RuntimeError("upstream's examples/flash_attention not found (tests/upstream_paths.py)")
    spec = importlib.util.spec_from_file_location("example_mha_fwd_bhsd_sanitize", base / "example_mha_fwd_bhsd.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    flashattn = getattr(mod.flashattn, "_target", mod.flashattn)     # the jit factory beneath @autotune
    B, H, S, D = 1, 2, 256, 64
    kernel = flashattn(B, H, S, S, D, True, block_M=64, block_N=64, num_stages=1, threads=256)
    if "tl::Warpgroups<1, 2>" not in kernel.get_kernel_source():
        raise AssertionError("the warpgroups do not split S's columns: nothing converts")
    torch.manual_seed(0)
    q, k, v = (torch.randn(B, H, S, D, dtype=torch.float16) for _ in range(3))
    out = kernel(q.cuda(), k.cuda(), v.cuda())
    torch.cuda.synchronize()
    got = out.cpu().float()
    ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=True)
    torch.testing.assert_close(got, ref, rtol=1e-2, atol=1e-2)
    return f"max |diff| {(got - ref).abs().max().item():.3g}"


def run_gemm_split_512() -> str:
    import torch

    import tilelang
    import tilelang.language as T

    M = N = K = 512

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(N // 256, M // 256, threads=512) as (bx, by):
            A_s = T.alloc_shared((256, 64), "float16")
            B_s = T.alloc_shared((64, 256), "float16")
            C_l = T.alloc_fragment((256, 256), "float32")
            T.clear(C_l)
            for k in T.Pipelined(K // 64, num_stages=2):
                T.copy(A[by * 256, k * 64], A_s)
                T.copy(B[k * 64, bx * 256], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * 256, bx * 256])

    kernel = tilelang.compile(main)
    if "tl::Warpgroups<2, 2>" not in kernel.get_kernel_source():
        raise AssertionError("not split 2 x 2")
    torch.manual_seed(0)
    a = torch.randn(M, K, dtype=torch.float16)
    b = torch.randn(K, N, dtype=torch.float16)
    c = torch.empty(M, N, dtype=torch.float16).cuda()
    kernel(a.cuda(), b.cuda(), c)
    torch.cuda.synchronize()
    got = c.cpu().float()
    ref = a.float() @ b.float()
    torch.testing.assert_close(got, ref, rtol=1e-2, atol=1e-1)
    return f"max |diff| {(got - ref).abs().max().item():.3g}"


def run_hoist() -> str:
    """Session 41: barriers split out of branches that part of several warps (48 of 64 threads) or
    a per-thread value (every 4th thread, ``Mask[tx]``) select: tests/gpu/test_user_reports_gpu.py's
    #2556 and #2612 kernels."""
    sys.path.insert(0, str(ROOT / "tests" / "gpu"))
    import test_user_reports_gpu as g

    g.test_partial_thread_guard_shared_exchange_2556(48)
    g.test_loop_inside_thread_dependent_if_2612(False)
    g.test_loop_inside_thread_dependent_if_2612(True)
    return "split branches match torch"


def run_ordered_roles() -> str:
    """Session 43: two computing T.ws roles ordered by the user's mbarriers, a producer warp loading
    hand-indexed stages with T.tma_copy (tests/gpu/test_ws_ordered_roles_gpu.py)."""
    sys.path.insert(0, str(ROOT / "tests" / "gpu"))
    import test_ws_ordered_roles_gpu as g

    g.test_two_roles_ordered_by_mbarriers_match_torch(1, 2, 512)
    return "attention by two mbarrier-ordered roles matches torch"


def run_closing_loop() -> str:
    """Session 43: the barrier after a loop closed by its own loop-back barrier left out
    (tests/gpu/test_closing_loop_barrier_gpu.py: the CPU test's kernels and gdn's scaled_dot_kkt)."""
    sys.path.insert(0, str(ROOT / "tests" / "gpu"))
    import test_closing_loop_barrier_gpu as g

    g.test_after_loop_matches_torch(2, False)
    g.test_after_loop_matches_torch(0, True)
    return "loops closed by their barrier match torch"


KERNELS = {
    "gemm": run_gemm,
    "hoist": run_hoist,
    "ordered_roles": run_ordered_roles,
    "closing_loop": run_closing_loop,
    "dsv4_sparse": run_dsv4_sparse,
    "refill": run_refill,
    "early_prologue": lambda: run_refill(early_prologue=True),
    "bwd": lambda: run_bwd("default"),
    "bwd_head_barrier": lambda: run_bwd("head_barrier"),
    "bwd_in_place": lambda: run_bwd("in_place"),
    "widened": run_widened,
    "ws_early_release": run_ws_early_release,
    "ws_single_stage": run_ws_single_stage,
    "streaming": run_streaming,
    "gemv_er": run_gemv_er,
    "zero_stage": run_zero_stage,
    "gemm_tf32": lambda: run_tf32(False),
    "gemm_tf32_rs": lambda: run_tf32(True),
    "gemm_persistent": lambda: run_gemm(sms=2),
    "gemm_tma_epilogue": lambda: run_gemm(sms=2, block_K=64, smem_epilogue=True),
    "gemm_cluster": lambda: run_gemm(pass_configs={"tl.cluster_multicast": True}),
    "fa": lambda: run_fa(False),
    "fa_causal": lambda: run_fa(True),
    "fa_persistent": lambda: run_fa(False, sms=2),
    "fa_causal_persistent": lambda: run_fa(True, sms=1),
    # session 35: more tiles than SMs, so Q has two buffers (warp_specialize.plan_heads)
    "fa_double_q": lambda: run_fa(False, sms=2, heads=67),
    # session 33, opt-in tl.enable_stmatrix: the epilogue's staging tile written with stmatrix.x4
    "gemm_stmatrix": lambda: run_gemm(sms=2, block_K=64, smem_epilogue=True, pass_configs={"tl.enable_stmatrix": True}),
    "fa_stmatrix": lambda: run_fa(False, pass_configs={"tl.enable_stmatrix": True}),
    # session 36, tl.enable_chunked_epilogue (default since session 38)
    "gemm_chunked": run_chunked,
    # session 36, tl.enable_warpgroup_pingpong (default for causal since session 38): the consumer
    # warpgroups take turns at the gemms
    "fa_pingpong": lambda: run_fa(False, sms=2, pass_configs={"tl.enable_warpgroup_pingpong": True}),
    "fa_causal_pingpong": lambda: run_fa(True, sms=1, pass_configs={"tl.enable_warpgroup_pingpong": True}),
    # session 37: P converted through shared memory; a 256 x 256 tile split 2 x 2 on 512 threads
    "fa_converted": run_fa_converted,
    "gemm_split_512": run_gemm_split_512,
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernel", nargs="+", default=["all"],
                        help=f"one or more of {', '.join(KERNELS)}, or all")
    parser.add_argument("--list", action="store_true", help="print the kernel names and exit")
    args = parser.parse_args()
    if args.list:
        print(" ".join(KERNELS))
        return 0
    names = list(KERNELS) if "all" in args.kernel else list(dict.fromkeys(args.kernel))
    unknown = [n for n in names if n not in KERNELS]
    if unknown:
        parser.error(f"unknown kernel {unknown[0]!r}; choose from {', '.join(KERNELS)} or all")
    import torch

    if not torch.cuda.is_available():
        log("no CUDA device: the sanitizer driver needs a GPU")
        for name in names:
            log(f"RESULT {name} FAIL no CUDA device")
        return 1
    log(f"driver: torch {torch.__version__}, {torch.cuda.get_device_name()}, "
        f"TILELANG_CACHE_DIR={os.environ.get('TILELANG_CACHE_DIR', '(default)')}")
    failed = 0
    for name in names:
        t0 = time.time()
        log(f"[{name}]")
        try:
            detail = KERNELS[name]()
        except Exception as e:  # noqa: BLE001 - report it, go on with the next kernel
            traceback.print_exc()
            sys.stdout.flush()
            first = next((ln.strip() for ln in str(e).splitlines() if ln.strip()), "")
            log(f"RESULT {name} FAIL {type(e).__name__}: {first[:200]} ({time.time() - t0:.1f} s)")
            failed += 1
            continue
        log(f"RESULT {name} PASS {detail} ({time.time() - t0:.1f} s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
