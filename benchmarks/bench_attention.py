#!/usr/bin/env python3
"""Flash attention forward (examples/flash_attention.py) against F.scaled_dot_product_attention,
same run, causal and not.  Goal (issue 5): >= 0.6x SDPA at B=8, H=32, S=4096, D=128, fp16.

    python3 benchmarks/bench_attention.py [--out FILE] [--compile-only] [--no-sm80]
                                          [--pass-config KEY=VALUE ...] [--shape B,H,S,D ...]

``--shape`` (repeatable) measures other shapes than B8 H32 S4096 D128, e.g. longer sequences
(more KV iterations per row block) to see what the per-tile prologue and epilogue cost.

bench_core.py imports ``attention_rows`` so that one invocation covers everything.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "examples"))
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from _common import (Row, compile_only_row, failure_note, log, paired, render,  # noqa: E402
                     run_row, sass_of, sweep)

# The tile configurations tried, best one reported.
ATTENTION_CONFIGS = [
    {"block_M": 128, "block_N": 128, "num_stages": 2, "threads": 256},
    {"block_M": 128, "block_N": 128, "num_stages": 3, "threads": 256},
    {"block_M": 128, "block_N": 64, "num_stages": 3, "threads": 256},
    {"block_M": 64, "block_N": 128, "num_stages": 2, "threads": 128},
]
# The sm_80 path (mma.sync): four warps of 32 query rows each reuse every K/V fragment they load
# from shared memory twice, and with O_shared on Q_shared's bytes two 96 KiB blocks share an SM.
SM80_ATTENTION_CONFIGS = [
    {"block_M": 128, "block_N": 64, "num_stages": 2, "threads": 128},
    {"block_M": 128, "block_N": 32, "num_stages": 2, "threads": 128},
    {"block_M": 128, "block_N": 128, "num_stages": 2, "threads": 256},
    {"block_M": 64, "block_N": 64, "num_stages": 2, "threads": 128},
    {"block_M": 128, "block_N": 64, "num_stages": 2, "threads": 256},
]

SHAPE = {"B": 8, "H": 32, "S": 4096, "D": 128}
DEVICE = "cuda"


def _bench(fn) -> float:
    import tilelang

    return tilelang.do_bench(fn, warmup=25, rep=100)


# Extra pass configs for every row (``--pass-config KEY=VALUE``), e.g. to compare a lowering choice.
EXTRA_PASS_CONFIGS: dict = {}


def _build(B, H, S, D, causal, sm80=False):
    def build(cfg):
        import flash_attention as fa
        import tilelang

        configs = {"tl.enable_fast_math": True, **EXTRA_PASS_CONFIGS}
        if sm80:   # the sm_80 code path (mma.sync + ldmatrix) on the same GPU: wgmma switched off
            configs["tl.disable_wgmma"] = True
        return tilelang.compile(fa.flashattn.get_prim_func(B, H, S, D, causal, 1, "bhsd", **cfg), out_idx=[3],
                                pass_configs=configs)

    return build


def attention_row(B, H, S, D, causal, configs=None, compile_only=False, device=None, sm80=False) -> Row:
    """One row: the best of ``configs`` against SDPA (BHSD, fp16, no GQA); ``sm80``: with the
    sm_80 code path (``tl.disable_wgmma``)."""
    import torch
    import torch.nn.functional as F

    if configs is None:
        configs = SM80_ATTENTION_CONFIGS if sm80 else ATTENTION_CONFIGS
    device = DEVICE if device is None else device
    name = f"flash_attn fwd fp16 B{B} H{H} S{S} D{D} causal={causal}" + (" sm_80 path" if sm80 else "")
    build = _build(B, H, S, D, causal, sm80)
    if compile_only:
        return compile_only_row(name, configs, build)
    q, k, v = (torch.randn(B, H, S, D, device=device, dtype=torch.float16) for _ in range(3))
    flops = 4.0 * B * H * S * S * D * (0.5 if causal else 1.0)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    def check(kern):
        torch.testing.assert_close(kern(q, k, v), ref, rtol=1e-2, atol=1e-2)

    _, cfg, kern, failures = sweep(name, configs, build, check, lambda kern: _bench(lambda: kern(q, k, v)))
    t, t_ref = paired(lambda: kern(q, k, v), lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal),
                      _bench)
    return Row(name, ours=f"{flops / t / 1e9:.0f} TFLOP/s", reference=f"{flops / t_ref / 1e9:.0f} TFLOP/s (SDPA)",
               ratio=t_ref / t, sass=sass_of(kern),
               notes=f"tiles {cfg['block_M']}x{cfg['block_N']}, {cfg['threads']} threads, "
                     f"{cfg['num_stages']} stages" + failure_note(failures, len(configs)),
               extra={"ms": t, "ref_ms": t_ref, "config": cfg})


def attention_rows(B=None, H=None, S=None, D=None, causal_modes=(False, True), configs=None,
                   compile_only=False, sm80=True) -> list[Row]:
    """The attention rows (each one failing on its own, as a FAILED row); ``sm80`` adds the
    non-causal case on the sm_80 code path (issue 5's floor is stated for it)."""
    B, H, S, D = (SHAPE[n] if v is None else v for n, v in zip("BHSD", (B, H, S, D)))
    cases = [(c, False) for c in causal_modes] + ([(False, True)] if sm80 else [])
    return [run_row(f"flash_attn fwd fp16 B{B} H{H} S{S} D{D} causal={c}" + (" sm_80 path" if old else ""),
                    attention_row, B, H, S, D, c, configs=configs, compile_only=compile_only, sm80=old)
            for c, old in cases]


def main():
    parser = argparse.ArgumentParser(description="Flash attention forward against SDPA, same run.")
    parser.add_argument("--out", help="also write the markdown table to this file")
    parser.add_argument("--compile-only", action="store_true",
                        help="no GPU needed: compile every config and report SASS counts only")
    parser.add_argument("--pass-config", action="append", default=[], metavar="KEY=VALUE",
                        help="an extra pass config for every kernel (repeatable), e.g. "
                             "tl.disable_warpgroup_pingpong=1")
    parser.add_argument("--no-sm80", action="store_true", help="leave out the sm_80-path row")
    parser.add_argument("--shape", action="append", default=[], metavar="B,H,S,D",
                        help="measure this shape instead of B8 H32 S4096 D128 (repeatable)")
    args = parser.parse_args()
    shapes = []
    for item in args.shape:
        try:
            B, H, S, D = (int(x) for x in item.split(","))
        except ValueError:
            parser.error(f"--shape {item!r}: expected four integers B,H,S,D")
        shapes.append((B, H, S, D))
    for item in args.pass_config:
        key, _, value = item.partition("=")
        EXTRA_PASS_CONFIGS[key] = value.lower() not in ("0", "false", "no", "")
    import torch

    if not args.compile_only and not torch.cuda.is_available():
        print("no CUDA device: the benchmarks need a GPU (--compile-only works without one)")
        return 0
    rows = []
    for B, H, S, D in shapes or [(None, None, None, None)]:
        rows += attention_rows(B, H, S, D, compile_only=args.compile_only, sm80=not args.no_sm80)
    header = []
    if torch.cuda.is_available():
        header = [f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}", ""]
    text = render(rows, header)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    failed = sum(r.failed for r in rows)
    log(f"{failed} of {len(rows)} rows FAILED" if failed else
        f"all {len(rows)} rows " + ("compiled" if args.compile_only else "passed their checks"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
