"""``FlashAttentionTemplate``: ``O = softmax(Q K^T * scale [+ causal mask]) V`` and its tile configs.

Contract:
- Fields (a dataclass, upstream's names): ``batch_size``, ``num_heads``, ``head_dim``,
  ``seq_length`` (queries), ``seq_kv_length`` (keys / values; 0 or None: ``seq_length``),
  ``is_causal``, ``in_dtype``, ``out_dtype``, ``accum_dtype``. Bad sizes raise ``ValueError`` at
  construction.
- ``equivalent_function()``: the operator as a TE-built PrimFunc with buffers ``Q, K, V, O``
  (``[batch, heads, seq, dim]``), the softmax in ``accum_dtype`` (reference semantics).
- ``recommend_hints(topk)`` on sm_90 (H100 / H200) with 16-bit operands: configurations of our
  warp-specialised FlashAttention forward (``examples/flash_attention.py``'s ``block_M``,
  ``block_N``, ``num_stages``, ``threads``) ranked by ``tilelang.carver.cost_model.attention_sm90``
  (calibrated on the H200): ``block_M`` in {64, 128, 192, 256} over 1 or 2 consumer warpgroups of
  64-row multiples, ``block_N`` in {32, 64, 128, 192, 256}, 1..4 stages whose Q + K/V stages fit
  shared memory and whose fragments fit a consumer thread's registers. ``hint.block`` is
  ``[block_M, block_N]``, ``hint.pipeline_stage`` the stages, ``hint.to_dict()`` the four kernel
  parameters, ``hint.score`` the predicted seconds. Ties (0.1 %) prefer fewer stages, then larger
  tiles. Other devices: an empty list, ``last_reason`` says why.
- ``estimate(config)``: predicted seconds of one config dict, or None (``last_reason`` says why).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tvm import DataType

from tilelang.carver import cost_model
from tilelang.carver.arch import TileDevice
from tilelang.carver.roller.hint import Hint
from tilelang.carver.template.base import BaseTemplate

_BLOCK_M = (64, 128, 192, 256)
_BLOCK_N = (32, 64, 128, 192, 256)
_STAGES = (1, 2, 3, 4)
_THREADS = (128, 256)


@dataclass
class FlashAttentionTemplate(BaseTemplate):
    batch_size: int = 1
    num_heads: int = 1
    head_dim: int = 1
    seq_length: int = 1
    seq_kv_length: int = None
    is_causal: bool = False
    in_dtype: str = "float16"
    out_dtype: str = "float16"
    accum_dtype: str = "float32"

    last_reason = ""   # (not a dataclass field) why recommend_hints / estimate gave nothing

    @property
    def kv_length(self) -> int:
        return self.seq_kv_length or self.seq_length

    def initialize_function(self) -> None:
        from tvm import te, tirx

        for name in ("batch_size", "num_heads", "head_dim", "seq_length"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise ValueError(f"FlashAttentionTemplate: {name} must be a positive int, got {v!r}")
        if self.seq_kv_length is not None and (not isinstance(self.seq_kv_length, int) or self.seq_kv_length < 0):
            raise ValueError(f"FlashAttentionTemplate: seq_kv_length must be a non-negative int, "
                             f"got {self.seq_kv_length!r}")
        B, H, S, Skv, D = self.batch_size, self.num_heads, self.seq_length, self.kv_length, self.head_dim
        in_dt, acc, out_dt = str(self.in_dtype), str(self.accum_dtype), str(self.out_dtype)
        Q = te.placeholder((B, H, S, D), name="Q", dtype=in_dt)
        K = te.placeholder((B, H, Skv, D), name="K", dtype=in_dt)
        V = te.placeholder((B, H, Skv, D), name="V", dtype=in_dt)
        scale = 1.0 / math.sqrt(D)
        d = te.reduce_axis((0, D), name="d")
        offset = Skv - S

        QK = te.compute((B, H, S, Skv), lambda b, h, i, j: te.sum(Q[b, h, i, d].astype(acc) * K[b, h, j, d].astype(acc),
                                                                  axis=d), name="QK")
        Sc = te.compute((B, H, S, Skv), lambda b, h, i, j: QK[b, h, i, j] * tirx.const(scale, acc), name="S")
        if self.is_causal:
            neg = tirx.min_value(acc)
            Sc = te.compute((B, H, S, Skv), lambda b, h, i, j: tirx.Select(j <= i + offset, Sc[b, h, i, j], neg),
                            name="S_masked")
        j = te.reduce_axis((0, Skv), name="j")
        mx = te.compute((B, H, S), lambda b, h, i: te.max(Sc[b, h, i, j], axis=j), name="row_max")
        P = te.compute((B, H, S, Skv), lambda b, h, i, jj: te.exp(Sc[b, h, i, jj] - mx[b, h, i]), name="P")
        j2 = te.reduce_axis((0, Skv), name="j2")
        lsum = te.compute((B, H, S), lambda b, h, i: te.sum(P[b, h, i, j2], axis=j2), name="row_sum")
        j3 = te.reduce_axis((0, Skv), name="j3")
        O = te.compute((B, H, S, D), lambda b, h, i, dd: te.sum(P[b, h, i, j3] * V[b, h, j3, dd].astype(acc),
                                                                axis=j3), name="O_acc")
        O = te.compute((B, H, S, D), lambda b, h, i, dd: (O[b, h, i, dd] / lsum[b, h, i]).astype(out_dt), name="O")
        self.set_function(te.create_prim_func([Q, K, V, O]))

    # ----------------------------------------------------------------- the recommender
    def _model_device(self, arch) -> cost_model.Sm90Device | None:
        if getattr(arch, "platform", "") != "CUDA" or int(getattr(arch, "sm_version", 0) or 0) != 90:
            self.last_reason = (f"no calibrated attention model for {arch!r}: the model describes our sm_90 "
                                f"(H100 / H200) kernel")
            return None
        if DataType(str(self.in_dtype)).bits != 16:
            self.last_reason = f"the attention model covers 16-bit operands, not {self.in_dtype}"
            return None
        return cost_model.Sm90Device.of(arch, str(self.in_dtype))

    def _estimate(self, dev, cfg: dict):
        return cost_model.attention_sm90(self.batch_size, self.num_heads, self.seq_length, self.kv_length,
                                         self.head_dim, bool(self.is_causal), cfg["block_M"], cfg["block_N"],
                                         cfg["num_stages"], cfg["threads"], dev,
                                         in_bytes=DataType(str(self.in_dtype)).bits / 8)

    def estimate(self, config: dict, arch: TileDevice = None):
        """Predicted seconds of ``config`` (``block_M``, ``block_N``, ``num_stages``, ``threads``;
        missing keys: 128, 128, 2, 256), or None with ``last_reason``."""
        arch = arch if arch is not None else self.arch
        if arch is None:
            raise ValueError("FlashAttentionTemplate.estimate: no device; call .with_arch(CUDA(...)) first")
        self.last_reason = ""
        dev = self._model_device(arch)
        if dev is None:
            return None
        est = self._estimate(dev, {"block_M": 128, "block_N": 128, "num_stages": 2, "threads": 256, **config})
        if not est.valid:
            self.last_reason = est.reason
            return None
        return est.seconds

    def get_hardware_aware_configs(self, arch: TileDevice = None, topk: int = 10) -> list[Hint]:
        arch = arch if arch is not None else self.arch
        if arch is None:
            raise ValueError("FlashAttentionTemplate.get_hardware_aware_configs: no device given")
        self.last_reason = ""
        dev = self._model_device(arch)
        if dev is None:
            return []
        hints = []
        for bm in _BLOCK_M:
            if bm > max(64, 1 << (self.seq_length - 1).bit_length()):
                continue
            for bn in _BLOCK_N:
                if bn > max(32, 1 << (self.kv_length - 1).bit_length()):
                    continue
                for threads in _THREADS:
                    for stages in _STAGES:
                        cfg = {"block_M": bm, "block_N": bn, "num_stages": stages, "threads": threads}
                        est = self._estimate(dev, cfg)
                        if not est.valid:
                            continue
                        wgs = threads // 128
                        h = Hint()
                        h.arch, h.use_tc = arch, True
                        h.block, h.warp, h.thread, h.rstep = [bm, bn], [bm // (4 * wgs), bn], [4 * wgs, 1], []
                        h.pipeline_stage = stages
                        h.smem_bytes, h.regs_per_thread = est.smem_bytes, est.regs_per_thread
                        h.blocks_per_sm, h.waves = est.blocks_per_sm, est.rounds
                        h.score = est.seconds
                        h.config = cfg
                        hints.append(h)
        if not hints:
            self.last_reason = "no configuration fits the device (shared memory, registers)"
        hints.sort(key=lambda h: (round(math.log(h.score) * 1000), h.pipeline_stage, -h.block[0] * h.block[1],
                                  h.num_threads))
        return hints[:max(0, int(topk))]


__all__ = ["FlashAttentionTemplate"]
