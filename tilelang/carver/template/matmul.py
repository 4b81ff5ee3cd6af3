"""``MatmulTemplate``: ``C[M, N] = A @ B`` (``B`` stored ``[N, K]`` by default) and its tile configs.

Contract:
- Fields (a dataclass, upstream's names): ``M, N, K`` (positive ints), ``trans_A`` (A stored
  ``[K, M]``), ``trans_B`` (default True: B stored ``[N, K]``), ``in_dtype``, ``out_dtype``,
  ``accum_dtype``, ``with_bias`` (adds ``Bias[N]`` in ``accum_dtype``). Bad shapes raise
  ``ValueError`` at construction.
- ``equivalent_function()``: the operator as a TE-built PrimFunc with buffers ``A, B[, Bias], C``.
- ``recommend_hints(topk)``: tile configurations ranked by an analytic cost model of ``arch``:
  every (block_M, block_N) in {16..256}, warp tile in {16..128} (1, 2, 4 or 8 warps) and
  reduction step of 32..256 bytes is kept when its shared memory (``stages x (block_M + block_N)
  x block_K`` elements) fits a block's opt-in shared memory and its per-thread registers
  (accumulator + double-buffered operand fragments) stay under 255; stages are the deepest of
  4, 3, 2 that fit (sm_80+ and CDNA, where loads are asynchronous; 1 before that or when the
  reduction is one step). The estimate is the larger of compute time (the busiest SM's tiles at
  peak tensor-core or FP32 throughput, derated for fewer than 4 resident warps and for small warp
  tiles and short reduction steps) and memory time (unique DRAM bytes at DRAM bandwidth, per-tile operand loads at 3x
  that), x1.15 without pipelining. A rasterization plan is attached when the operands overflow
  half of L2 and the grid is at least 4x4 tiles. Best (lowest estimate) first; ties prefer larger
  tiles, then 4 warps.
- On sm_90 with tensor-core operands (fp16, bf16, fp8) the candidates and their times are those of
  our warp-specialised wgmma + TMA main loop instead (``tilelang.carver.cost_model.gemm_sm90``,
  calibrated on the H200): ``block_M`` in {64, 128, 256} over 1 or 2 consumer warpgroups
  (``threads`` 128 / 256, ``block_M`` a multiple of 64 per warpgroup, at most 128 accumulator
  registers per thread), ``block_N`` in {64, 128, 192, 256}, 32..256-byte k steps, 2..6 stages that
  fit; ``hint.score`` is the predicted time in seconds, ``hint.predicted_ms`` the same in ms.
  Ties (equal to 0.1 %) prefer fewer stages, then larger tiles.
- ``estimate(config)``: the predicted time (seconds, or None when the model says the configuration
  is not valid, with the reason in ``last_reason``) of one config dict (``block_M``, ``block_N``,
  ``block_K``, ``num_stages``, ``threads``) on the template's device.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tvm import DataType

from tilelang.carver import cost_model
from tilelang.carver.arch import TileDevice
from tilelang.carver.roller.hint import Hint
from tilelang.carver.roller.rasterization import NoRasterization, Rasterization2DColumn
from tilelang.carver.template.base import BaseTemplate

_TILES = (16, 32, 64, 128, 256)
_WARP_TILES = (16, 32, 64, 128)
_K_BYTES = (32, 64, 128, 256)
_MAX_REGS = 255
_THREADS_PER_SM = 2048
_BLOCKS_PER_SM = 32


def _bits(dtype) -> int:
    return DataType(str(dtype)).bits


def _pow2_ceil(n: int) -> int:
    return 1 << max(0, (int(n) - 1).bit_length())


@dataclass
class _Device:
    """The facts of a ``TileDevice`` the cost model reads, with defaults for unknown ones."""

    smem_block: int
    smem_sm: int
    regs_sm: int
    sms: int
    l2: int
    peak_flops: float     # per second, whole device
    bandwidth: float      # bytes per second
    async_copy: bool
    tensor_cores: bool

    @classmethod
    def of(cls, arch: TileDevice, in_dtype: str, accum_dtype: str) -> _Device:
        smem_block = (getattr(arch, "smem_per_block_optin", 0) or arch.max_smem_usage or arch.smem_cap
                      or 48 * 1024)
        sm = int(getattr(arch, "sm_version", 0) or 0)
        platform = getattr(arch, "platform", "")
        if platform == "CUDA":
            tc = False
            if sm >= 70:
                from tilelang.carver.arch.cuda import is_tensorcore_supported_precision

                try:
                    tc = is_tensorcore_supported_precision(in_dtype, accum_dtype, arch)
                except ValueError:
                    tc = False
            async_copy = sm >= 80
        else:
            tc = platform in ("CDNA", "RDNA") and _bits(in_dtype) in (8, 16)
            async_copy = platform == "CDNA"
        key = str(in_dtype) if tc else "float32"
        peak = arch.peak_tflops(key) if hasattr(arch, "peak_tflops") else None
        if not peak:
            peak = 100.0 if tc else 20.0
        bw = getattr(arch, "memory_bandwidth_GBps", None) or 1000.0
        return cls(smem_block=int(smem_block), smem_sm=int(getattr(arch, "smem_per_sm", 0) or smem_block),
                   regs_sm=int(arch.reg_cap or 65536), sms=int(arch.compute_max_core or 1),
                   l2=int(arch.l2_cache_size_bytes or 0), peak_flops=float(peak) * 1e12, bandwidth=float(bw) * 1e9,
                   async_copy=async_copy, tensor_cores=tc)


@dataclass
class MatmulTemplate(BaseTemplate):
    M: int = None
    N: int = None
    K: int = None
    trans_A: bool = False
    trans_B: bool = True
    in_dtype: str = "float16"
    out_dtype: str = "float16"
    accum_dtype: str = "float16"
    with_bias: bool = False

    # ----------------------------------------------------------------- the operator
    def initialize_function(self) -> None:
        from tvm import te

        M, N, K = self.M, self.N, self.K
        for name, v in (("M", M), ("N", N), ("K", K)):
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise ValueError(f"MatmulTemplate: {name} must be a positive int, got {v!r}")
        in_dt, out_dt, acc_dt = str(self.in_dtype), str(self.out_dtype), str(self.accum_dtype)
        A = te.placeholder((K, M) if self.trans_A else (M, K), name="A", dtype=in_dt)
        B = te.placeholder((N, K) if self.trans_B else (K, N), name="B", dtype=in_dt)
        k = te.reduce_axis((0, K), name="k")

        def product(i, j):
            a = A[k, i] if self.trans_A else A[i, k]
            b = B[j, k] if self.trans_B else B[k, j]
            return te.sum(a.astype(acc_dt) * b.astype(acc_dt), axis=k)

        C = te.compute((M, N), product, name="C")
        args = [A, B]
        if self.with_bias:
            bias = te.placeholder((N,), name="Bias", dtype=acc_dt)
            C = te.compute((M, N), lambda i, j: C[i, j] + bias[j], name="Bias_add")
            args.append(bias)
        if out_dt != acc_dt:
            C = te.compute((M, N), lambda i, j: C[i, j].astype(out_dt), name="D")
        self.set_function(te.create_prim_func(args + [C]))

    # ----------------------------------------------------------------- the recommender
    def get_hardware_aware_configs(self, arch: TileDevice = None, topk: int = 10) -> list[Hint]:
        arch = arch if arch is not None else self.arch
        if arch is None:
            raise ValueError("MatmulTemplate.get_hardware_aware_configs: no device given")
        dev = _Device.of(arch, str(self.in_dtype), str(self.accum_dtype))
        if _uses_wgmma_model(arch, dev):
            hints = list(self._sm90_candidates(arch, dev))
            hints.sort(key=lambda h: (round(math.log(h.score) * 1000), h.pipeline_stage, -h.block[0] * h.block[1],
                                      h.num_threads, -h.rstep[0]))
            return hints[:max(0, int(topk))]
        hints = [h for h in self._candidates(arch, dev)]
        hints.sort(key=lambda h: (h.score, -h.block[0] * h.block[1], abs(h.num_threads - 128), -h.rstep[0]))
        return hints[:max(0, int(topk))]

    def estimate(self, config: dict, arch: TileDevice = None):
        """Predicted seconds of ``config`` on ``arch`` (default: the template's), or None with
        ``self.last_reason`` saying why (not a configuration the model covers, or not valid)."""
        arch = arch if arch is not None else self.arch
        if arch is None:
            raise ValueError("MatmulTemplate.estimate: no device; call .with_arch(CUDA(...)) first")
        self.last_reason = ""
        dev = _Device.of(arch, str(self.in_dtype), str(self.accum_dtype))
        if not _uses_wgmma_model(arch, dev):
            self.last_reason = "the calibrated model covers sm_90 tensor-core GEMMs only"
            return None
        cfg = {"block_M": 128, "block_N": 128, "block_K": 32, "num_stages": 3, "threads": 128, **config}
        est = self._sm90_estimate(arch, cfg)
        if not est.valid:
            self.last_reason = est.reason
            return None
        return est.seconds

    def _sm90_estimate(self, arch, cfg: dict):
        return cost_model.gemm_sm90(self.M, self.N, self.K, cfg["block_M"], cfg["block_N"], cfg["block_K"],
                                    cfg["num_stages"], cfg["threads"], cost_model.Sm90Device.of(arch, self.in_dtype),
                                    in_bytes=_bits(self.in_dtype) / 8, out_bytes=_bits(self.out_dtype) / 8,
                                    accum_bytes=_bits(self.accum_dtype) / 8)

    def _sm90_candidates(self, arch, dev: _Device):
        in_b = _bits(self.in_dtype) / 8
        grid_cap = max(64, _pow2_ceil(self.M))
        for bm in (64, 128, 256):
            if bm > grid_cap:
                continue
            for bn in (64, 128, 192, 256):
                if bn > max(64, _pow2_ceil(self.N)):
                    continue
                for k_bytes in (64, 128, 256):
                    bk = int(k_bytes / in_b)
                    if bk > max(int(32 / in_b), _pow2_ceil(self.K)):
                        continue
                    for threads in (128, 256):
                        for stages in (2, 3, 4, 5, 6):
                            if stages > 2 and stages > math.ceil(self.K / bk):
                                continue
                            est = self._sm90_estimate(arch, {"block_M": bm, "block_N": bn, "block_K": bk,
                                                             "num_stages": stages, "threads": threads})
                            if not est.valid:
                                continue
                            wgs = threads // 128
                            h = Hint()
                            h.arch, h.use_tc = arch, True
                            h.block, h.warp, h.thread, h.rstep = [bm, bn], [bm // (4 * wgs), bn], [4 * wgs, 1], [bk]
                            h.pipeline_stage = stages
                            h.rasterization_plan = self._raster(dev, math.ceil(self.M / bm), math.ceil(self.N / bn),
                                                                bn, in_b)
                            h.smem_bytes, h.regs_per_thread = est.smem_bytes, est.regs_per_thread
                            h.blocks_per_sm, h.waves = est.blocks_per_sm, est.rounds
                            h.score = est.seconds
                            h.ring_buffers = est.buffers
                            yield h

    def _candidates(self, arch, dev: _Device):
        M, N, K = self.M, self.N, self.K
        in_b, acc_b, out_b = _bits(self.in_dtype) / 8, _bits(self.accum_dtype) / 8, _bits(self.out_dtype) / 8
        bms = [t for t in _TILES if t <= max(16, _pow2_ceil(M))]
        bns = [t for t in _TILES if t <= max(16, _pow2_ceil(N))]
        bks = sorted({int(b / in_b) for b in _K_BYTES if int(b / in_b) <= max(16, _pow2_ceil(K))})
        dram = (M * K + N * K) * in_b + M * N * out_b
        for bm in bms:
            for bn in bns:
                grid_m, grid_n = math.ceil(M / bm), math.ceil(N / bn)
                grid = grid_m * grid_n
                for bk in bks:
                    k_steps = math.ceil(K / bk)
                    stages = 1
                    if dev.async_copy and k_steps > 1:
                        stages = next((s for s in (4, 3, 2) if s <= k_steps and
                                       s * (bm + bn) * bk * in_b <= dev.smem_block), 1)
                    smem = int(stages * (bm + bn) * bk * in_b)
                    if smem > dev.smem_block:
                        continue
                    for wm in _WARP_TILES:
                        for wn in _WARP_TILES:
                            if wm > bm or wn > bn or bm % wm or bn % wn:
                                continue
                            warps = (bm // wm) * (bn // wn)
                            if warps not in (1, 2, 4, 8):
                                continue
                            threads = warps * 32
                            kstep = 16 if dev.tensor_cores else 1
                            regs = (bm * bn * acc_b / 4) / threads + 2 * (wm + wn) * kstep * in_b / 4 / 32 + 32
                            regs = int(math.ceil(regs))
                            if regs > _MAX_REGS:
                                continue
                            bps = min(dev.smem_sm // max(smem, 1), dev.regs_sm // (regs * threads),
                                      _THREADS_PER_SM // threads, _BLOCKS_PER_SM)
                            if bps < 1:
                                continue
                            waves = math.ceil(grid / (bps * dev.sms))
                            busiest = math.ceil(grid / dev.sms)           # tiles on the busiest SM
                            intensity = wm * wn / (wm + wn)
                            eff = min(1.0, bps * warps / 4) * intensity / (intensity + 4)
                            eff /= 1 + 16 / (bk * in_b)                   # per-step sync and issue cost
                            compute = busiest * 2 * bm * bn * K / (dev.peak_flops / dev.sms * eff)
                            memory = max(dram / dev.bandwidth, grid * (bm + bn) * K * in_b / (3 * dev.bandwidth))
                            score = max(compute, memory) * (1.15 if stages == 1 and dev.async_copy else 1.0)
                            h = Hint()
                            h.arch, h.use_tc = arch, dev.tensor_cores
                            h.block, h.warp, h.thread, h.rstep = [bm, bn], [wm, wn], [bm // wm, bn // wn], [bk]
                            h.pipeline_stage = stages
                            h.rasterization_plan = self._raster(dev, grid_m, grid_n, bn, in_b)
                            h.smem_bytes, h.regs_per_thread, h.blocks_per_sm, h.waves = smem, regs, bps, waves
                            h.score = score
                            yield h

    last_reason = ""   # (not a dataclass field) why estimate() returned None

    def _raster(self, dev: _Device, grid_m: int, grid_n: int, bn: int, in_b: float):
        operands = (self.M + self.N) * self.K * in_b
        if dev.l2 <= 0 or grid_m < 4 or grid_n < 4 or operands <= dev.l2 / 2:
            return NoRasterization()
        panel_bytes = bn * self.K * in_b                     # one column of B tiles
        width = max(2, min(16, 1 << int(math.log2(max(1.0, dev.l2 / 2 / panel_bytes)))))
        return Rasterization2DColumn(min(width, grid_n))


def _uses_wgmma_model(arch, dev: _Device) -> bool:
    """sm_90 (H100 / H200) with tensor-core operands: our compiler's wgmma + TMA main loop."""
    return getattr(arch, "platform", "") == "CUDA" and int(getattr(arch, "sm_version", 0) or 0) == 90 \
        and dev.tensor_cores
