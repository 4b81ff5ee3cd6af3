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
- ``backend`` (upstream's): "event" (the default, as above); "cupti": the GPU
  time of the kernels ``fn`` launches, read from torch's profiler (CUPTI)
  over ``rep`` runs, the L2 flush excluded, mean in ms; "cudagraph": ``fn``
  captured ``n`` times in one CUDA graph, replayed 10 times after a flush,
  times divided by ``n``; "wall": host wall-clock time per call of ``fn``, no flush (works
  without a GPU; with a CUDA ``device`` the device is synchronised around each call).
  ``_n_warmup`` / ``_n_repeat`` fix the counts.
- Upstream's signature and keywords: ``do_bench(fn, warmup, rep, _n_warmup, _n_repeat,
  quantiles, fast_flush, backend, return_mode, device, cache_size, early_stop_baseline)``;
  ``device`` times on that CUDA device, ``cache_size`` is the flush buffer's MB, ``fast_flush`` is
  accepted (our flush is one memset either way), ``early_stop_baseline`` returns the 5-run
  estimate at once when it exceeds that many ms. The default ``return_mode`` is "median" (more
  robust to an outlier than upstream's "mean").
- Raises RuntimeError("no CUDA device: ...") without a GPU (but for "wall").
"""

from __future__ import annotations

import contextlib
import statistics
import time

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


def l2_flush_buffer(device: int, nbytes: int = L2_FLUSH_BYTES):
    """A reusable int8 buffer (256 MB) on ``device``; zeroing it evicts the L2 cache."""
    torch = _torch()
    buf = _flush_buffers.get((device, nbytes))
    if buf is None:
        buf = _flush_buffers[(device, nbytes)] = torch.empty(nbytes, dtype=torch.int8, device=device)
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


_CACHE_FLUSH_RANGE = "tilelang::l2_flush"
BACKENDS = ("event", "cupti", "cudagraph", "wall")


def do_bench(fn, warmup: float = 25, rep: float = 100, _n_warmup: int = 0, _n_repeat: int = 0,
             quantiles=None, fast_flush: bool = True, backend: str = "event", return_mode: str = "median",
             device=None, cache_size: int = 256, early_stop_baseline: float | None = None, *,
             flush_l2: bool = True):
    """Time ``fn()`` on the GPU (or the host, ``backend="wall"``); returns milliseconds (see
    module docstring)."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown profiler backend {backend!r}; use one of {', '.join(BACKENDS)}")
    torch = _torch()
    place = None if device is None else torch.device("cuda", device) if isinstance(device, int) else torch.device(device)
    if backend == "wall":
        return _bench_wall(fn, warmup, rep, _n_warmup, _n_repeat, quantiles, return_mode, place,
                           early_stop_baseline)
    if place is not None and place.type != "cuda":
        raise ValueError(f"backend {backend!r} times on a CUDA device, got device {place}; use backend='wall'")
    _require_cuda()
    with torch.cuda.device(place) if place is not None else contextlib.nullcontext():
        device = torch.cuda.current_device()
        cache = l2_flush_buffer(device, int(cache_size) * 1024 * 1024) if flush_l2 or backend == "cupti" else None
        return _bench_events(fn, warmup, rep, _n_warmup, _n_repeat, quantiles, backend, return_mode, cache,
                             early_stop_baseline)


def _bench_wall(fn, warmup, rep, n_warmup, n_repeat, quantiles, return_mode, place, early_stop_baseline):
    """Host wall-clock ms per call (synchronising a CUDA ``place`` around each call)."""
    torch = _torch()
    sync = (lambda: torch.cuda.synchronize(place)) if place is not None and place.type == "cuda" else (lambda: None)

    def timed(n):
        out = []
        for _ in range(n):
            sync()
            t = time.perf_counter()
            fn()
            sync()
            out.append((time.perf_counter() - t) * 1e3)
        return out

    fn()
    sync()
    estimate = statistics.fmean(timed(5))
    if early_stop_baseline is not None and estimate > early_stop_baseline:
        return estimate if quantiles is None else [estimate] * len(quantiles)
    estimate = max(estimate, 1e-6)
    for _ in range(n_warmup if n_warmup > 0 else int(warmup / estimate)):
        fn()
    return _summarise(timed(n_repeat if n_repeat > 0 else max(1, int(rep / estimate))), return_mode, quantiles)


def _bench_events(fn, warmup, rep, _n_warmup, _n_repeat, quantiles, backend, return_mode, cache,
                  early_stop_baseline):
    torch = _torch()
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
    estimate = start.elapsed_time(end) / 5
    if early_stop_baseline is not None and estimate > early_stop_baseline:
        return estimate if quantiles is None else [estimate] * len(quantiles)
    estimate = max(estimate, 1e-3)
    n_warmup = _n_warmup if _n_warmup > 0 else max(1, int(warmup / estimate))
    n_repeat = _n_repeat if _n_repeat > 0 else max(1, int(rep / estimate))
    for _ in range(n_warmup):
        fn()
    if backend == "cupti":
        return _bench_with_cupti(fn, cache, n_repeat)
    if backend == "cudagraph":
        return _summarise(_bench_with_cudagraph(fn, cache, n_repeat), return_mode, quantiles)
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


def _bench_with_cupti(fn, cache, n_repeat: int) -> float:
    """Mean GPU time (ms) of the kernels one ``fn()`` launches, from torch's CUPTI profiler;
    the L2 flush before each run is recorded under its own range and left out."""
    torch = _torch()
    # the host activity records the flush range and the kernels launched inside it
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as prof:
        for _ in range(n_repeat):
            with torch.profiler.record_function(_CACHE_FLUSH_RANGE):
                cache.zero_()
            fn()
        torch.cuda.synchronize()

    def ns(us) -> int:     # durations in integer nanoseconds, so the two sums cancel exactly
        return int(round(float(us) * 1000))

    def on_device(e) -> bool:
        return getattr(getattr(e, "device_type", None), "name", "") == "CUDA"

    events = list(prof.events())
    total = sum(ns(e.self_device_time_total) for e in events if on_device(e) and not e.is_user_annotation)
    # the host-side flush range owns the kernels launched inside it (their device time)
    flush = sum(ns(e.device_time_total) for e in events if not on_device(e) and e.key == _CACHE_FLUSH_RANGE)
    return max(total - flush, 0) * 1e-6 / n_repeat


def _bench_with_cudagraph(fn, cache, n_repeat: int, replays: int = 10) -> list[float]:
    """Per-call times (ms) of ``fn`` captured ``n_repeat`` times in one CUDA graph."""
    torch = _torch()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(n_repeat):
                fn()
        torch.cuda.synchronize()
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(replays)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(replays)]
        for i in range(replays):
            if cache is not None:
                cache.zero_()
            starts[i].record()
            graph.replay()
            ends[i].record()
        torch.cuda.synchronize()
    return [s.elapsed_time(e) / n_repeat for s, e in zip(starts, ends)]
