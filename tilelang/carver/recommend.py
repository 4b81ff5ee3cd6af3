"""Tile-configuration recommendations for a kernel factory whose tile sizes are parameters.

    rec = recommend_factory(build, params, values, arch="sm_90a", topk=3)
    rec.kind                 # "gemm" | "attention" | "roofline" | None (no recommendation)
    rec.current              # Candidate of the values given (predicted seconds, or None + why)
    rec.candidates           # up to topk Candidates, best first (config dict, seconds, gain)
    rec.reason               # why there is no recommendation (kind None), or what the model is

Contract: ``build(**values) -> PrimFunc`` calls the factory (``values``: every parameter's value,
the tile ones included); ``params`` are the factory's parameter names. The tile parameters are
those of ``TILE_PARAMS`` among ``params`` (also spelled as in ``ALIASES``: upstream's
``thread_num``); without any, there is no recommendation.
- GEMM (parameters ``M``, ``N``, ``K``, the kernel holds one ``T.gemm``): ``MatmulTemplate``'s
  ranking (``dtype`` / ``in_dtype`` / ``accum_dtype`` values when given; fp16 / fp32 else).
- Attention (``batch``, ``heads``, ``seq_len`` (or ``seq_q`` / ``seq_kv``), ``dim``, two gemms):
  ``FlashAttentionTemplate`` (``is_causal`` / ``causal``).
- Other kernels: the candidate values of each tile parameter (halved / doubled block sizes, one
  stage more or less, 128 / 256 threads; at most ``MAX_BUILDS`` builds) are ranked by the
  roofline of the built kernel (``tilelang.analysis.summary``: FLOPs and bytes at peak
  throughput and bandwidth) divided by its occupancy (wave quantisation over the SMs, blocks per
  SM from shared memory, threads and fragment registers, fewer than 8 warps per SM hiding less
  latency). This is an uncalibrated ranking: when the estimates of all candidates agree within 1 %
  (the roofline does not depend on the parameters) or no estimate exists (symbolic shapes, no
  peak for the dtype), there is no recommendation and ``reason`` says why.
A recommended configuration is one whose factory call succeeds; for the templates only the
tile parameters the factory has are set, the others keep the kernel's value (``threads`` from
its launch, ``num_stages`` from its pipelined loop, else ``_DEFAULTS``) and template configs with
another value of them are skipped. ``gain`` is the current predicted time over the
candidate's (> 1: faster), None when the current values have no estimate.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

TILE_PARAMS = ("block_M", "block_N", "block_K", "num_stages", "threads")
ALIASES = {"thread_num": "threads", "num_threads": "threads", "stages": "num_stages"}   # upstream examples' names
MAX_BUILDS = 24


def canonical(name: str) -> str:
    return ALIASES.get(name, name)


def tile_params(params) -> list:
    """The factory's tile parameters (its own spelling), in ``TILE_PARAMS`` order."""
    found = {canonical(p): p for p in params if canonical(p) in TILE_PARAMS}
    return [found[c] for c in TILE_PARAMS if c in found]
_GEMM_NAMES = ("M", "N", "K")


@dataclass
class Candidate:
    config: dict
    seconds: float | None
    gain: float | None = None
    why: str = ""

    @property
    def ms(self) -> float | None:
        return None if self.seconds is None else self.seconds * 1e3


@dataclass
class Recommendation:
    kind: str | None
    current: Candidate | None = None
    candidates: list = field(default_factory=list)
    reason: str = ""


def _arch_of(arch):
    from tilelang.carver.arch import CUDA, TileDevice

    return arch if isinstance(arch, TileDevice) else CUDA(arch)


def _arch_name(dev) -> str:
    return str(getattr(dev, "arch", None) or "sm_90a")


def _count_gemms(func) -> int:
    from tvm import tirx

    from tilelang.language._ops import is_tl_call
    from tilelang.tir_utils import walk_stmts

    count = [0]

    def visit(s):
        if isinstance(s, tirx.Evaluate) and isinstance(s.value, tirx.Call):
            op = getattr(s.value.op, "name", "")
            if is_tl_call(s.value) and "gemm" in op:
                count[0] += 1
    walk_stmts(func.body, visit)
    return count[0]


def _first(values: dict, *names, default=None):
    for n in names:
        if n in values and values[n] is not None:
            return values[n]
    return default


def recommend_factory(build, params, values: dict, arch="sm_90a", topk: int = 3) -> Recommendation:
    """See the module docstring."""
    tile = tile_params(params)
    if not tile:
        return Recommendation(None, reason="no tile parameter (block_M, block_N, block_K, num_stages, threads)")
    dev = _arch_of(arch)
    current_cfg = {p: values.get(p) for p in tile}
    try:
        func = build(**values)
    except Exception as err:  # noqa: BLE001 - the user's factory
        return Recommendation(None, reason=f"the factory raised with the current values: {type(err).__name__}: {err}")
    gemms = _count_gemms(func)
    if all(n in params for n in _GEMM_NAMES) and gemms == 1:
        return _from_template("gemm", _gemm_template(values, dev), build, values, tile, current_cfg, topk,
                              _fixed_from_func(func))
    seq = _first(values, "seq_len", "seq_q", "seqlen_q")
    if all(_first(values, *n) is not None for n in (("batch",), ("heads",), ("dim",))) and seq is not None \
            and gemms == 2:
        return _from_template("attention", _attention_template(values, seq, dev), build, values, tile,
                              current_cfg, topk, _fixed_from_func(func))
    return _roofline(build, values, tile, current_cfg, dev, topk)


def _gemm_template(values, dev):
    from tilelang.carver.template import MatmulTemplate

    in_dtype = str(_first(values, "in_dtype", "dtype", default="float16"))
    return MatmulTemplate(M=int(values["M"]), N=int(values["N"]), K=int(values["K"]), in_dtype=in_dtype,
                          out_dtype=str(_first(values, "out_dtype", "dtype", default=in_dtype)),
                          accum_dtype=str(_first(values, "accum_dtype", default="float32"))).with_arch(dev)


def _attention_template(values, seq, dev):
    from tilelang.carver.template import FlashAttentionTemplate

    return FlashAttentionTemplate(batch_size=int(values["batch"]), num_heads=int(values["heads"]),
                                  head_dim=int(values["dim"]), seq_length=int(seq),
                                  seq_kv_length=int(_first(values, "seq_kv", "seqlen_kv", default=seq)),
                                  is_causal=bool(_first(values, "is_causal", "causal", default=False)),
                                  in_dtype=str(_first(values, "in_dtype", "dtype", default="float16"))).with_arch(dev)


def _builds(build, values, cfg) -> bool:
    try:
        build(**{**values, **cfg})
        return True
    except Exception:  # noqa: BLE001 - an invalid combination for this factory
        return False


def _fixed_from_func(func) -> dict:
    """What the kernel itself fixes: ``threads`` (the launch) and ``num_stages`` (its pipelined loop)."""
    from tvm import tirx

    from tilelang.tir_utils import walk_stmts

    out = {}

    def visit(s):
        if isinstance(s, tirx.AttrStmt) and s.attr_key == "thread_extent" and "threads" not in out:
            if getattr(s.node, "thread_tag", "") == "threadIdx.x" and isinstance(s.value, tirx.IntImm):
                out["threads"] = int(s.value)
        if isinstance(s, tirx.For) and s.annotations and "num_stages" not in out:
            for key in ("tl.num_stages", "num_stages", "software_pipeline_stage"):
                if key in s.annotations:
                    try:
                        out["num_stages"] = int(s.annotations[key])
                    except (TypeError, ValueError):
                        pass
                    break
    walk_stmts(func.body, visit)
    return out


def _from_template(kind, template, build, values, tile, current_cfg, topk, fixed=None) -> Recommendation:
    have = {canonical(p) for p in tile}
    # the values of tile parameters the factory lacks: read off the kernel, else the common choice
    pinned = {k: v for k, v in {**_DEFAULTS[kind], **(fixed or {})}.items() if k not in have}
    current_s = template.estimate({**pinned, **{canonical(k): v for k, v in current_cfg.items() if v is not None}})
    current = Candidate(current_cfg, current_s, why="" if current_s is not None else template.last_reason)
    hints = template.recommend_hints(topk=200)
    if not hints:
        return Recommendation(None, current, reason=template.last_reason or "no configuration fits the device")
    out, seen = [], set()
    for h in hints:
        full = h.to_dict()
        cfg = {p: full[canonical(p)] for p in tile if canonical(p) in full}
        # a parameter the template sets but the factory lacks keeps the kernel's fixed value
        if any(k in full and full[k] != v for k, v in pinned.items()):
            continue
        key = tuple(sorted(cfg.items()))
        if key in seen:
            continue
        seen.add(key)
        if not _builds(build, values, cfg):
            continue
        gain = current_s / h.score if current_s else None
        out.append(Candidate(cfg, h.score, gain))
        if len(out) >= topk:
            break
    what = ("calibrated sm_90 model of our wgmma + TMA GEMM" if kind == "gemm"
            else "calibrated sm_90 model of our warp-specialised FlashAttention forward")
    return Recommendation(kind, current, out, reason=what)


# the values a template config is compared at when the factory has no such parameter and the
# kernel does not say (block_K): the common choice
_DEFAULTS = {"gemm": {"block_K": 64, "num_stages": 3, "threads": 256},
             "attention": {"num_stages": 2, "threads": 256}}


# ----- the roofline + occupancy fallback ----------------------------------------------------------

def _choices(p, cur):
    p = canonical(p)
    if p.startswith("block_"):
        base = [cur // 2, cur, cur * 2] if isinstance(cur, int) and cur > 0 else [64, 128]
        return sorted({v for v in base if 16 <= v <= 512})
    if p == "num_stages":
        base = [cur - 1, cur, cur + 1] if isinstance(cur, int) else [2, 3]
        return sorted({v for v in base if 1 <= v <= 6})
    if p == "threads":
        return sorted({128, 256} | ({cur} if isinstance(cur, int) else set()))
    return [cur]


def _occupancy_estimate(summary: dict, dev) -> tuple:
    """(seconds or None, why)."""
    roof = summary.get("roofline") or {}
    if not roof or "no_estimate" in roof:
        return None, (roof or {}).get("no_estimate", summary.get("error") or "no roofline estimate")
    seconds = roof.get("time_s")
    launch = summary.get("launch") or {}
    threads = int(launch.get("num_threads") or 0)
    if seconds is None or threads <= 0:
        return None, "no launch configuration"
    grid = 1
    for g in launch.get("grid") or []:
        try:
            grid *= int(g)
        except (TypeError, ValueError):
            return None, f"a symbolic grid extent ({g})"
    smem = int(summary.get("smem_total") or 0)
    limit = summary.get("smem_limit")
    if limit and smem > limit:
        return None, f"{smem} B of shared memory exceed the {limit} B a block may use"
    regs = int(summary.get("fragment_registers") or 0) + 32
    if regs > 255:
        return None, f"~{regs} registers per thread: it would spill"
    sms = int(getattr(dev, "compute_max_core", 0) or 132)
    smem_sm = int(getattr(dev, "smem_per_sm", 0) or 228 * 1024)
    bps = min(smem_sm // max(smem, 1), 2048 // threads, 65536 // (threads * regs), 32)
    if bps < 1:
        return None, "no block fits an SM"
    rounds = math.ceil(grid / (sms * bps))
    wave_eff = grid / (rounds * sms * bps)
    warps = min(grid / sms, bps) * threads / 32
    latency = min(1.0, max(warps, 1.0) / 8.0)
    return seconds / wave_eff / latency, ""


def _roofline(build, values, tile, current_cfg, dev, topk) -> Recommendation:
    from tilelang.analysis.summary import summarize

    arch = _arch_name(dev)

    def estimate(cfg):
        try:
            func = build(**{**values, **cfg})
        except Exception as err:  # noqa: BLE001
            return None, f"the factory raised: {type(err).__name__}"
        try:
            return _occupancy_estimate(summarize(func, arch), dev)
        except Exception as err:  # noqa: BLE001 - an estimate only
            return None, f"analysis failed: {type(err).__name__}: {err}"

    cur_s, cur_why = estimate(current_cfg)
    current = Candidate(current_cfg, cur_s, why=cur_why)
    if cur_s is None:
        return Recommendation(None, current, reason=f"no roofline estimate of the current values: {cur_why}")
    grid = list(itertools.product(*[_choices(p, current_cfg[p]) for p in tile]))
    grid.sort(key=lambda combo: sum(a != current_cfg[p] for a, p in zip(combo, tile)))   # nearest first
    scored = []
    for combo in grid[:MAX_BUILDS]:
        cfg = dict(zip(tile, combo))
        if cfg == current_cfg:
            continue
        s, _ = estimate(cfg)
        if s is not None:
            scored.append(Candidate(cfg, s, cur_s / s))
    if not scored:
        return Recommendation(None, current, reason="no other candidate value builds and has an estimate")
    times = [c.seconds for c in scored] + [cur_s]
    if max(times) <= min(times) * 1.01:
        return Recommendation(None, current, reason="the roofline and occupancy estimates do not tell the "
                                                    "candidate values apart (within 1 %)")
    scored.sort(key=lambda c: c.seconds)
    better = [c for c in scored if c.seconds < cur_s * 0.99]
    reason = "roofline + occupancy (uncalibrated ranking)"
    if not better:
        return Recommendation("roofline", current, [], reason=reason + ": the current values are already the best")
    return Recommendation("roofline", current, better[:topk], reason=reason)


__all__ = ["ALIASES", "Candidate", "Recommendation", "TILE_PARAMS", "canonical", "recommend_factory", "tile_params"]
