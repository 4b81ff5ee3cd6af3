#!/usr/bin/env python3
"""The carver's recommendations against exhaustive timing (issue 21): GEMM 8192^3 fp16 (A @ B^T,
``examples/gemm.py``) and the flash attention forward B8 H32 S4096 D128 fp16 (BHSD, causal and
not, ``examples/flash_attention.py``).

    python3 benchmarks/bench_carver.py [--dry-run] [--compile-only] [--only gemm|attn|attn_causal ...]
                                       [--jobs N] [--limit N] [--arch sm_90a] [--out FILE]
                                       [--pass-config KEY=VALUE ...]

For each case a bounded config space (<= ~40 configs, plus the carver's top recommendation when
the space lacks it) is compiled first, in ``--jobs`` parallel processes (each ``tilelang.compile``
stores its kernel in the disk cache, so the timing process only loads it); configs that fail to
compile are skipped. Each compiled config is then run once against torch (a wrong result is
reported, not timed) and timed with ``tilelang.do_bench`` (warmup 25 ms, 100 ms). The table:
carver rank (by predicted time among the space; "-": the model calls it invalid), config,
predicted ms, measured ms, predicted / measured; then the top recommendation's speed as % of the
best measured config (acceptance: >= 95 %) and how many predictions are within 25 % of measured.

``--dry-run`` lists the configs and predictions only (no compile, no GPU); ``--compile-only``
compiles them (no GPU needed: the target is ``--arch``, default the GPU's or sm_90a).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
EXAMPLES = ROOT / "examples"

GEMM_SHAPE = (8192, 8192, 8192)
ATTN_SHAPE = (8, 32, 4096, 128)   # B, H, S, D


def gemm_space() -> list[dict]:
    """Tiles x threads our sm_90a GEMM supports or may try, each with 64- and 32-element k steps."""
    tiles = [(128, 256, 256), (256, 128, 256), (128, 192, 256), (128, 128, 256), (128, 128, 128),
             (64, 256, 128), (64, 128, 128)]
    out = []
    for bm, bn, t in tiles:
        for bk, stages in [(64, 2), (64, 3), (64, 4), (32, 3), (32, 4)]:
            out.append({"block_M": bm, "block_N": bn, "block_K": bk, "num_stages": stages, "threads": t})
    out.append({"block_M": 128, "block_N": 256, "block_K": 128, "num_stages": 2, "threads": 256})
    out.append({"block_M": 128, "block_N": 128, "block_K": 128, "num_stages": 2, "threads": 128})
    return out


def attention_space() -> list[dict]:
    """128-row tiles over 2 consumer warpgroups (examples' choice) with 1-3 stages, and the
    one-warpgroup and 256-row variants (the model calls some of them invalid: timed anyway)."""
    out = []
    for bn in (64, 128, 192):
        for stages in (1, 2, 3):
            out.append({"block_M": 128, "block_N": bn, "num_stages": stages, "threads": 256})
    for bm, bn, stages, t in [(128, 32, 2, 256), (64, 64, 2, 128), (64, 128, 2, 128), (64, 128, 3, 128),
                              (128, 64, 2, 128), (128, 128, 1, 128), (128, 128, 2, 128), (256, 64, 2, 256)]:
        out.append({"block_M": bm, "block_N": bn, "num_stages": stages, "threads": t})
    return out


CASES = {
    "gemm": {"title": f"GEMM fp16 {GEMM_SHAPE[0]}x{GEMM_SHAPE[1]}x{GEMM_SHAPE[2]} (A @ B^T)", "space": gemm_space},
    "attn": {"title": "flash attention fwd fp16 B{} H{} S{} D{} causal=False".format(*ATTN_SHAPE),
             "space": attention_space, "causal": False},
    "attn_causal": {"title": "flash attention fwd fp16 B{} H{} S{} D{} causal=True".format(*ATTN_SHAPE),
                    "space": attention_space, "causal": True},
}


def _key(cfg: dict) -> tuple:
    return tuple(sorted(cfg.items()))


def cfg_text(cfg: dict) -> str:
    text = f"{cfg['block_M']}x{cfg['block_N']}"
    if "block_K" in cfg:
        text += f"x{cfg['block_K']}"
    return text + f" s{cfg['num_stages']} t{cfg['threads']}"


# ----- the carver's view --------------------------------------------------------------------------

def template_for(case: str, arch):
    from tilelang.carver.template import FlashAttentionTemplate, MatmulTemplate

    if case == "gemm":
        M, N, K = GEMM_SHAPE
        return MatmulTemplate(M=M, N=N, K=K, in_dtype="float16", out_dtype="float16",
                              accum_dtype="float32").with_arch(arch)
    B, H, S, D = ATTN_SHAPE
    return FlashAttentionTemplate(batch_size=B, num_heads=H, head_dim=D, seq_length=S,
                                  is_causal=CASES[case]["causal"], in_dtype="float16").with_arch(arch)


def plan(case: str, arch, limit: int | None) -> tuple[list[dict], dict, dict]:
    """(configs to measure, {key: predicted seconds or None}, the carver's top config)."""
    template = template_for(case, arch)
    space = CASES[case]["space"]()
    if limit:
        space = space[:limit]
    top = template.recommend_hints(topk=1)
    top_cfg = None
    if top:
        full = top[0].to_dict()
        top_cfg = {k: full[k] for k in ("block_M", "block_N", "block_K", "num_stages", "threads") if k in full}
        if _key(top_cfg) not in {_key(c) for c in space}:
            space.append(top_cfg)
    predicted = {_key(c): template.estimate(c) for c in space}
    return space, predicted, top_cfg


# ----- compiling (worker processes) ----------------------------------------------------------------

# --pass-config KEY=VALUE ...: extra pass configs for every compile, workers included (through the
# environment: the spawned workers inherit it)
_EXTRA_CONFIGS_ENV = "TL_BENCH_CARVER_PASS_CONFIGS"


def _extra_configs() -> dict:
    import json

    return json.loads(os.environ.get(_EXTRA_CONFIGS_ENV) or "{}")


def _prim_func(case: str, cfg: dict):
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))
    if case == "gemm":
        import gemm

        M, N, K = GEMM_SHAPE
        func, kw = gemm.matmul.get_prim_func(M, N, K, trans_B=True, **cfg), {"out_idx": [-1]}
    else:
        import flash_attention as fa

        B, H, S, D = ATTN_SHAPE
        func = fa.flashattn.get_prim_func(B, H, S, D, CASES[case]["causal"], 1, "bhsd", **cfg)
        kw = {"out_idx": [3], "pass_configs": {"tl.enable_fast_math": True}}
    extra = _extra_configs()
    if extra:
        kw["pass_configs"] = {**kw.get("pass_configs", {}), **extra}
    return func, kw


def compile_config(case: str, cfg: dict, target: str):
    """Compile one config (in a worker): (ok, message)."""
    import tilelang

    t0 = time.perf_counter()
    try:
        func, kw = _prim_func(case, cfg)
        tilelang.compile(func, target=target, **kw)
    except Exception as err:  # noqa: BLE001 - an invalid config is skipped, with its reason
        first = str(err).strip().splitlines()
        return False, f"{type(err).__name__}: {first[0][:160] if first else ''}"
    return True, f"{time.perf_counter() - t0:.1f} s"


def compile_all(jobs_list, target: str, jobs: int, retry: bool = True) -> dict:
    """{(case, key): (ok, message)}, compiled in ``jobs`` spawned processes (configs whose worker
    died, which breaks the whole pool, are tried once more in a fresh one)."""
    import multiprocessing as mp

    results = {}
    if jobs <= 1:
        for case, cfg in jobs_list:
            results[(case, _key(cfg))] = compile_config(case, cfg, target)
        return results
    with ProcessPoolExecutor(max_workers=jobs, mp_context=mp.get_context("spawn")) as pool:
        futures = {pool.submit(compile_config, case, cfg, target): (case, cfg) for case, cfg in jobs_list}
        for fut in as_completed(futures):
            case, cfg = futures[fut]
            try:
                results[(case, _key(cfg))] = fut.result()
            except Exception as err:  # noqa: BLE001 - a worker died (e.g. out of memory)
                results[(case, _key(cfg))] = (False, f"worker failed: {type(err).__name__}: {err}")
            ok, msg = results[(case, _key(cfg))]
            print(f"  compiled {case} {cfg_text(cfg)}: {'ok' if ok else 'FAILED'} ({msg})", flush=True)
    again = [(c, cfg) for c, cfg in jobs_list if results[(c, _key(cfg))][1].startswith("worker failed")]
    if retry and again:
        print(f"  {len(again)} configs lost with a worker: compiling them again", flush=True)
        results.update(compile_all(again, target, min(jobs, len(again)), retry=False))
    return results


# ----- timing -------------------------------------------------------------------------------------

def measure(case: str, configs: list[dict], compiled: dict, target: str) -> dict:
    """{key: (ms or None, note)} on the GPU."""
    import torch
    import torch.nn.functional as F

    import tilelang

    out = {}
    if case == "gemm":
        M, N, K = GEMM_SHAPE
        a = torch.randn(M, K, device="cuda", dtype=torch.float16)
        b = torch.randn(N, K, device="cuda", dtype=torch.float16)
        ref = (a @ b.T).float()
        inputs = (a, b)
    else:
        B, H, S, D = ATTN_SHAPE
        q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.float16) for _ in range(3))
        ref = F.scaled_dot_product_attention(q, k, v, is_causal=CASES[case]["causal"]).float()
        inputs = (q, k, v)
    for cfg in configs:
        key = _key(cfg)
        ok, msg = compiled.get((case, key), (False, "not compiled"))
        if not ok:
            out[key] = (None, f"compile: {msg}")
            continue
        try:
            func, kw = _prim_func(case, cfg)
            kern = tilelang.compile(func, target=target, **kw)
            got = kern(*inputs).float()
            err = (got - ref).abs().max().item()
            tol = 0.05 * max(1.0, ref.abs().max().item()) if case == "gemm" else 2e-2
            if not err <= tol:
                out[key] = (None, f"wrong result (max |diff| {err:.3g})")
                continue
            ms = tilelang.do_bench(lambda: kern(*inputs), warmup=25, rep=100)
            out[key] = (ms, "")
        except Exception as err:  # noqa: BLE001 - a launch failure is reported, the sweep goes on
            out[key] = (None, f"{type(err).__name__}: {str(err).strip().splitlines()[0][:120] if str(err) else ''}")
        finally:
            torch.cuda.synchronize()
    return out


# ----- the report ---------------------------------------------------------------------------------

def table(case: str, configs, predicted, top_cfg, measured=None, notes=None) -> list[str]:
    ranked = sorted((p, i) for i, (k, p) in enumerate((_key(c), predicted[_key(c)]) for c in configs) if p is not None)
    rank = {i: r + 1 for r, (_, i) in enumerate(ranked)}
    lines = [f"### {CASES[case]['title']}", "",
             "| carver rank | config | predicted ms | measured ms | predicted / measured | note |",
             "|---:|---|---:|---:|---:|---|"]
    order = sorted(range(len(configs)), key=lambda i: (rank.get(i, 10 ** 6), i))
    within = total = top_within = top_total = 0
    for i in order:
        cfg = configs[i]
        key = _key(cfg)
        p = predicted[key]
        ms, note = (measured or {}).get(key, (None, (notes or {}).get(key, "")))
        ratio = ""
        if p is not None and ms is not None:
            ratio = f"{p * 1e3 / ms:.2f}"
            total += 1
            within += abs(p * 1e3 / ms - 1) <= 0.25
            if rank.get(i, 99) <= 5:
                top_total += 1
                top_within += abs(p * 1e3 / ms - 1) <= 0.25
        top = " (top recommendation)" if top_cfg is not None and key == _key(top_cfg) else ""
        lines.append(f"| {rank.get(i, '-')} | {cfg_text(cfg)}{top} | {'' if p is None else f'{p * 1e3:.3f}'} | "
                     f"{'' if ms is None else f'{ms:.3f}'} | {ratio} | {note} |")
    if measured is not None:
        times = [(ms, k) for k, (ms, _) in measured.items() if ms is not None]
        lines.append("")
        if times and top_cfg is not None:
            best_ms, best_key = min(times)
            top_ms = measured.get(_key(top_cfg), (None, ""))[0]
            best_cfg = dict(best_key)
            if top_ms is None:
                lines.append(f"top recommendation {cfg_text(top_cfg)}: not measured "
                             f"({measured.get(_key(top_cfg), (None, 'absent'))[1]}); best measured "
                             f"{cfg_text(best_cfg)} {best_ms:.3f} ms")
            else:
                lines.append(f"top recommendation {cfg_text(top_cfg)}: {top_ms:.3f} ms = "
                             f"**{100 * best_ms / top_ms:.1f} %** of the best measured ({cfg_text(best_cfg)}, "
                             f"{best_ms:.3f} ms); goal >= 95 %")
        lines.append(f"predictions within 25 % of measured: {within} of {total} (the carver's top 5: "
                     f"{top_within} of {top_total})")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", action="append", choices=sorted(CASES), help="a case (repeatable); default all")
    ap.add_argument("--dry-run", action="store_true", help="list configs and predictions; compile nothing")
    ap.add_argument("--compile-only", action="store_true", help="compile every config; time nothing")
    ap.add_argument("--jobs", type=int, default=min(16, os.cpu_count() or 1), help="parallel compile processes")
    ap.add_argument("--limit", type=int, help="at most this many configs of each case's space (testing)")
    ap.add_argument("--arch", help="target architecture (default: the GPU's, else sm_90a)")
    ap.add_argument("--out", help="also write the markdown tables to this file")
    ap.add_argument("--pass-config", action="append", default=[], metavar="KEY=VALUE",
                    help="an extra pass config for every compile (repeatable; VALUE is JSON, e.g. true or 4)")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(EXAMPLES))
    if args.pass_config:
        import json

        extra = {}
        for item in args.pass_config:
            key, _, value = item.partition("=")
            try:
                extra[key] = json.loads(value)
            except ValueError:
                extra[key] = value
        os.environ[_EXTRA_CONFIGS_ENV] = json.dumps(extra)
        print(f"extra pass configs: {extra}", flush=True)

    import torch

    from tilelang.carver.arch import CUDA

    gpu = torch.cuda.is_available()
    if not gpu and not (args.dry_run or args.compile_only):
        print("bench_carver: no CUDA device; use --dry-run or --compile-only without one")
        return 0
    # the GPU's own description (sizes queried, the product's bandwidth) unless --arch names another;
    # workers get the resolved arch, so that they neither touch the GPU nor key the cache differently
    arch = CUDA("cuda" if gpu and not args.arch else (args.arch or "sm_90a"))
    target = args.arch or arch.arch
    print(f"device model: {arch!r}, {arch.memory_bandwidth_GBps} GB/s, target {target}", flush=True)
    cases = args.only or list(CASES)
    plans = {c: plan(c, arch, args.limit) for c in cases}
    lines = []
    if args.dry_run:
        for c in cases:
            lines += table(c, *plans[c]) + [""]
        _emit(lines, args.out)
        return 0
    t0 = time.perf_counter()
    jobs_list = [(c, cfg) for c in cases for cfg in plans[c][0]]
    print(f"compiling {len(jobs_list)} configs in {args.jobs} processes", flush=True)
    compiled = compile_all(jobs_list, target, args.jobs)
    failed = sum(not ok for ok, _ in compiled.values())
    print(f"compiled in {time.perf_counter() - t0:.1f} s ({failed} failed)", flush=True)
    if args.compile_only:
        for c in cases:
            configs, predicted, top = plans[c]
            notes = {_key(cfg): "compiled" if compiled[(c, _key(cfg))][0] else f"compile: {compiled[(c, _key(cfg))][1]}"
                     for cfg in configs}
            lines += table(c, configs, predicted, top, notes=notes) + [""]
        _emit(lines, args.out)
        return 0 if failed < len(jobs_list) else 1
    for c in cases:
        configs, predicted, top = plans[c]
        t1 = time.perf_counter()
        measured = measure(c, configs, compiled, target)
        print(f"{c}: timed in {time.perf_counter() - t1:.1f} s", flush=True)
        lines += table(c, configs, predicted, top, measured) + [""]
    print(f"total {time.perf_counter() - t0:.1f} s", flush=True)
    _emit(lines, args.out)
    return 0


def _emit(lines, out) -> None:
    text = "\n".join(lines)
    print(text)
    if out:
        Path(out).write_text(text + "\n")


if __name__ == "__main__":
    sys.exit(main())
