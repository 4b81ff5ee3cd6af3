"""bench_launch's small attention with and without ``tl.disable_single_wave_setmaxnreg``: result
against SDPA, CUPTI kernel us and do_bench us, sides alternating for ROUNDS rounds.

    python3 scripts/lease/single_wave.py [ROUNDS]
"""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT), str(Path(__file__).resolve().parent)]


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    import torch
    import torch.nn.functional as F

    import bench_launch as bl
    import tilelang
    from attn_variants import time_alternating

    _row, _empty, attention = bl.build_kernels()
    prim = attention.get_prim_func(2, 4, 512, 64)
    sides = {}
    for name, cfg in (("setmaxnreg", {}), ("key off", {"tl.disable_single_wave_setmaxnreg": True})):
        sides[name] = tilelang.compile(prim, out_idx=[3], pass_configs=cfg)
        src = sides[name].get_kernel_source()
        print(f"{name:10s} setmaxnreg in CUDA: {'setmaxnreg' in src}", flush=True)
    print(torch.cuda.get_device_name(), flush=True)
    q, k, v = (torch.randn(2, 4, 512, 64, device="cuda", dtype=torch.float16) for _ in range(3))
    ref = F.scaled_dot_product_attention(q, k, v).float()
    for n, ker in sides.items():
        print(f"{n:10s} maxdiff vs SDPA {float((ker(q, k, v).float() - ref).abs().max()):.2e}", flush=True)
    time_alternating(sides, (q, k, v), rounds)


if __name__ == "__main__":
    main()
