"""Hand variants of bench_launch's small attention (ours), timed side by side (experiment).

Each variant is the CUDA our compiler emits (with ``tl.disable_single_wave_setmaxnreg``: the
launch bound and registers as before session 50) with one edit; all are built with nvcc, checked
against SDPA and timed alternately (CUPTI kernel us and do_bench us), ROUNDS rounds.
    python3 scripts/lease/attn_variants.py [--rounds 3] [--dump DIR]
"""
import argparse
import dataclasses
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT)]

PREFETCH = ("      tl::prefetch_tma_descriptor(TL_TMAP(0));\n      tl::prefetch_tma_descriptor(TL_TMAP(1));\n"
            "      tl::prefetch_tma_descriptor(TL_TMAP(2));\n")
QLOAD = ("      tl::mbarrier_arrive_expect_tx((&(((uint64_t*)smem)[3076])), 8192);\n"
         "      tl::tma_load_4d((&(((half*)smem)[0])), TL_TMAP(2), (&(((uint64_t*)smem)[3076])), 0, "
         "(((int)blockIdx.x) * 64), ((int)blockIdx.y), ((int)blockIdx.z));\n")
INIT_END = "    tl::fence_barrier_init();\n  }\n  __syncthreads();\n"
HEAD = "  extern __shared__ __align__(64) uchar smem[];\n"
PROD = "  if (128 <= ((int)threadIdx.x)) {\n"
CONS = "  } else {\n"


def must(src, old, new, count=1):
    assert src.count(old) == count, (old, src.count(old))
    return src.replace(old, new)


def variants(src):
    v = {"base": src}
    lb1 = must(src, "__launch_bounds__(256)", "__launch_bounds__(256, 1)", 2)
    v["lb1"] = lb1
    v["maxnreg"] = must(must(lb1, PROD, PROD + "    tl::setmaxnreg_dec<24>();\n"),
                        CONS, CONS + "    tl::setmaxnreg_inc<240>();\n")
    early = must(src, PREFETCH, "")
    v["prefetch0"] = must(early, HEAD, HEAD + "  if (((int)threadIdx.x) == 0) {\n" + PREFETCH + "  }\n")
    q = must(early, QLOAD, "")
    v["qearly"] = must(q, INIT_END, "    tl::fence_barrier_init();\n" + PREFETCH.replace("      ", "    ")
                       + QLOAD.replace("      ", "    ") + "  }\n  __syncthreads();\n")
    v["qearly_maxnreg"] = must(must(must(v["qearly"], "__launch_bounds__(256)", "__launch_bounds__(256, 1)", 2),
                                    PROD, PROD + "    tl::setmaxnreg_dec<24>();\n"),
                               CONS, CONS + "    tl::setmaxnreg_inc<240>();\n")
    v["carve0"] = v["carve100"] = src
    return v


CARVE = {"carve0": 0, "carve100": 100}   # CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT (%)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--dump", default="")
    p.add_argument("--only", default="")
    a = p.parse_args()
    import bench_launch as bl
    import tilelang
    from tilelang.jit.kernel import JITKernel
    _row, _empty, attention = bl.build_kernels()
    # (the edits start from the CUDA as emitted before warp_specialize.plan_single_wave)
    k0 = tilelang.compile(attention.get_prim_func(2, 4, 512, 64), out_idx=[3],
                          pass_configs={"tl.disable_single_wave_setmaxnreg": True})
    srcs = variants(k0.get_kernel_source())
    if a.only:
        srcs = {n: s for n, s in srcs.items() if n in a.only.split(",")}
    if a.dump:
        Path(a.dump).mkdir(parents=True, exist_ok=True)
        for n, s in srcs.items():
            (Path(a.dump) / f"attn_{n}.cu").write_text(s)
    kernels = {}
    for n, s in srcs.items():
        art = dataclasses.replace(k0.artifact, source=s, cubin=None)
        kernels[n] = JITKernel(art, include_dirs=k0.include_dirs)
    import torch
    import torch.nn.functional as F
    print(torch.cuda.get_device_name(), flush=True)
    q, kk, v = (torch.randn(2, 4, 512, 64, device="cuda", dtype=torch.float16) for _ in range(3))
    ref = F.scaled_dot_product_attention(q, kk, v).float()
    for n, k in kernels.items():
        err = float((k(q, kk, v).float() - ref).abs().max())
        if n in CARVE:
            from tilelang.jit.driver import get_driver
            for func, _ctx in k._launcher._funcs.values():
                get_driver().check(get_driver().cuFuncSetAttribute(func.value, 9, CARVE[n]), "carveout")
        print(f"{n:10s} maxdiff {err:.2e}", flush=True)
    time_alternating(kernels, (q, kk, v), a.rounds)


def time_alternating(kernels: dict, args: tuple, rounds: int) -> None:
    """Time each kernel of ``kernels`` (name -> callable) on ``args``: CUPTI kernel us and do_bench
    us, the sides alternating (even rounds backwards), ``rounds`` rounds; one line a side."""
    import triton.testing

    import bench_launch as bl
    res = {n: {"kernel": [], "bench": []} for n in kernels}
    names = list(kernels)
    for r in range(rounds):
        for n in (names if r % 2 == 0 else names[::-1]):
            fn = (lambda k=kernels[n]: k(*args))
            for _ in range(20):
                fn()
            res[n]["kernel"].append(bl.kernel_us(fn, 200))
            res[n]["bench"].append(triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median") * 1e3)
    for n in names:
        ks, bs = res[n]["kernel"], res[n]["bench"]
        print(f"{n:10s} kernel {' / '.join(f'{x:.2f}' for x in ks)} (median {statistics.median(ks):.2f})  "
              f"do_bench {' / '.join(f'{x:.2f}' for x in bs)} (median {statistics.median(bs):.2f})", flush=True)

if __name__ == "__main__":
    main()
