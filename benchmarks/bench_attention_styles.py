#!/usr/bin/env python3
"""Issue 20: upstream's flash-attention forward (examples/flash_attention/example_mha_fwd_bhsd.py,
unchanged) against ours (examples/flash_attention.py) at the same sizes and tiles, and both against
F.scaled_dot_product_attention, timed three ways in one process:

    python3 benchmarks/bench_attention_styles.py [--causal] [--shape B,H,S,D] [--rounds N]

- ``paired``: each kernel and SDPA alternately, ``--rounds`` times, medians (bench_attention.py's
  method: both sides share the GPU's clock and temperature);
- ``sequential``: triton.testing.do_bench on the kernel, then on SDPA, once each, right after the
  reference check (bench_upstream.py's method);
- the two kernels paired against each other.

At B8 H32 S4096 D128, 128x128 tiles, 2 stages, 256 threads both sources lower to the same CUDA
(the script prints whether they did), so any gap between their ratios is the timing method's.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "examples"))
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from _common import paired  # noqa: E402
from _upstream_cases import load  # noqa: E402
from bench_upstream import examples_dir  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--causal", action="store_true")
    p.add_argument("--shape", default="8,32,4096,128", metavar="B,H,S,D")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--examples", help="upstream's examples/ folder (default: as bench_upstream.py finds it)")
    args = p.parse_args()
    B, H, S, D = (int(x) for x in args.shape.split(","))
    causal = args.causal
    cfg = dict(block_M=128, block_N=128, num_stages=2, threads=256)

    import torch
    import torch.nn.functional as F
    import tilelang

    up = load(examples_dir(args.examples), "flash_attention", "example_mha_fwd_bhsd")
    import flash_attention as ours_mod

    k_up = up.flashattn(B, H, S, S, D, causal, **cfg)
    k_ours = ours_mod.flashattn(B, H, S, D, causal, 1, "bhsd", **cfg)
    same = k_up.get_kernel_source() == k_ours.get_kernel_source()
    print(f"generated CUDA identical: {same}", flush=True)
    if not torch.cuda.is_available():
        print("no CUDA device: nothing timed")
        return 0

    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.float16) for _ in range(3))
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    for name, kern in (("upstream-style", k_up), ("ours example", k_ours)):
        torch.testing.assert_close(kern(q, k, v), ref, rtol=1e-2, atol=1e-2)
    flops = 4.0 * B * H * S * S * D * (0.5 if causal else 1.0)

    def bench(fn):
        return tilelang.do_bench(fn, warmup=25, rep=100)

    def sdpa():
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    def tf(ms):
        return f"{flops / ms / 1e9:.0f} TFLOP/s"

    print(f"B{B} H{H} S{S} D{D} causal={causal}, tiles 128x128 s2 t256")
    for name, kern in (("upstream-style", k_up), ("ours example", k_ours)):
        t, t_ref = paired(lambda kern=kern: kern(q, k, v), sdpa, bench, rounds=args.rounds)
        print(f"  paired     {name:15s} {tf(t)} vs SDPA {tf(t_ref)}: {t_ref / t:.3f}x", flush=True)
    try:
        import triton.testing

        for name, kern in (("upstream-style", k_up), ("ours example", k_ours)):
            kern(q, k, v)
            torch.cuda.synchronize()
            t = float(triton.testing.do_bench(lambda kern=kern: kern(q, k, v), warmup=25, rep=100,
                                              return_mode="median"))
            t_ref = float(triton.testing.do_bench(sdpa, warmup=25, rep=100, return_mode="median"))
            print(f"  sequential {name:15s} {tf(t)} vs SDPA {tf(t_ref)}: {t_ref / t:.3f}x", flush=True)
    except ImportError:
        print("  sequential: triton not importable, skipped")
    a, b = paired(lambda: k_up(q, k, v), lambda: k_ours(q, k, v), bench, rounds=args.rounds)
    print(f"  upstream-style against ours example (paired): {b / a:.3f}x ({tf(a)} / {tf(b)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
