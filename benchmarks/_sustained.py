"""A kernel run back to back for seconds, with the SM clock and board power it settles at.

    sustained(fn, seconds, sync)  -> Sustained(us_per_call, sm_mhz, watts, celsius)
    parse_smi(text)               -> [(sm_mhz, watts, celsius)] from nvidia-smi's csv samples
    settled(samples)              -> the medians of the samples after the first quarter

A 0.2 ms GEMM at 4096^3 runs at the card's power limit: ``do_bench`` times it from whatever clock
the previous kernel left, and two kernels doing the same work compare by the clock each can hold
at that power (session 48, H100, bf16: ours and cuBLAS both at ~697 W and 1425-1440 MHz, 206 against
204 us a call; TMA multicast took the clock 5 % up and the kernel 1 % down). This is the sustained
view beside the usual one.
``nvidia-smi`` samples every 50 ms while the kernel loops; no nvidia-smi: clocks and power are None.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import time
from dataclasses import dataclass

QUERY = "clocks.sm,power.draw,temperature.gpu"


@dataclass
class Sustained:
    us_per_call: float
    sm_mhz: float | None
    watts: float | None
    celsius: float | None


def parse_smi(text: str) -> list[tuple[float, float, float]]:
    """The (SM MHz, W, C) samples of ``nvidia-smi --query-gpu=QUERY --format=csv,noheader,nounits``;
    lines that are not three numbers (``[N/A]``, a cut-off last line) are skipped."""
    out = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 3:
            continue
        try:
            out.append(tuple(float(p) for p in parts))
        except ValueError:
            continue
    return out


def settled(samples: list) -> tuple:
    """Medians of each column over the samples after the first quarter (the clock ramp), or Nones."""
    rest = samples[len(samples) // 4:]
    if not rest:
        return (None, None, None)
    return tuple(statistics.median(s[i] for s in rest) for i in range(3))


def sustained(fn, seconds: float, sync, batch: int = 50) -> Sustained:
    """Run ``fn`` in batches of ``batch`` (``sync()`` after each) for ``seconds``; the time per call
    over the whole run and the settled clock, power and temperature."""
    smi = shutil.which("nvidia-smi")
    proc = subprocess.Popen([smi, f"--query-gpu={QUERY}", "--format=csv,noheader,nounits", "-lms", "50"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True) if smi else None
    calls, start = 0, time.perf_counter()
    try:
        while time.perf_counter() - start < seconds:
            for _ in range(batch):
                fn()
            sync()
            calls += batch
        elapsed = time.perf_counter() - start
    finally:
        text = ""
        if proc is not None:
            proc.terminate()
            text = proc.communicate()[0]
    return Sustained(elapsed / max(calls, 1) * 1e6, *settled(parse_smi(text)))
