"""Shared by the examples: timing against torch in the same run, and a CPU-only compile check.

Each example defines ``kernels()`` (PrimFuncs at a few shapes, for the CPU check that lowers and
compiles them with nvcc) and ``main()`` (on a GPU: check against torch, print time and ratio).
"""

from __future__ import annotations

import torch

import tilelang


def has_gpu() -> bool:
    return torch.cuda.is_available()


def bench(fn) -> float:
    """Median milliseconds of ``fn`` on the GPU (warmed up, L2 flushed between runs)."""
    return tilelang.do_bench(fn, warmup=25, rep=100)


def report(name: str, ours, ref, flops: float | None = None, nbytes: float | None = None) -> dict:
    """Time ``ours`` and ``ref`` in the same run and print one line with their ratio."""
    t_ours, t_ref = bench(ours), bench(ref)
    line = f"{name:<40} ours {t_ours * 1e3:9.1f} us   torch {t_ref * 1e3:9.1f} us   speed ratio {t_ref / t_ours:5.2f}x"
    if flops:
        line += f"   {flops / t_ours / 1e9:7.1f} TFLOP/s"
    if nbytes:
        line += f"   {nbytes / t_ours / 1e6:7.1f} GB/s"
    print(line, flush=True)
    return {"name": name, "ours_ms": t_ours, "torch_ms": t_ref, "ratio": t_ref / t_ours}


def copy_bandwidth(nbytes: int) -> float:
    """GB/s of a device-to-device copy moving ``nbytes`` (read + write counted)."""
    src = torch.empty(nbytes // 2, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    ms = bench(lambda: dst.copy_(src))
    return 2 * src.numel() / ms / 1e6
