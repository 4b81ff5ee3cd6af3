"""Does the shared-memory carve-out the driver picks change a kernel's time? (experiment)

Loads bench_launch's small cases and bench_upstream's table cases with ours, then times each with
CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT set on every loaded function to each value of
--values (-1: the driver's default), in alternating order over --rounds. Prints one line per
(case, value): do_bench us (triton, median) and, for bench_launch cases, CUPTI kernel us.

    python3 scripts/lease/carveout.py [--launch attn,row_f32] [--cases topk_router,...]
"""
import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT)]

CARVEOUT = 9   # CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT
FUNCS = []


def hook():
    from tilelang.jit import driver

    orig = driver.KernelLauncher.load

    def load(self, device):
        entry = orig(self, device)
        if all(f.value != entry[0].value for f in FUNCS):
            FUNCS.append(entry[0])
        return entry
    driver.KernelLauncher.load = load


def set_carveout(value: int) -> None:
    from tilelang.jit.driver import get_driver
    drv = get_driver()
    for f in FUNCS:
        drv.check(drv.cuFuncSetAttribute(f.value, CARVEOUT, value), f"carveout {value}")


def sweep(name, fn, values, rounds, with_kernel):
    import torch
    import triton.testing
    import bench_launch as bl
    res = {v: {"bench": [], "kernel": []} for v in values}
    for r in range(rounds):
        for v in (values if r % 2 == 0 else values[::-1]):
            set_carveout(v)
            fn()
            torch.cuda.synchronize()
            res[v]["bench"].append(triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median") * 1e3)
            if with_kernel:
                res[v]["kernel"].append(bl.kernel_us(fn, 200))
    set_carveout(-1)
    for v in values:
        b = " / ".join(f"{x:.2f}" for x in res[v]["bench"])
        k = " / ".join(f"{x:.2f}" for x in res[v]["kernel"])
        med = statistics.median(res[v]["bench"])
        print(f"{name:30s} carveout {v:4d}: do_bench {b} (median {med:.2f})" + (f"  kernel {k}" if k else ""),
              flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--launch", default="attn,row_f32")
    p.add_argument("--cases", default="topk_router,gemv_splitk_vectorized,gemv_splitk_vectorized_tvm,"
                   "rms_norm_splitk,rms_norm,elementwise_add,gdn_cumsum,mhc_post")
    p.add_argument("--values", default="-1,0,100")
    p.add_argument("--rounds", type=int, default=3)
    a = p.parse_args()
    values = [int(v) for v in a.values.split(",")]
    hook()
    import torch
    print(torch.cuda.get_device_name(), flush=True)
    if a.launch:
        import bench_launch as bl
        for name, (fn, _ref, _check) in bl.make_cases(a.launch.split(",")).items():
            FUNCS.clear()
            fn()
            sweep(f"launch:{name}", fn, values, a.rounds, True)
    if a.cases:
        import bench_upstream as bu
        from _upstream_cases import load
        ex = bu.examples_dir(None)

        class Sweep(bu.Helper):
            first = True

            def time(self, fn):
                if self.first:
                    self.first = False
                    sweep(self.case, fn, values, a.rounds, False)
                return super().time(fn)

        for c in bu.select(a.cases):
            if c.name not in a.cases.split(","):
                continue
            FUNCS.clear()
            try:
                m = load(ex, c.folder, c.module)
                k = c.build(m)
                h = Sweep(10, 50)
                h.case = c.name
                rec = c.run(m, k, h)
                print(f"{c.name:30s} ok={rec.get('ok')}", flush=True)
            except Exception as e:  # noqa: BLE001
                print(f"{c.name:30s} error: {bu.one_line(e)}", flush=True)


if __name__ == "__main__":
    main()
