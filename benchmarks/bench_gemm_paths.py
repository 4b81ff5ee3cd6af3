#!/usr/bin/env python3
"""The three sm_90a GEMM code paths of the compiler side by side, against torch.matmul, one run:

    ws       TMA producer warpgroup + mbarriers feeding asynchronous wgmma, the epilogue through a
             swizzled shared tile and TMA stores, a persistent grid where the stage fits (the default)
    ws-1tile the same, one output tile per block (tl.disable_persistent)
    ws-direct the accumulator stored from registers (tl.disable_epilogue_staging)
    ws-cluster clusters of two blocks sharing the B tile by TMA multicast (tl.cluster_multicast, experimental)
    cp.async wgmma fed by cp.async from every thread (tl.disable_warp_specialized)
    mma.sync the sm_80 path (tl.disable_wgmma)

Each row checks the result against torch and prints TFLOP/s, the ratio to torch.matmul and the
SASS counts (HGMMA, UTMALDG, HMMA, LDSM, USETMAXREG, SYNCS) of the kernel.

    python3 benchmarks/bench_gemm_paths.py [--sizes 4096 8192] [--paths ws ws-direct] [--out table.md]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "examples"))
sys.path.insert(0, str(HERE))

PATHS = {"ws": {}, "ws-1tile": {"tl.disable_persistent": True}, "ws-direct": {"tl.disable_epilogue_staging": True},
         "ws-cluster": {"tl.cluster_multicast": True},
         "cp.async": {"tl.disable_warp_specialized": True}, "mma.sync": {"tl.disable_wgmma": True},
         # A/B of session 12's one-warpgroup GEMM changes (not run by default: name them in --paths)
         "ws-1block": {"tl.disable_block_pair": True}, "ws-3buf": {"tl.disable_ring_extra_stage": True},
         "ws-s11": {"tl.disable_block_pair": True, "tl.disable_ring_extra_stage": True}}
AB_PATHS = ("ws-1block", "ws-3buf", "ws-s11")
CONFIGS = [
    {"block_M": 128, "block_N": 256, "block_K": 64, "num_stages": 4, "threads": 256},
    {"block_M": 128, "block_N": 256, "block_K": 64, "num_stages": 3, "threads": 256},
    {"block_M": 128, "block_N": 128, "block_K": 64, "num_stages": 4, "threads": 128},
    # upstream's example_gemm / example_gemm_autotune tiles (run only when named: --configs 128x128x32s3 ...)
    {"block_M": 128, "block_N": 128, "block_K": 32, "num_stages": 3, "threads": 128},
    {"block_M": 128, "block_N": 128, "block_K": 64, "num_stages": 3, "threads": 128},
    {"block_M": 64, "block_N": 128, "block_K": 64, "num_stages": 3, "threads": 128},
    {"block_M": 128, "block_N": 128, "block_K": 64, "num_stages": 3, "threads": 256},
]
OPS = ("HGMMA", "UTMALDG", "UTMASTG", "HMMA", "LDSM", "USETMAXREG", "SYNCS")


def _bench(fn) -> float:
    import tilelang

    return tilelang.do_bench(fn, warmup=25, rep=100)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[4096, 8192])
    parser.add_argument("--dtypes", nargs="+", default=["float16", "bfloat16"])
    parser.add_argument("--paths", nargs="+", default=[p for p in PATHS if p not in AB_PATHS], choices=list(PATHS))
    parser.add_argument("--configs", nargs="+", metavar="LABEL",
                        help="only these tile configs, e.g. 128x256x64s4 (default: all of CONFIGS)")
    parser.add_argument("--out")
    args = parser.parse_args()
    import torch

    import gemm
    import tilelang
    from _common import paired
    from _sass import sass_counts

    if not torch.cuda.is_available():
        print("no CUDA device: this benchmark needs a GPU")
        return 0
    lines = [f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}", "",
             "| dtype | n | path | config | ours TFLOP/s | torch TFLOP/s | ratio | " + " | ".join(OPS) + " |",
             "|---|---|---|---|---|---|---|" + "---|" * len(OPS)]
    for dtype in args.dtypes:
        for n in args.sizes:
            tdt = getattr(torch, dtype)
            a = torch.randn(n, n, device="cuda", dtype=tdt)
            b = torch.randn(n, n, device="cuda", dtype=tdt)
            ref = (a.float() @ b.float())
            flops = 2.0 * n ** 3
            for path in args.paths:
                configs = PATHS[path]
                for cfg in CONFIGS:
                    label = f"{cfg['block_M']}x{cfg['block_N']}x{cfg['block_K']} s{cfg['num_stages']} t{cfg['threads']}"
                    if args.configs and label.split(" t")[0].replace(" ", "") not in args.configs:
                        continue
                    if not args.configs and cfg in CONFIGS[3:]:   # upstream's tiles: only when named
                        continue
                    try:
                        func = gemm.matmul.get_prim_func(n, n, n, dtype=dtype, **cfg)
                        kern = tilelang.compile(func, out_idx=[-1], pass_configs=configs)
                        err = (kern(a, b).float() - ref).abs().max().item()
                        if not err < 0.05 * ref.abs().max().item():
                            raise AssertionError(f"max |error| {err:.3g}")
                        # each row times torch alongside (paired): the clock drifts over a run
                        t, t_ref = paired(lambda: kern(a, b), lambda: a @ b, _bench, rounds=3)
                        counts = sass_counts(kern, OPS) or {}
                        cells = [str(counts.get(op, "n/a")) for op in OPS]
                        row = (f"| {dtype} | {n} | {path} | {label} | {flops / t / 1e9:.0f} | "
                               f"{flops / t_ref / 1e9:.0f} | {t_ref / t:.2f}x | " + " | ".join(cells) + " |")
                    except Exception as e:  # noqa: BLE001 - one failing row must not end the run
                        row = f"| {dtype} | {n} | {path} | {label} | FAILED: {type(e).__name__}: {str(e)[:160]} |"
                    print(row, flush=True)
                    lines.append(row)
    text = "\n".join(lines)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
