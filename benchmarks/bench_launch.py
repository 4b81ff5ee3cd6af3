"""Per-call cost of small kernels: host path (argument checks, output allocation, launch) against
kernel time, for whichever ``tilelang`` is importable and for torch, in one run.

    python benchmarks/bench_launch.py [--json OUT] [--only row_f32,attn] [--calls 2000]
    PYTHONPATH=~/up-site python benchmarks/bench_launch.py --json up.json     # upstream's tilelang

Cases (each a zero-argument Python call, as a user makes it):
    empty     a kernel of one block that does nothing, given its one tensor (pure launch overhead);
              torch: ``t.zero_()`` on a 1-element tensor
    row_f32   Y = X.sum(1) for X float32[4096, 1024] (16 MiB), Y allocated per call (out_idx);
              torch: ``x.sum(1)``
    row_f16   the same in float16 (8 MiB)
    attn      attention forward B2 H4 S512 D64 float16, O allocated per call (out_idx);
              torch: ``F.scaled_dot_product_attention``

Columns (microseconds per call):
    host      CPU time of a call: wall clock over back-to-back calls, no synchronisation (the launch
              queue absorbs the GPU work, so this is the Python call up to the launch returning)
    kernel    GPU time of the kernels one call launches (torch.profiler / CUPTI)
    idle      one call on an idle GPU: CUDA event before the call to event after it, synchronised
              between calls; ``idle - kernel`` ~ the time from the Python call to the kernel start
    loop      back-to-back calls, events around the batch: max(host, kernel) in steady state
    do_bench  ``tilelang.profiler.do_bench`` of the call (256 MB L2 flush before each call; the
              flush gives the host a head start of ~50 us, so host overhead is mostly hidden there)

Run once with ours and once with upstream (``PYTHONPATH=~/up-site``); ``--compare A.json B.json``
prints the two side by side. ``--cpu-stub`` (ours only, no GPU needed) times our per-call host
path with the driver replaced by C functions that return at once: argument checks, output
allocation (on the CPU), packing and the foreign calls, everything but the driver's own work.
"""

# (no ``from __future__ import annotations``: upstream's T.prim_func evaluates the kernels'
# annotations, which must then be real objects)
import argparse
import json
import statistics
import sys
import time


def log(msg: str) -> None:
    print(msg, flush=True)


# ----------------------------------------------------------------------------- kernels
def build_kernels():
    """The tilelang kernels, in the language subset ours and upstream's both accept."""
    import tilelang
    import tilelang.language as T

    @tilelang.jit(out_idx=[1])
    def row_sum(M, N, dtype, block_M=4, threads=128):
        @T.prim_func
        def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M,), dtype)):
            with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
                tile = T.alloc_fragment((block_M, N), dtype)
                sums = T.alloc_fragment((block_M,), dtype)
                T.copy(X[bx * block_M, 0], tile)
                T.reduce_sum(tile, sums, dim=1)
                T.copy(sums, Y[bx * block_M])
        return main

    @tilelang.jit
    def empty():
        @T.prim_func
        def main(A: T.Tensor((1,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                T.evaluate(0)
        return main

    @tilelang.jit(out_idx=[3])
    def attention(B, H, S, D, block_M=64, block_N=64, threads=128):
        shape = [B, H, S, D]
        log2e_scale = (1.0 / D) ** 0.5 * 1.4426950408889634

        @T.prim_func
        def main(Q: T.Tensor(shape, "float16"), K: T.Tensor(shape, "float16"), V: T.Tensor(shape, "float16"),
                 O: T.Tensor(shape, "float16")):
            with T.Kernel(T.ceildiv(S, block_M), H, B, threads=threads) as (bx, by, bz):
                q = T.alloc_shared([block_M, D], "float16")
                k = T.alloc_shared([block_N, D], "float16")
                v = T.alloc_shared([block_N, D], "float16")
                scores = T.alloc_fragment([block_M, block_N], "float32")
                probs = T.alloc_fragment([block_M, block_N], "float16")
                acc = T.alloc_fragment([block_M, D], "float32")
                row_max = T.alloc_fragment([block_M], "float32")
                prev_max = T.alloc_fragment([block_M], "float32")
                rescale = T.alloc_fragment([block_M], "float32")
                row_sum_ = T.alloc_fragment([block_M], "float32")
                denom = T.alloc_fragment([block_M], "float32")
                T.copy(Q[bz, by, bx * block_M:(bx + 1) * block_M, :], q)
                T.fill(acc, 0)
                T.fill(denom, 0)
                T.fill(row_max, -T.infinity("float32"))
                for kb in T.Pipelined(T.ceildiv(S, block_N), num_stages=1):
                    T.copy(K[bz, by, kb * block_N:(kb + 1) * block_N, :], k)
                    T.clear(scores)
                    T.gemm(q, k, scores, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                    T.copy(row_max, prev_max)
                    T.reduce_max(scores, row_max, dim=1, clear=False)
                    for i in T.Parallel(block_M):
                        rescale[i] = T.exp2(prev_max[i] * log2e_scale - row_max[i] * log2e_scale)
                    for i, j in T.Parallel(block_M, block_N):
                        scores[i, j] = T.exp2(scores[i, j] * log2e_scale - row_max[i] * log2e_scale)
                    T.reduce_sum(scores, row_sum_, dim=1)
                    for i in T.Parallel(block_M):
                        denom[i] = denom[i] * rescale[i] + row_sum_[i]
                    for i, j in T.Parallel(block_M, D):
                        acc[i, j] *= rescale[i]
                    T.copy(scores, probs)
                    T.copy(V[bz, by, kb * block_N:(kb + 1) * block_N, :], v)
                    T.gemm(probs, v, acc, policy=T.GemmWarpPolicy.FullRow)
                for i, j in T.Parallel(block_M, D):
                    acc[i, j] /= denom[i]
                T.copy(acc, O[bz, by, bx * block_M:(bx + 1) * block_M, :])
        return main

    return row_sum, empty, attention


def make_cases(only):
    """name -> (tilelang call, torch call, check) with inputs made once."""
    import torch
    import torch.nn.functional as F

    row_sum, empty, attention = build_kernels()
    dev = "cuda"
    cases = {}
    if not only or "empty" in only:
        a = torch.zeros(1, device=dev)
        k = empty()
        cases["empty"] = (lambda k=k, a=a: k(a), lambda a=a: a.zero_(), None)   # k is rebound below
    for name, dt in (("row_f32", torch.float32), ("row_f16", torch.float16)):
        if only and name not in only:
            continue
        x = torch.randn(4096, 1024, device=dev, dtype=dt)
        k = row_sum(4096, 1024, "float32" if dt == torch.float32 else "float16")

        def check(k=k, x=x):
            got, want = k(x).float(), x.float().sum(1)
            return float((got - want).abs().max())
        cases[name] = (lambda k=k, x=x: k(x), lambda x=x: x.sum(1), check)
    if not only or "attn" in only:
        q, kk, v = (torch.randn(2, 4, 512, 64, device=dev, dtype=torch.float16) for _ in range(3))
        k = attention(2, 4, 512, 64)

        def check(k=k):
            got, want = k(q, kk, v).float(), F.scaled_dot_product_attention(q, kk, v).float()
            return float((got - want).abs().max())
        cases["attn"] = (lambda: k(q, kk, v), lambda: F.scaled_dot_product_attention(q, kk, v), check)
    return cases


# ----------------------------------------------------------------------------- timing
def host_us(fn, calls: int, batches: int = 7) -> float:
    """Median over batches of the CPU time per call, without synchronising inside a batch."""
    import torch

    per = []
    for _ in range(batches):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        per.append((time.perf_counter() - t0) / calls * 1e6)
    torch.cuda.synchronize()
    return statistics.median(per)


def kernel_us(fn, calls: int) -> float:
    """Mean GPU time per call of the kernels ``fn`` launches (torch.profiler)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    total = 0.0   # microseconds, as torch.profiler reports them
    for e in prof.events():
        if getattr(getattr(e, "device_type", None), "name", "") == "CUDA" and not getattr(e, "is_user_annotation", False):
            total += float(getattr(e, "self_device_time_total", None) or getattr(e, "self_cuda_time_total", 0.0) or 0.0)
    return total / calls


def idle_us(fn, calls: int) -> float:
    """Median event-to-event time of one call on an idle GPU."""
    import torch

    times = []
    for _ in range(calls):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) * 1e3)
    return statistics.median(times)


def loop_us(fn, calls: int) -> float:
    import torch

    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    s.record()
    for _ in range(calls):
        fn()
    e.record()
    e.synchronize()
    return s.elapsed_time(e) * 1e3 / calls


def bench_us(fn) -> float:
    try:
        from tilelang.profiler import do_bench
    except ImportError:
        from triton.testing import do_bench
    return float(do_bench(fn, warmup=25, rep=100)) * 1e3


def measure(fn, calls: int) -> dict:
    for _ in range(50):
        fn()
    return {"host": host_us(fn, calls), "kernel": kernel_us(fn, min(calls, 200)), "idle": idle_us(fn, 200),
            "loop": loop_us(fn, calls), "do_bench": bench_us(fn)}


# ----------------------------------------------------------------------------- report
COLS = ("host", "kernel", "idle", "idle-kernel", "loop", "do_bench")


def table(rows: dict, label: str) -> str:
    lines = [f"| case | impl ({label}) | " + " | ".join(COLS) + " |", "|---|---|" + "---|" * len(COLS)]
    for case, impls in rows.items():
        for impl, r in impls.items():
            if "error" in r:
                lines.append(f"| {case} | {impl} | FAILED: {r['error']} |")
                continue
            vals = dict(r, **{"idle-kernel": r["idle"] - r["kernel"]})
            lines.append(f"| {case} | {impl} | " + " | ".join(f"{vals[c]:.2f}" for c in COLS) + " |")
    return "\n".join(lines)


def identity() -> dict:
    import torch

    import tilelang
    try:   # ours: whether the argument plan launches inline (see --no-inline-launch)
        from tilelang.jit import driver
        inline = getattr(driver, "INLINE_LAUNCH", None)
    except ImportError:
        inline = None
    return {"tilelang": getattr(tilelang, "__file__", "?"), "tilelang_version": getattr(tilelang, "__version__", "?"),
            "torch": torch.__version__, "device": torch.cuda.get_device_name(0), "python": sys.version.split()[0],
            "inline_launch": inline}


def compare(a_path: str, b_path: str) -> int:
    a, b = json.load(open(a_path)), json.load(open(b_path))
    log(f"A: {a['identity']['tilelang']}\nB: {b['identity']['tilelang']}")
    log("| case | column | A tilelang | B tilelang | A torch | B torch |")
    log("|---|---|---|---|---|---|")
    for case in a["rows"]:
        if case not in b["rows"]:
            continue
        for c in COLS:
            cells = []
            for run in (a, b):
                r = run["rows"][case].get("tilelang", {})
                cells.append("-" if "error" in r or not r else
                             f"{(r['idle'] - r['kernel']) if c == 'idle-kernel' else r[c]:.2f}")
            for run in (a, b):
                r = run["rows"][case].get("torch", {})
                cells.append("-" if "error" in r or not r else
                             f"{(r['idle'] - r['kernel']) if c == 'idle-kernel' else r[c]:.2f}")
            log(f"| {case} | {c} | " + " | ".join(cells) + " |")
    return 0


def cpu_stub(only, calls: int) -> int:
    """Our host path per call on CPU tensors, the CUDA driver stubbed (see the module docstring)."""
    import ctypes
    import timeit

    import torch

    import tilelang
    from tilelang.jit import driver
    from tilelang.jit.adapter_args import ArgPlan

    libc = ctypes.CDLL(None)

    class StubDriver:   # getauxval(unknown) returns 0 at once; called the way libcuda is
        fast_launch = fast_get_current = fast_launch_ex = libc.getauxval

    row_sum, empty, attention = build_kernels()
    specs = {"empty": (empty, (), None, [torch.zeros(1)]),
             "row_f32": (row_sum, (4096, 1024, "float32"), [1], [torch.randn(4096, 1024)]),
             "row_f16": (row_sum, (4096, 1024, "float16"), [1], [torch.randn(4096, 1024).half()]),
             "attn": (attention, (2, 4, 512, 64), [3], [torch.randn(2, 4, 512, 64).half() for _ in range(3)])}
    driver._driver = StubDriver()
    log("| case | host path, us per call (CPU tensors, driver stubbed) |\n|---|---|")
    for name, (factory, fargs, out_idx, inputs) in specs.items():
        if only and name not in only:
            continue
        art = tilelang.compile(factory.get_tir(*fargs), out_idx=out_idx, target="cuda -arch=sm_90a").artifact
        plan = ArgPlan(art, stream=lambda d: 0, device_type="cpu", encode_tensormap=lambda *a: bytes(128))
        launcher = driver.KernelLauncher(b"", art.name, plan.arg_kinds, art.block, art.dynamic_smem, art.arch)
        launcher._funcs[-1] = (ctypes.c_void_p(0), None)    # "loaded" on the CPU test device
        plan.set_launch(launcher)
        for _ in range(3):
            plan.entry(*inputs)
        n = max(1, calls // 10)
        best = min(timeit.repeat(lambda: plan.entry(*inputs), number=n, repeat=100)) / n * 1e6
        log(f"| {name} | {best:.2f} |")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--json", metavar="OUT", help="write the results as JSON")
    p.add_argument("--only", help="comma-separated cases (empty,row_f32,row_f16,attn)")
    p.add_argument("--calls", type=int, default=2000, help="calls per host/loop batch (default 2000)")
    p.add_argument("--compare", nargs=2, metavar=("A", "B"), help="print two --json results side by side")
    p.add_argument("--cpu-stub", action="store_true", help="ours only, no GPU: the host path with the driver stubbed")
    p.add_argument("--no-inline-launch", action="store_true",
                   help="ours only: launch through KernelLauncher.__call__ (driver.INLINE_LAUNCH = False)")
    args = p.parse_args(argv)
    if args.no_inline_launch:
        from tilelang.jit import driver
        driver.INLINE_LAUNCH = False
    if args.compare:
        return compare(*args.compare)
    if args.cpu_stub:
        return cpu_stub(set(args.only.split(",")) if args.only else None, args.calls)
    import torch

    if not torch.cuda.is_available():
        log("bench_launch: no CUDA device (torch.cuda.is_available() is False)")
        return 2
    ident = identity()
    log(f"tilelang: {ident['tilelang']} ({ident['tilelang_version']}), torch {ident['torch']}, {ident['device']}")
    only = set(args.only.split(",")) if args.only else None
    cases = make_cases(only)
    rows: dict = {}
    for name, (ours, ref, check) in cases.items():
        rows[name] = {}
        if check is not None:
            try:
                log(f"{name}: max |tilelang - torch| = {check():.4g}")
            except Exception as e:  # noqa: BLE001 - reported, the timing still runs
                log(f"{name}: check failed: {type(e).__name__}: {e}")
        for impl, fn in (("tilelang", ours), ("torch", ref)):
            try:
                rows[name][impl] = measure(fn, args.calls)
            except Exception as e:  # noqa: BLE001 - one failing case must not end the run
                rows[name][impl] = {"error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"}
            log(f"  {name} {impl}: " + ", ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}"
                                                  for k, v in rows[name][impl].items()))
    log("")
    log(table(rows, "us per call"))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"identity": ident, "rows": rows}, f, indent=1)
        log(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
