#!/usr/bin/env python3
"""Speed of the compiler core on one GPU: ours against torch in the same run.  Prints progress,
then a markdown table; with --out also writes the table there (rewritten after every row, so an
interrupted run keeps what it measured).

    GEMM fp16 and bf16 4096^3, 8192^3        vs torch.matmul (cuBLAS)     goal >= 0.5x
    GEMM fp16 skinny: M=16/64/128 x N=K=8192, M=N=8192 x K=512   vs torch.matmul
    softmax, RMSNorm (fp16), vector_add      vs a device-to-device copy   goal >= 0.7x of its bandwidth
    flash attention fwd, causal and not      vs SDPA (benchmarks/bench_attention.py; --no-attention skips)

GEMM tile configs are chosen per shape by ``@tilelang.autotune`` over ``GEMM_CONFIGS`` (its
results are cached on disk, so a second run re-times only the winners); the other kernels sweep
their short config lists. Every row checks our result against torch before timing it; a row that fails (compile error,
wrong result, CUDA error) is printed as FAILED with a one-line reason and the run goes on.
Ratios are speed ratios, ours relative to the reference (reference time / our time; higher is
better).  The HGMMA / UTMALDG / HMMA / LDSM columns count those instructions in the SASS of our
(best) kernel, from `cuobjdump -sass` when cuobjdump is installed, else "n/a".

    python3 benchmarks/bench_core.py [--out FILE] [--quick] [--no-attention] [--compile-only]
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "examples"))
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import _common  # noqa: E402
from _common import (Row, compile_only_row, failure_note, log, paired, render,  # noqa: E402
                     run_row, sass_of, sweep)

DEVICE = "cuda"

# Tile configurations: one list per kernel, every entry tried, the fastest that passes reported.
# (To become @tilelang.autotune search spaces.)
GEMM_CONFIGS = [
    # @tilelang.autotune picks among these per shape (sm_90a: warp-specialised TMA + wgmma).
    # 128x256 over two consumer warpgroups was the best square-GEMM tile of the session-2 sweep
    # (benchmarks/RESULTS.md); the 64-row tiles are for skinny M (one wgmma row block, more blocks).
    {"block_M": 128, "block_N": 256, "block_K": 64, "num_stages": 4, "threads": 256},
    {"block_M": 128, "block_N": 256, "block_K": 64, "num_stages": 3, "threads": 256},
    {"block_M": 256, "block_N": 128, "block_K": 64, "num_stages": 4, "threads": 256},
    {"block_M": 128, "block_N": 128, "block_K": 64, "num_stages": 3, "threads": 128},
    {"block_M": 64, "block_N": 128, "block_K": 64, "num_stages": 4, "threads": 128},
    {"block_M": 64, "block_N": 256, "block_K": 64, "num_stages": 4, "threads": 128},
    # M <= 64: a memory-bound stream of B; 64x64 tiles put twice the blocks on the SMs
    {"block_M": 64, "block_N": 64, "block_K": 64, "num_stages": 6, "threads": 128},
    # ... and deeper K stages keep more of B in flight per block (~100-190 KiB)
    {"block_M": 64, "block_N": 64, "block_K": 128, "num_stages": 6, "threads": 128},
    {"block_M": 64, "block_N": 128, "block_K": 128, "num_stages": 4, "threads": 128},
    {"block_M": 64, "block_N": 128, "block_K": 64, "num_stages": 8, "threads": 128},
]
SOFTMAX_CONFIGS = [{"threads": 256}, {"threads": 512}]
RMSNORM_CONFIGS = [{"threads": 256}, {"threads": 512}]
VECTOR_ADD_CONFIGS = [{"BLOCK_SIZE": 1024}, {"BLOCK_SIZE": 256}]
VECTOR_ADD_TILED_CONFIGS = [{"block": 4096, "threads": 256}, {"block": 8192, "threads": 512}]

SQUARE_SIZES = [4096, 8192]
SKINNY_SHAPES = [(16, 8192, 8192), (64, 8192, 8192), (128, 8192, 8192), (8192, 8192, 512)]
BANDWIDTH_SHAPE = (16384, 8192)   # softmax / RMSNorm rows x columns
VECTOR_N = 1 << 27                # vector_add elements

# assert_close tolerances against torch in the same dtype (both accumulate in fp32; the outputs
# may differ by an ulp of the output type)
GEMM_TOL = {"float16": {"rtol": 1e-2, "atol": 1e-1}, "bfloat16": {"rtol": 2e-2, "atol": 1e-1}}


def bench(fn) -> float:
    import tilelang

    return tilelang.do_bench(fn, warmup=25, rep=100)


def _tflops(flops, ms):
    v = flops / ms / 1e9
    return f"{v:.0f} TFLOP/s" if v >= 100 else f"{v:.1f} TFLOP/s"


def _gbs(nbytes, ms):
    return f"{nbytes / ms / 1e6:.0f} GB/s"


# --------------------------------------------------------------------------------------- GEMM
SHORT_DTYPE = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32"}


def gemm_name(M, N, K, dtype) -> str:
    return f"GEMM {SHORT_DTYPE.get(dtype, dtype)} " + (f"{M}^3" if M == N == K else f"M={M} N={N} K={K}")


def gemm_row(M, N, K, dtype="float16", configs=None, compile_only=False) -> Row:
    import torch

    import gemm

    configs = GEMM_CONFIGS if configs is None else configs
    name = gemm_name(M, N, K, dtype)

    def build(cfg):
        return gemm.matmul(M, N, K, dtype=dtype, **cfg)

    if compile_only:
        return compile_only_row(name, configs, build)
    tdtype = getattr(torch, dtype)
    a = torch.randn(M, K, device=DEVICE, dtype=tdtype)
    b = torch.randn(K, N, device=DEVICE, dtype=tdtype)
    ref = a @ b

    import tilelang

    # The tile config is chosen by @tilelang.autotune (parallel compiles, a check against torch,
    # results cached on disk); the chosen kernel is then checked and timed here like torch.
    tuned = tilelang.autotune(configs=configs, warmup=25, rep=100, ref_prog=lambda A, B: A @ B,
                              rtol=GEMM_TOL[dtype]["rtol"], atol=GEMM_TOL[dtype]["atol"])(gemm.matmul)
    result = tuned.tune(M, N, K, dtype=dtype)
    kernel, cfg = result.kernel, result.config
    torch.testing.assert_close(kernel(a, b), ref, **GEMM_TOL[dtype])
    t, t_ref = paired(lambda: kernel(a, b), lambda: a @ b, bench)
    failures = [(c.config, c.error) for c in result.results if c.error]
    flops = 2.0 * M * N * K
    return Row(name, ours=_tflops(flops, t), reference=_tflops(flops, t_ref) + " (torch.matmul)",
               ratio=t_ref / t, sass=sass_of(kernel),
               notes=f"autotuned: tiles {cfg['block_M']}x{cfg['block_N']}x{cfg['block_K']}, {cfg['threads']} threads, "
                     f"{cfg['num_stages']} stages"
                     + failure_note(failures, len(configs)),
               extra={"ms": t, "ref_ms": t_ref, "config": cfg})


def gemm_rows(sizes=None, dtypes=("float16", "bfloat16"), skinny=None, compile_only=False) -> list[Row]:
    sizes = SQUARE_SIZES if sizes is None else sizes
    skinny = SKINNY_SHAPES if skinny is None else skinny
    rows = []
    for n in sizes:
        for dtype in dtypes:
            rows.append(run_row(gemm_name(n, n, n, dtype), gemm_row, n, n, n, dtype, compile_only=compile_only))
    for M, N, K in skinny:
        rows.append(run_row(gemm_name(M, N, K, "float16"), gemm_row, M, N, K, "float16",
                            compile_only=compile_only))
    return rows


# ----------------------------------------------------------------------------- memory-bound
_copy_cache: dict[int, float] = {}


def copy_ms(total_bytes: int) -> float:
    """Milliseconds of a device-to-device copy whose read + write traffic is ``total_bytes``."""
    import torch

    if total_bytes not in _copy_cache:
        src = torch.empty(total_bytes // 2, dtype=torch.uint8, device=DEVICE)
        dst = torch.empty_like(src)
        _copy_cache[total_bytes] = bench(lambda: dst.copy_(src))
        del src, dst
    return _copy_cache[total_bytes]


def _bandwidth_row(name, nbytes, t, t_copy, kernel, cfg, failures, n_configs, ref_label, t_ref, note):
    ref = f"{_gbs(nbytes, t_copy)} (device copy)"
    if t_ref is not None:
        ref += f"; {ref_label} {_gbs(nbytes, t_ref)}"
    return Row(name, ours=_gbs(nbytes, t), reference=ref, ratio=t_copy / t, sass=sass_of(kernel),
               notes=f"{note}; {cfg}" + failure_note(failures, n_configs),
               extra={"ms": t, "copy_ms": t_copy, "ref_ms": t_ref, "config": cfg})


def softmax_row(M=None, N=None, configs=None, compile_only=False) -> Row:
    import torch

    import softmax

    M, N = BANDWIDTH_SHAPE if M is None else (M, N)
    configs = SOFTMAX_CONFIGS if configs is None else configs
    name = f"softmax fp16 {M}x{N}"

    def build(cfg):
        return softmax.softmax(M, N, **cfg)

    if compile_only:
        return compile_only_row(name, configs, build)
    x = torch.randn(M, N, device=DEVICE, dtype=torch.float16)
    ref = torch.softmax(x.float(), -1).half()

    def check(kernel):
        torch.testing.assert_close(kernel(x), ref, rtol=1e-2, atol=1e-3)

    t, cfg, kernel, failures = sweep(name, configs, build, check, lambda k: bench(lambda: k(x)))
    nbytes = 2 * x.numel() * 2  # read X once, write Y once
    t_ref = bench(lambda: torch.softmax(x, -1))
    return _bandwidth_row(name, nbytes, t, copy_ms(nbytes), kernel, cfg, failures, len(configs),
                          "torch.softmax", t_ref, "row in registers, one read of X")


def rmsnorm_row(M=None, N=None, configs=None, compile_only=False) -> Row:
    import torch

    import rmsnorm

    M, N = BANDWIDTH_SHAPE if M is None else (M, N)
    configs = RMSNORM_CONFIGS if configs is None else configs
    name = f"RMSNorm fp16 {M}x{N}"

    def build(cfg):
        return rmsnorm.rmsnorm(M, N, **cfg)

    if compile_only:
        return compile_only_row(name, configs, build)
    x = torch.randn(M, N, device=DEVICE, dtype=torch.float16)
    w = torch.randn(N, device=DEVICE, dtype=torch.float16)
    ref = rmsnorm.ref_program(x, w)

    def check(kernel):
        torch.testing.assert_close(kernel(x, w), ref, rtol=1e-2, atol=1e-2)

    t, cfg, kernel, failures = sweep(name, configs, build, check, lambda k: bench(lambda: k(x, w)))
    nbytes = 2 * x.numel() * 2  # read X once, write Y once (W is negligible)
    t_ref = bench(lambda: rmsnorm.ref_program(x, w))
    return _bandwidth_row(name, nbytes, t, copy_ms(nbytes), kernel, cfg, failures, len(configs),
                          "torch eager", t_ref, "row block in registers")


def vector_add_row(n=None, tiled=False, configs=None, compile_only=False) -> Row:
    import torch

    import vector_add

    n = VECTOR_N if n is None else n
    if tiled:
        factory, dtype = vector_add.vector_add_tiled, torch.float16
        configs = VECTOR_ADD_TILED_CONFIGS if configs is None else configs
        name, note = f"vector_add_tiled fp16 n={n}", "fragments + T.Parallel"
    else:
        factory, dtype = vector_add.vector_add, torch.float32
        configs = VECTOR_ADD_CONFIGS if configs is None else configs
        name, note = f"vector_add fp32 n={n}", "one element per thread"

    def build(cfg):
        return factory(n, **cfg)

    if compile_only:
        return compile_only_row(name, configs, build)
    a = torch.randn(n, device=DEVICE, dtype=dtype)
    b = torch.randn(n, device=DEVICE, dtype=dtype)
    ref = a + b

    def check(kernel):
        torch.testing.assert_close(kernel(a, b), ref)

    t, cfg, kernel, failures = sweep(name, configs, build, check, lambda k: bench(lambda: k(a, b)))
    nbytes = 3 * n * a.element_size()  # read A and B, write C
    t_ref = bench(lambda: a + b)
    return _bandwidth_row(name, nbytes, t, copy_ms(nbytes), kernel, cfg, failures, len(configs),
                          "torch a + b", t_ref, note)


def bandwidth_rows(compile_only=False) -> list[Row]:
    M, N = BANDWIDTH_SHAPE
    return [run_row(f"softmax fp16 {M}x{N}", softmax_row, compile_only=compile_only),
            run_row(f"RMSNorm fp16 {M}x{N}", rmsnorm_row, compile_only=compile_only),
            run_row(f"vector_add fp32 n={VECTOR_N}", vector_add_row, tiled=False, compile_only=compile_only),
            run_row(f"vector_add_tiled fp16 n={VECTOR_N}", vector_add_row, tiled=True,
                    compile_only=compile_only)]


# ------------------------------------------------------------------------------------- main
def _attention_rows(compile_only=False) -> list[Row]:
    try:
        import bench_attention
    except Exception as e:  # noqa: BLE001 - still print the other rows
        return [run_row("flash_attn fwd (bench_attention.py)", _raise, RuntimeError(f"import: {_common.one_line(e)}"))]
    return bench_attention.attention_rows(compile_only=compile_only)


def _raise(err):
    raise err


def _header(compile_only: bool) -> list[str]:
    import torch

    lines = []
    if torch.cuda.is_available():
        lines.append(f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    else:
        lines.append(f"no GPU: --compile-only (no timings, no checks), torch {torch.__version__}")
    try:
        from tilelang.jit.nvcc import nvcc_version

        lines[-1] += f", nvcc {nvcc_version()}"
    except Exception:  # noqa: BLE001
        pass
    from _sass import find_cuobjdump

    lines[-1] += "" if find_cuobjdump() else " (no cuobjdump: SASS columns n/a)"
    return lines + [""]


def main():
    parser = argparse.ArgumentParser(description="Ours against torch on one GPU, same run; "
                                                 "markdown table on stdout (and --out).")
    parser.add_argument("--out", help="also write the markdown table to this file")
    parser.add_argument("--quick", action="store_true", help="square GEMMs at 4096 only")
    parser.add_argument("--attention", action=argparse.BooleanOptionalAction, default=True,
                        help="flash attention rows from bench_attention.py (default: on)")
    parser.add_argument("--compile-only", action="store_true",
                        help="no GPU needed: compile every config of every row, report SASS counts only")
    args = parser.parse_args()
    import torch

    if not args.compile_only and not torch.cuda.is_available():
        print("no CUDA device: the benchmarks need a GPU (--compile-only works without one)")
        return 0
    t0 = time.time()
    header = _header(args.compile_only)
    rows: list[Row] = []

    def on_row(row: Row) -> None:  # every finished row, FAILED ones included
        rows.append(row)
        if args.out:
            Path(args.out).write_text(render(rows, header) + "\n")

    _common.ROW_LISTENERS.append(on_row)
    co = args.compile_only
    sections = [("GEMM", lambda: gemm_rows([4096] if args.quick else SQUARE_SIZES, compile_only=co)),
                ("memory-bound", lambda: bandwidth_rows(compile_only=co))]
    if args.attention:
        sections.append(("attention", lambda: _attention_rows(compile_only=co)))
    for label, section in sections:
        try:
            section()  # its rows arrive through on_row
        except Exception as e:  # noqa: BLE001 - a bug here must not cost the other sections
            traceback.print_exc()
            on_row(Row(f"({label} section)", failed=True, notes=_common.one_line(e)))
    text = render(rows, header)
    print()
    print(text)
    failed = [r.kernel for r in rows if r.failed]
    log(f"\n{len(rows)} rows in {time.time() - t0:.0f} s; "
        + (f"{len(failed)} FAILED: {', '.join(failed)}" if failed else "none failed"))
    if args.out:
        log(f"table written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
