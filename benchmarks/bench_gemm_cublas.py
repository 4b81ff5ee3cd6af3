#!/usr/bin/env python3
"""Upstream's GEMM example against cuBLAS, timed in alternating rounds (issue 20's GEMM row).

The kernel is ``example_gemm_autotune.matmul`` from upstream's examples, unchanged (C = A @ B.T,
``T.use_swizzle(panel_size=10)``), built with whichever ``tilelang`` is importable, at each tile
config and dtype; the reference is ``torch.matmul`` on the same inputs (cuBLAS). At 0.2 ms a GEMM
runs at the H200's power limit, so whichever side is timed second after a heavy kernel reads a
different clock than the first (sessions 32-38: the bf16 row read 0.89x-1.04x cuBLAS from one and
the same CUDA, by the order of the cases). Each row here is timed in ``--rounds`` ABBA rounds
(ours, cuBLAS, cuBLAS, ours, ...), each a ``do_bench`` median after a pause, and prints both
medians, the ratio of the medians and the spread of the per-round ratios.

    python3 benchmarks/bench_gemm_cublas.py [--sizes 4096 8192] [--dtypes float16 bfloat16]
        [--configs 128x256x64s3t256 ...] [--rounds 4] [--sustained 3] [--json out.json]

``--sustained S`` adds, per row, each side run back to back for S seconds (ours, cuBLAS, cuBLAS,
ours): microseconds a call, and the SM clock and board power it settles at (``_sustained.py``): at
the power limit two kernels of the same work differ by their energy per clock.

Without a CUDA GPU it says so and exits 2. Only the public ``tilelang`` API and the example module
are used, so upstream's wheel runs it too (``PYTHONPATH=~/up-site``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

# upstream's sm_90 heuristic config first, then its other example tiles
CONFIGS = ["128x256x64s3t256", "128x128x64s3t256", "128x128x64s3t128", "128x128x32s3t128"]


def parse_config(label: str) -> tuple[int, int, int, int, int]:
    try:
        tiles, rest = label.split("s")
        stages, threads = rest.split("t")
        bm, bn, bk = (int(x) for x in tiles.split("x"))
        return bm, bn, bk, int(stages), int(threads)
    except ValueError:
        raise SystemExit(f"bench_gemm_cublas: config {label!r} is not BMxBNxBKsSTAGEStTHREADS "
                         "(e.g. 128x256x64s3t256)") from None


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[4096])
    p.add_argument("--dtypes", nargs="+", default=["float16", "bfloat16"])
    p.add_argument("--configs", nargs="+", default=CONFIGS)
    p.add_argument("--rounds", type=int, default=4, help="ABBA rounds per row (default 4)")
    p.add_argument("--rep", type=int, default=100, help="do_bench repetitions, ms (default 100)")
    p.add_argument("--pause", type=float, default=0.5, help="idle seconds before each timing")
    p.add_argument("--examples", help="upstream's examples/ (default: as bench_upstream.py)")
    p.add_argument("--sustained", type=float, default=0, metavar="S",
                   help="also run each side back to back S seconds: us/call, SM MHz, W (default off)")
    p.add_argument("--json", help="write the rows here")
    a = p.parse_args()
    configs = [parse_config(c) for c in a.configs]

    import torch
    if not torch.cuda.is_available():
        print("bench_gemm_cublas: no CUDA GPU here", file=sys.stderr)
        return 2
    import triton.testing
    import tilelang
    import tilelang.language as T
    from bench_upstream import examples_dir
    from _upstream_cases import load

    mod = load(examples_dir(a.examples), "gemm", "example_gemm_autotune")

    def bench(fn) -> float:
        time.sleep(a.pause)
        return float(triton.testing.do_bench(fn, warmup=25, rep=a.rep, return_mode="median"))

    print(f"# {torch.cuda.get_device_name()}  tilelang {getattr(tilelang, '__version__', '?')} "
          f"({Path(tilelang.__file__).parent})  {a.rounds} ABBA rounds")
    print("| dtype | size | tile | ours ms | cuBLAS ms | ours / cuBLAS speed | per-round min-max | TFLOP/s |")
    print("|---|---:|---|---:|---:|---:|---|---:|")
    rows = []
    for dtype in a.dtypes:
        tdt = getattr(torch, dtype)
        for size in a.sizes:
            torch.manual_seed(0)
            x = torch.randn(size, size, device="cuda", dtype=torch.float32).to(tdt)
            y = torch.randn(size, size, device="cuda", dtype=torch.float32).to(tdt)
            ref = (x.float() @ y.float().T).to(tdt)
            for bm, bn, bk, stages, threads in configs:
                label = f"{bm}x{bn}x{bk} s{stages} t{threads}"
                try:
                    k = mod.matmul(size, size, size, bm, bn, bk, stages, threads, True,
                                   dtype=getattr(T, dtype))
                    c = k(x, y)
                    torch.cuda.synchronize()
                    err = float((c.float() - ref.float()).norm() / ref.float().norm())
                    if err > 2e-2:
                        raise AssertionError(f"relative error {err:.3g}")
                except Exception as e:  # noqa: BLE001 - a failing config is a row, not the end
                    print(f"| {dtype} | {size} | {label} | error: {type(e).__name__}: "
                          f"{str(e).splitlines()[0][:120] if str(e) else ''} | | | | |")
                    rows.append({"dtype": dtype, "size": size, "tile": label, "error": str(e)[:400]})
                    continue
                ours, cublas, ratios = [], [], []
                for r in range(a.rounds):
                    order = ("ours", "ref") if r % 2 == 0 else ("ref", "ours")
                    got = {}
                    for side in order:
                        got[side] = bench((lambda: k(x, y)) if side == "ours" else (lambda: x @ y.T))
                    ours.append(got["ours"])
                    cublas.append(got["ref"])
                    ratios.append(got["ref"] / got["ours"])
                mo, mc = statistics.median(ours), statistics.median(cublas)
                tflops = 2 * size ** 3 / mo * 1e-9
                print(f"| {dtype} | {size} | {label} | {mo:.4f} | {mc:.4f} | {mc / mo:.3f}x | "
                      f"{min(ratios):.3f}-{max(ratios):.3f} | {tflops:.0f} |", flush=True)
                row = {"dtype": dtype, "size": size, "tile": label, "ours_ms": ours, "cublas_ms": cublas,
                       "ratio": mc / mo}
                if a.sustained > 0:
                    row["sustained"] = _sustained_row(k, x, y, a, torch, f"{dtype} {size} {label}")
                rows.append(row)
    if a.json:
        Path(a.json).write_text(json.dumps({"tilelang": str(Path(tilelang.__file__).parent),
                                            "device": torch.cuda.get_device_name(), "rows": rows},
                                           indent=1))
    return 0


def _sustained_row(k, x, y, a, torch, label) -> list:
    """Ours and cuBLAS back to back (ABBA), ``a.sustained`` seconds each: one line a run."""
    from _sustained import sustained

    runs = []
    for side in ("ours", "cuBLAS", "cuBLAS", "ours"):
        time.sleep(a.pause)
        s = sustained((lambda: k(x, y)) if side == "ours" else (lambda: x @ y.T), a.sustained, torch.cuda.synchronize)
        clock = f"{s.sm_mhz:.0f} MHz, {s.watts:.0f} W" if s.sm_mhz is not None else "no nvidia-smi"
        print(f"  sustained {label} {side:6}: {s.us_per_call:7.1f} us/call ({clock})", flush=True)
        runs.append({"side": side, **vars(s)})
    return runs


if __name__ == "__main__":
    sys.exit(main())
