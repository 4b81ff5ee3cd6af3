"""GPU timing with CUDA events, in the manner of triton.testing.do_bench.

Contract:
- ``do_bench(fn, warmup=25, rep=100, return_mode="median")``: ``warmup`` and
  ``rep`` are time budgets in milliseconds (as in Triton), turned into
  iteration counts from a 5-run estimate.  Before each timed run the L2 cache
  is flushed by zeroing a 256 MB buffer (kept per device and reused), so each
  run starts cold.  Each run is timed by its own pair of CUDA events on the
  current stream; the result is in milliseconds.
- ``return_mode``: "min", "max", "mean", "median" (a float) or "all" (the list
  of per-run times).  ``quantiles`` (e.g. [0.5, 0.2, 0.8]) returns a list of
  those quantiles instead.
- Raises RuntimeError("no CUDA device: ...") without a GPU.
"""

from __future__ import annotations

import statistics

L2_FLUSH_BYTES = 256 * 1024 * 1024
_flush_buffers: dict = {}  # device index -> flush buffer


def _torch():
    import torch  # imported on use: `import tilelang` must work without torch

    return torch


def _require_cuda() -> int:
    torch = _torch()
    if not torch.cuda.is_available():
        raise RuntimeError("no CUDA device: torch.cuda.is_available() is False, so nothing can be timed")
    return torch.cuda.current_device()


def l2_flush_buffer(device: int):
    """A reusable 256 MB int8 buffer on ``device``; zeroing it evicts the L2 cache."""
    torch = _torch()
    buf = _flush_buffers.get(device)
    if buf is None:
        buf = _flush_buffers[device] = torch.empty(L2_FLUSH_BYTES, dtype=torch.int8, device=device)
    return buf


def _summarise(times: list[float], return_mode: str, quantiles):
    if quantiles is not None:
        torch = _torch()
        ordered = torch.tensor(times, dtype=torch.float64)
        return [float(q) for q in torch.quantile(ordered, torch.tensor(list(quantiles), dtype=torch.float64))]
    if return_mode == "all":
        return times
    reducers = {"min": min, "max": max, "mean": statistics.fmean, "median": statistics.median}
    if return_mode not in reducers:
        raise ValueError(f"return_mode must be one of {sorted(reducers) + ['all']}, got {return_mode!r}")
    return float(reducers[return_mode](times))


def do_bench(fn, warmup: float = 25, rep: float = 100, return_mode: str = "median",
             quantiles=None, flush_l2: bool = True):
    """Time ``fn()`` on the GPU; returns milliseconds (see module docstring)."""
    torch = _torch()
    device = _require_cuda()
    cache = l2_flush_buffer(device) if flush_l2 else None
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        if cache is not None:
            cache.zero_()
        fn()
    end.record()
    torch.cuda.synchronize()
    estimate = max(start.elapsed_time(end) / 5, 1e-3)
    n_warmup, n_repeat = max(1, int(warmup / estimate)), max(1, int(rep / estimate))
    for _ in range(n_warmup):
        fn()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n_repeat)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n_repeat)]
    for i in range(n_repeat):
        if cache is not None:
            cache.zero_()  # outside the timed region: only fn() is measured
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    times = [s.elapsed_time(e) for s, e in zip(starts, ends)]
    return _summarise(times, return_mode, quantiles)
