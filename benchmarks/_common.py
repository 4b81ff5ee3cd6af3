"""Shared by bench_core.py and bench_attention.py: rows, the markdown table, and running a row so
that its failure becomes a FAILED line instead of ending the run.

    Row                      one table row (our kernel against a reference)
    run_row(name, fn, ...)   fn(...) -> Row; any exception -> Row(name, FAILED, one-line reason)
    sweep(label, configs, build, check, time_ms)
                             builds every config (in parallel), keeps the fastest that passed
                             its check
    paired(ours, ref, bench) medians of both timed alternately (same clocks and temperature)
    render(rows, header)     the markdown table
    log(msg)                 progress on stdout, flushed (the table comes at the end)
"""

from __future__ import annotations

import statistics
import sys
import time
import traceback
from dataclasses import dataclass, field

from _sass import OPCODES, format_counts, sass_counts

COLUMNS = ["kernel", "ours", "reference", "ratio", *OPCODES, "notes"]

# Called with each finished Row by run_row (bench_core.py rewrites its --out file from here, so a
# run cut short keeps the rows it finished).
ROW_LISTENERS: list = []


def log(msg: str) -> None:
    print(msg, flush=True)


def one_line(err: BaseException, limit: int = 240) -> str:
    """``Type: first non-empty line of the message``, shortened, safe inside a markdown cell."""
    text = next((ln.strip() for ln in str(err).splitlines() if ln.strip()), "")
    line = f"{type(err).__name__}: {text}" if text else type(err).__name__
    if len(line) > limit:
        line = line[:limit - 3] + "..."
    return line.replace("|", "/")


@dataclass
class Row:
    kernel: str
    ours: str = ""
    reference: str = ""
    ratio: float | None = None   # ours relative to the reference, higher is better
    sass: dict | None = None     # {opcode: count}, None = n/a
    notes: str = ""
    failed: bool = False
    extra: dict = field(default_factory=dict)

    def cells(self) -> list[str]:
        if self.failed:
            return [self.kernel, "FAILED", self.reference or "-", "-", *format_counts(self.sass),
                    self.notes]
        ratio = f"{self.ratio:.2f}x" if self.ratio is not None else "-"
        return [self.kernel, self.ours, self.reference, ratio, *format_counts(self.sass), self.notes]


def render(rows: list[Row], header: list[str] | None = None) -> str:
    lines = list(header or [])
    lines.append("| " + " | ".join(COLUMNS) + " |")
    lines.append("|" + "---|" * len(COLUMNS))
    for row in rows:
        lines.append("| " + " | ".join(c.replace("\n", " ") for c in row.cells()) + " |")
    return "\n".join(lines)


def _cleanup() -> None:
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
    except Exception as e:  # noqa: BLE001 - a sticky CUDA error shows up here; the next row reports it
        log(f"  (cleanup after the row: {one_line(e)})")


def run_row(name: str, fn, *args, **kwargs) -> Row:
    """Run one row; never raises (except KeyboardInterrupt)."""
    t0 = time.time()
    log(f"[bench] {name} ...")
    try:
        row = fn(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 - one failing row must not end the run
        traceback.print_exc(file=sys.stderr)
        sys.stderr.flush()
        row = Row(name, failed=True, notes=one_line(e))
    _cleanup()
    status = f"FAILED: {row.notes}" if row.failed else f"{row.ours} vs {row.reference}" + (
        f" = {row.ratio:.2f}x" if row.ratio is not None else "")
    log(f"[bench] {name}: {status} ({time.time() - t0:.1f} s)")
    for listener in ROW_LISTENERS:
        try:
            listener(row)
        except Exception as e:  # noqa: BLE001
            log(f"  (row listener failed: {one_line(e)})")
    return row


def sweep(label: str, configs: list[dict], build, check, time_ms):
    """For each config: kernel = build(cfg); check(kernel) raises on a wrong result; then
    time_ms(kernel).  Returns (best_ms, best_cfg, best_kernel, failures) where failures lists
    (cfg, reason) of the configs that did not compile or did not pass; raises when none passed."""
    best = None
    failures = []
    built = build_all(configs, build)
    for cfg, result in zip(configs, built):
        try:
            if isinstance(result, BaseException):
                raise result
            kernel = result
            check(kernel)
            ms = time_ms(kernel)
        except Exception as e:  # noqa: BLE001 - try the other configs
            reason = one_line(e)
            failures.append((cfg, reason))
            log(f"  {label} {cfg}: FAILED {reason}")
            traceback.print_exc(file=sys.stderr)
            sys.stderr.flush()
            continue
        log(f"  {label} {cfg}: {ms * 1e3:.1f} us")
        if best is None or ms < best[0]:
            best = (ms, cfg, kernel)
    if best is None:
        raise RuntimeError(f"all {len(configs)} configs failed; first: {failures[0][1]}")
    return best[0], best[1], best[2], failures


def paired(ours, ref, bench, rounds: int = 5) -> tuple[float, float]:
    """Median milliseconds of ``ours`` and ``ref`` timed alternately, ``rounds`` times each (the
    order flips every round). The H200's clock follows its power draw and temperature: timed a
    minute apart, the same torch.matmul measured 583 and 757 TFLOP/s in one session, so a ratio
    is only fair when both sides share the conditions."""
    t_ours, t_ref = [], []
    for r in range(rounds):
        pair = [(t_ours, ours), (t_ref, ref)]
        for times, fn in (pair if r % 2 == 0 else pair[::-1]):
            times.append(bench(fn))
    return statistics.median(t_ours), statistics.median(t_ref)


def build_all(configs: list[dict], build) -> list:
    """build(cfg) for every config, in threads (tracing and lowering take turns under
    tilelang.jit.LOWER_LOCK; the nvcc runs overlap): the kernel or the exception, per config."""
    import os
    from concurrent.futures import ThreadPoolExecutor

    def one(cfg):
        try:
            return build(cfg)
        except Exception as e:  # noqa: BLE001 - reported by the caller, per config
            return e

    with ThreadPoolExecutor(max_workers=max(1, min(len(configs), os.cpu_count() or 1))) as pool:
        return list(pool.map(one, configs))


def failure_note(failures, total: int) -> str:
    if not failures:
        return ""
    return f"; {len(failures)}/{total} configs failed (first: {failures[0][1][:120]})"


def compile_only_row(name: str, configs: list[dict], build) -> Row:
    """--compile-only: build every config (no GPU needed), SASS counts of the first that builds."""
    built, failures = [], []
    for cfg, result in zip(configs, build_all(configs, build)):
        if isinstance(result, BaseException):
            failures.append((cfg, one_line(result)))
            log(f"  {name} {cfg}: FAILED {one_line(result)}")
        else:
            built.append((cfg, result))
            log(f"  {name} {cfg}: compiled")
    if not built:
        raise RuntimeError(f"all {len(configs)} configs failed; first: {failures[0][1]}")
    cfg, kernel = built[0]
    return Row(name, ours="compiled", reference="-", sass=sass_counts(kernel, log=log),
               notes=f"{len(built)}/{len(configs)} configs compile; SASS of {cfg}"
                     + failure_note(failures, len(configs)))


def sass_of(kernel) -> dict | None:
    return sass_counts(kernel, log=log)
