"""Calibrated time estimates of the sm_90a kernels our compiler generates (the carver's Hopper model).

Contract: ``gemm_sm90(problem, config, dev)`` and ``attention_sm90(problem, config, dev)`` return an
``Estimate`` (``seconds``, ``valid``, ``reason`` when not valid, and the derived facts: shared
bytes, ring buffers, blocks per SM, rounds of tiles) for one tile configuration, no GPU needed.
``Sm90Device.of(arch, dtype)`` reads the facts of a ``tilelang.carver.arch`` description.

What the model knows of our sm_90a code (docs/architecture.md, ``transform/warp_specialize``):
- GEMM main loops with ``block_M`` a multiple of 64 x the consumer warpgroups (``threads / 128``)
  run warp-specialised: one TMA producer warpgroup, wgmma m64nN (N = ``block_N`` <= 256) per
  consumer warpgroup; persistent (``min(tiles, SMs)`` blocks) unless two blocks share an SM, which
  they do for one consumer warpgroup with at most 128 accumulator words per thread, a tile at most
  ``PAIR_WGMMA_N`` wide, whose two blocks' shared memory fits (``setmaxnreg``, ``plan_pair``,
  ``wide_single_warpgroup``). The ring gets one buffer more than
  ``num_stages`` where that still fits the same number of blocks per SM, and over main loops of
  ``RING_OVER_PERSISTENCE_TRIPS`` k-steps or more also where it fits only without persistence (the
  kernel then takes one tile per block: ``plan_ring``); one tile per block costs
  ``NON_PERSISTENT_TILE_S`` more per tile.
- Attention (FlashAttention forward) runs warp-specialised too (Q once per tile, K and V per KV
  step with barriers of their own), one block per SM, consumer warpgroups of 64 query rows each;
  with one stage it is not warp-specialised (cp.async, then compute) and two blocks share an SM
  where their registers and shared memory fit, each one's loads waiting under the other's compute.

The time of one configuration is ``rounds x (k_steps x t_step + t_tile)``: ``rounds`` the busiest
SM's tiles (wave quantisation over the SMs, x blocks per SM), ``t_step`` a soft maximum (4-norm)
of the tensor time of one step at a calibrated efficiency and the time to stream that step's
operands (L2-to-SM bandwidth, or the bytes in flight over the load latency when the ring is too
shallow to cover it), ``t_tile`` a per-tile cost (prologue, epilogue). Runs that take a large
fraction of a second of tensor work are derated for the power cap (the H200 drops its clock).
The constants were fitted to the H200 measurements in ``benchmarks/RESULTS.md`` (sessions 2-12:
GEMM 128x256 / 256x128 / 192x192 / 128x128 / 64x128 / 64x64 tiles at 4096^3, 8192^3, K=512 and
M=16..128, flash attention B8 H32 S4096 D128 causal and not; GEMM refitted in session 14 to the 34
configs session 13 timed at 8192^3, all within 25 %; in session 15 the ring-over-persistence rule
mirrored and the one-tile-per-block cost fitted to sessions 13-15, where the persistent 128x256x64 s2
kernel was the fastest three times; in session 16 one warpgroup's efficiency by k-step depth, the
one-stage attention's second block and one-warpgroup attention fitted to that session's
bench_carver run, 36 of 37 GEMM and 24 of 24 attention configs within 25 % offline); the fitted
GEMM points are within -18 %..+13 % of measured (tests/test_carver_recommend.py),
``benchmarks/bench_carver.py`` checks the model against exhaustive timing.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field

# ----- fitted constants (H200, fp16; see the module docstring) ------------------------------------
GEMM_EFF = 0.96          # tensor efficiency ceiling of a warpgroup's wgmma stream
GEMM_N_HALF = 32         # efficiency x wn / (wn + GEMM_N_HALF): narrow wgmma N issues more per flop
# (*: refitted in session 14 to the 34 GEMM configs session 13 timed at 8192^3 with bench_carver.py,
# 22 -> 34 of them within 25 %, the fitted points below and the top recommendation unchanged; the
# attention model keeps its own constants)
GEMM_ONE_WARPGROUP = 0.8      # * one consumer warpgroup per SM (GEMM): nothing hides its waits
ONE_WARPGROUP = 0.78          # the same, attention loop (session 16: refitted to the one-warpgroup
                              #   configs of bench_carver's run, all six over-predicted 1.3x at 0.6)
POWER_DERATE = 0.11      # clock drop under a sustained tensor load (full at >= 1 TFLOP of work)
GEMM_L2_BYTES_PER_S_SM = 140e9    # * operand stream into one SM (GEMM)
L2_BYTES_PER_S_SM = 100e9     # operand stream into one SM (attention)
LOAD_LATENCY_S = 0.9e-6       # * a TMA load under load (DRAM-backed)
TWO_BUFFER_RING = 1.2         # * a two-buffer ring: with one wgmma group kept in flight the consumers
                              #   hold both buffers, so the next load waits for a release
LOAD_LATENCY_L2_S = 0.9e-6    # ... when the operands fit twice the L2 (most loads hit it)
STEP_NORM = 4                 # soft maximum of compute and load time per step
TILE_COST_S = 2e-6            # per tile (GEMM): prologue, epilogue, tile switch
NON_PERSISTENT_TILE_S = 4e-6  # * more per tile with one tile per block (session 15: the persistent
                              #   8192^3 kernels 5-9 % slower than persistent ones of the same tile)
RING_OVER_PERSISTENCE_TRIPS = 64   # = warp_specialize.RING_OVER_PERSISTENCE_TRIPS (plan_ring)
PAIR_WGMMA_N = 128            # = warp_specialize.PAIR_WGMMA_N: no pair of blocks past a 128-wide tile
STEP_COST_S = 0.03e-6         # per k step: full/empty barrier hand-over, wgmma issue and wait
DRAM_EFF = 0.9

ATTN_EFF = 0.85          # per-step tensor efficiency ceiling of the attention loop (2 warpgroups)
ATTN_N_HALF = 24         # x bn / (bn + ATTN_N_HALF): per-step softmax, barriers, rescale
ATTN_LATENCY_S = 0.6e-6  # K/V loads mostly hit L2 (every q block of a head reads them)
ATTN_TILE_COST_S = 1e-6          # persistent (non-causal, paired causal): the next tile's Q lands under the loop
ATTN_TILE_COST_CAUSAL_S = 3e-6   # one tile per block: launch, Q load, epilogue
ATTN_MASKED_STEP = 1.5           # a KV step that builds the causal / bounds mask costs this much more
MAX_REGS = 240                   # a consumer thread's registers after setmaxnreg (of 255)
SM_REGS = 65536                  # 32-bit registers of an SM (blocks per SM of a one-stage kernel)


@dataclass
class Sm90Device:
    sms: int
    peak_flops: float          # whole device, per second
    dram_bw: float             # bytes per second
    smem_block: int            # a block's opt-in shared memory
    smem_sm: int
    l2: int

    @classmethod
    def of(cls, arch, in_dtype: str = "float16") -> "Sm90Device":
        peak = arch.peak_tflops(str(in_dtype)) if hasattr(arch, "peak_tflops") else None
        return cls(sms=int(getattr(arch, "compute_max_core", 0) or 132),
                   peak_flops=float(peak or 989.4) * 1e12,
                   dram_bw=float(getattr(arch, "memory_bandwidth_GBps", None) or 3350.0) * 1e9,
                   smem_block=int(getattr(arch, "smem_per_block_optin", 0) or 227 * 1024),
                   smem_sm=int(getattr(arch, "smem_per_sm", 0) or 228 * 1024),
                   l2=int(getattr(arch, "l2_cache_size_bytes", 0) or 50 * 2 ** 20))

    @property
    def peak_sm(self) -> float:
        return self.peak_flops / self.sms


@dataclass
class Estimate:
    seconds: float = math.inf
    valid: bool = True
    reason: str = ""
    smem_bytes: int = 0
    buffers: int = 0
    blocks_per_sm: int = 1
    rounds: int = 0
    regs_per_thread: int = 0
    facts: dict = field(default_factory=dict)

    @property
    def ms(self) -> float:
        return self.seconds * 1e3


def _invalid(reason: str, **kw) -> Estimate:
    return Estimate(valid=False, reason=reason, **kw)


def _step_time(tc: float, tl: float) -> float:
    return (tc ** STEP_NORM + tl ** STEP_NORM) ** (1.0 / STEP_NORM)


def _power(flops: float) -> float:
    return 1.0 - POWER_DERATE * min(1.0, flops / 1e12)


def gemm_sm90(M: int, N: int, K: int, block_M: int, block_N: int, block_K: int, num_stages: int,
              threads: int, dev: Sm90Device, in_bytes: float = 2.0, out_bytes: float = 2.0,
              accum_bytes: float = 4.0) -> Estimate:
    """The estimate of our warp-specialised wgmma GEMM ``C[M, N] = A[M, K] B[K, N]`` (either
    operand layout) with this tile configuration on ``dev``."""
    bm, bn, bk, s, t = int(block_M), int(block_N), int(block_K), int(num_stages), int(threads)
    if t % 128 or t <= 0:
        return _invalid(f"threads={t}: consumer warpgroups are 128 threads")
    wgs = t // 128
    if bm % (64 * wgs):
        return _invalid(f"block_M={bm} is not a multiple of 64 x {wgs} consumer warpgroup(s): not the wgmma path")
    if bn % 8 or bn > 256 or bn < 8:
        return _invalid(f"block_N={bn}: wgmma N is a multiple of 8 up to 256")
    if bk * in_bytes % 32:
        return _invalid(f"block_K={bk}: a wgmma k step is 32 bytes")
    if s < 1:
        return _invalid("num_stages < 1")
    acc_words = int(bm * bn * accum_bytes / 4 / t)
    regs = acc_words + 40
    if acc_words > 128:   # the largest accumulator measured without spills (128x256 over 2 warpgroups)
        return _invalid(f"{acc_words} accumulator registers per consumer thread (> 128): it would spill",
                        regs_per_thread=regs)
    stage_bytes = int((bm + bn) * bk * in_bytes)
    budget = dev.smem_block           # what one block, or both blocks of a pair, may use
    ring = s * stage_bytes
    if ring + 64 > budget:
        return _invalid(f"{s} stages x {stage_bytes} B of shared memory exceed {budget} B", smem_bytes=ring)
    # lower_tile_ops / warp_specialize: persistent (the epilogue tile gets bytes of its own) unless
    # that does not fit, or two blocks of fewer than 256 threads would fit an SM; a one-warpgroup
    # GEMM with small enough fragments pairs two blocks per SM (dropping persistence for it); the
    # ring gets one buffer more where that keeps the blocks per SM
    epilogue = int(bm * bn * out_bytes)
    # (two blocks of one warpgroup fit the registers only up to a PAIR_WGMMA_N-wide accumulator:
    # warp_specialize.wide_single_warpgroup)
    two_fit = 2 * (ring + epilogue) <= budget and t < 256 and bn <= PAIR_WGMMA_N
    persistent = ring + epilogue <= budget and not two_fit
    pair = wgs == 1 and bn <= PAIR_WGMMA_N and acc_words <= 128 and 2 * ring <= budget
    if pair:
        persistent = False
    bps = 2 if pair else 1
    own = epilogue if persistent else 0
    k_steps = math.ceil(K / bk)
    if s > 1 and bps * ((s + 1) * stage_bytes + own) <= budget:
        buffers = s + 1
    elif s > 1 and persistent and k_steps >= RING_OVER_PERSISTENCE_TRIPS and \
            max((s + 1) * stage_bytes, epilogue) <= budget:
        # warp_specialize.plan_ring: over a long main loop the ring's extra buffer wins over
        # persistence (one tile per block, the epilogue tile sharing the ring's bytes)
        persistent, own, buffers = False, 0, s + 1
    else:
        buffers = s
    tiles = math.ceil(M / bm) * math.ceil(N / bn)
    active = min(bps, math.ceil(tiles / dev.sms))
    rounds = math.ceil(tiles / (dev.sms * bps))
    flops = 2.0 * M * N * K
    # one warpgroup alone on an SM: its waits between k-steps are exposed, the less so the more
    # work a step holds (the 0.8 was fitted on 64-deep steps)
    alone = 1.0 if wgs * active >= 2 else GEMM_ONE_WARPGROUP ** (64 / bk)
    eff = GEMM_EFF * bn / (bn + GEMM_N_HALF) * alone * _power(flops)
    inflight = active * max(1, buffers - 1) * stage_bytes
    latency = LOAD_LATENCY_L2_S if (M + N) * K * in_bytes <= 2 * dev.l2 else LOAD_LATENCY_S
    rate = min(GEMM_L2_BYTES_PER_S_SM, inflight / latency)
    tc = active * 2.0 * bm * bn * bk / (dev.peak_sm * eff)
    tl = active * stage_bytes / rate
    if s == 1:   # nothing prefetched: every step waits for its loads
        step = tc + tl + latency
    else:
        step = _step_time(tc, tl)
    # one tile per block (neither persistent nor paired): the next tile's prologue and this one's
    # epilogue do not overlap anything
    tile_cost = TILE_COST_S + (NON_PERSISTENT_TILE_S if not persistent and bps == 1 else 0.0)
    seconds = rounds * (k_steps * (step + STEP_COST_S) + tile_cost)
    if buffers == 2:
        seconds *= TWO_BUFFER_RING
    dram = (M * K * in_bytes + N * K * in_bytes + M * N * out_bytes) / (dev.dram_bw * DRAM_EFF)
    return Estimate(seconds=max(seconds, dram), smem_bytes=buffers * stage_bytes + own, buffers=buffers,
                    blocks_per_sm=bps, rounds=rounds, regs_per_thread=regs,
                    facts={"tiles": tiles, "step_compute_s": tc, "step_load_s": tl, "dram_s": dram,
                           "efficiency": eff, "persistent": persistent})


def attention_sm90(batch: int, heads: int, seq_q: int, seq_kv: int, dim: int, causal: bool,
                   block_M: int, block_N: int, num_stages: int, threads: int, dev: Sm90Device,
                   in_bytes: float = 2.0, dim_v: int | None = None) -> Estimate:
    """The estimate of our warp-specialised FlashAttention forward (one block per (q tile, head,
    batch), one block per SM) with this configuration on ``dev``."""
    bm, bn, s, t = int(block_M), int(block_N), int(num_stages), int(threads)
    dv = int(dim_v or dim)
    if t % 128 or t <= 0:
        return _invalid(f"threads={t}: consumer warpgroups are 128 threads")
    wgs = t // 128
    if bm % (64 * wgs):
        return _invalid(f"block_M={bm} is not a multiple of 64 x {wgs} consumer warpgroup(s)")
    if bn % 16 or bn > 256:
        return _invalid(f"block_N={bn}: a multiple of 16 up to 256")
    if s < 1:
        return _invalid("num_stages < 1")
    rows = bm // wgs
    # acc_o (fp32), acc_s (fp32), P (16-bit) and the row statistics, per consumer thread
    regs = int(rows * dv / 128 + rows * bn / 128 + rows * bn / 256 + 24)
    if regs > MAX_REGS:
        return _invalid(f"~{regs} registers per consumer thread (> {MAX_REGS}): it would spill",
                        regs_per_thread=regs)
    kv_stage = int(bn * (dim + dv) * in_bytes)
    smem = int(bm * dim * in_bytes) + s * kv_stage
    if smem + 1024 > dev.smem_block:
        return _invalid(f"{smem} B of shared memory (Q + {s} K/V stages) exceed {dev.smem_block} B",
                        smem_bytes=smem)
    q_tiles = math.ceil(seq_q / bm)
    tiles = batch * heads * q_tiles
    flops_step = 2.0 * bm * bn * (dim + dv)
    total_flops = 2.0 * batch * heads * seq_q * seq_kv * (dim + dv) * (0.5 if causal else 1.0)
    eff = ATTN_EFF * bn / (bn + ATTN_N_HALF) * (1.0 if wgs >= 2 else ONE_WARPGROUP) * _power(total_flops)
    tc = flops_step / (dev.peak_sm * eff)
    inflight = max(1, s - 1) * kv_stage
    rate = min(L2_BYTES_PER_S_SM, inflight / ATTN_LATENCY_S)
    tl = kv_stage / rate
    # One stage: no warp specialisation (every thread loads with cp.async, then computes), so
    # the block is as large as its threads and fragments and two may share an SM where their
    # registers (ptxas: 126 for 128x64 on 256 threads, 168 for 128x128; the estimate below
    # without the producer's share) and shared memory fit; the two blocks' loads then wait
    # under each other's compute. With warp specialisation, one block per SM.
    bps = 1
    if s == 1:
        own_regs = -(-(regs - 12) // 8) * 8
        if 2 * own_regs * t <= SM_REGS and 2 * (smem + 1024) <= dev.smem_sm:
            bps = 2
        step = tc + tl + ATTN_LATENCY_S if bps == 1 else max(2 * tc, tc + tl + ATTN_LATENCY_S)
    else:
        step = _step_time(tc, tl)
    ragged = seq_kv % bn != 0

    def trips(q_block: int) -> int:
        return math.ceil(min(seq_kv, (q_block + 1) * bm + max(0, seq_kv - seq_q)) / bn)

    # warp_specialize.paired_rows: a causal grid whose row blocks x and q_tiles - 1 - x together
    # run the same count for every x runs persistent, a block taking such pairs
    paired = causal and s >= 2 and bps == 1 and q_tiles % 2 == 0 and \
        len({trips(x) + trips(q_tiles - 1 - x) for x in range(q_tiles // 2)}) == 1

    def tile_time(q_block: int) -> float:
        if causal:
            n = trips(q_block)
            masked = min(n, math.ceil(bm / bn) + (1 if (q_block * bm) % bn else 0))
            return n * step + masked * (ATTN_MASKED_STEP - 1) * step + \
                (ATTN_TILE_COST_S if paired else ATTN_TILE_COST_CAUSAL_S)
        n = math.ceil(seq_kv / bn)
        return n * step + (ATTN_MASKED_STEP - 1) * step * ragged + ATTN_TILE_COST_S

    slots = dev.sms * bps
    if not causal:
        rounds = math.ceil(tiles / slots)
        seconds = rounds * tile_time(0)
    elif paired:   # pairs of equal work, block b taking pairs b, b + grid, ..., the last rounds as
        # single tiles dealt longest first (warp_specialize._PairedTail)
        pair = tile_time(0) + tile_time(q_tiles - 1)
        units = tiles // 2
        grid = min(units, dev.sms)
        first = max(units // grid - 1, 0)
        rest = sorted((tile_time(x) for u in range(first * grid, units)
                       for x in (u % (q_tiles // 2), q_tiles - 1 - u % (q_tiles // 2))), reverse=True)
        ends = [0.0] * grid
        for k, t in enumerate(rest):
            r, pos = divmod(k, grid)
            ends[pos if r % 2 == 0 else grid - 1 - pos] += t
        rounds = math.ceil(units / grid)
        seconds = first * pair + max(ends)
    else:   # tiles of unequal length, in launch order (q block fastest), onto the first free slot
        times = [tile_time(i) for i in range(q_tiles)]
        free = [0.0] * min(slots, tiles)
        heapq.heapify(free)
        for _ in range(batch * heads):
            for i in range(q_tiles):
                heapq.heappush(free, heapq.heappop(free) + times[i])
        seconds = max(free)
        rounds = math.ceil(tiles / slots)
    return Estimate(seconds=seconds, smem_bytes=smem, buffers=s, blocks_per_sm=bps, rounds=rounds,
                    regs_per_thread=regs, facts={"tiles": tiles, "step_compute_s": tc, "step_load_s": tl,
                                                 "efficiency": eff})


__all__ = ["Estimate", "Sm90Device", "attention_sm90", "gemm_sm90"]
