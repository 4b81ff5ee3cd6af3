#!/usr/bin/env python3
"""A process for Nsight Compute to profile: builds one of our benchmark kernels and launches it
a few times (the first launches warm up; profile the last one).

    ncu --launch-skip 2 --launch-count 1 -k regex:"^(main_kernel|kernel_kernel)$" python3 benchmarks/ncu_target.py gemm
    bash scripts/ncu.sh gemm fa fa_sm80        (the sections we read, one report per kernel)

Kernels: gemm (fp16 8192^3, TMA + warp specialisation, 128x256x64, 4 stages), gemm_cluster (the
same in clusters of two with B multicast), gemm_cpasync (the same with cp.async), torch_gemm (cuBLAS's
kernel for the same product: profile it with a regex matching its name, see scripts/ncu.sh), fa (flash attention forward B8 H32 S4096 D128, wgmma path), fa_sm80 (the
same on the sm_80 path, 128x64 tiles over four warps), fa_causal (causal, 3 stages), torch_sdpa /
torch_sdpa_causal (SDPA's kernel for the same attention; scripts/ncu.sh matches it by name).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "examples"))

LAUNCHES = 3


def _gemm(configs):
    import torch

    import gemm
    import tilelang

    func = gemm.matmul.get_prim_func(8192, 8192, 8192, block_M=128, block_N=256, block_K=64, num_stages=4,
                                     threads=256)
    kernel = tilelang.compile(func, out_idx=[-1], pass_configs=configs)
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
    return lambda: kernel(a, b)


def _fa(configs, causal=False, **cfg):
    import torch

    import flash_attention as fa
    import tilelang

    func = fa.flashattn.get_prim_func(8, 32, 4096, 128, causal, 1, "bhsd", **cfg)
    kernel = tilelang.compile(func, out_idx=[3], pass_configs={"tl.enable_fast_math": True, **configs})
    q, k, v = (torch.randn(8, 32, 4096, 128, device="cuda", dtype=torch.float16) for _ in range(3))
    return lambda: kernel(q, k, v)


def _torch_sdpa(causal):
    import torch
    import torch.nn.functional as F

    q, k, v = (torch.randn(8, 32, 4096, 128, device="cuda", dtype=torch.float16) for _ in range(3))
    return lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)


def _torch_gemm():
    import torch

    a = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
    return lambda: a @ b


KERNELS = {
    "gemm": lambda: _gemm({}),
    "gemm_cluster": lambda: _gemm({"tl.cluster_multicast": True}),
    "torch_gemm": _torch_gemm,
    "gemm_cpasync": lambda: _gemm({"tl.disable_warp_specialized": True}),
    "fa": lambda: _fa({}, block_M=128, block_N=128, num_stages=2, threads=256),
    "fa_causal": lambda: _fa({}, True, block_M=128, block_N=128, num_stages=3, threads=256),
    "torch_sdpa": lambda: _torch_sdpa(False),
    "torch_sdpa_causal": lambda: _torch_sdpa(True),
    "fa_sm80": lambda: _fa({"tl.disable_wgmma": True}, block_M=128, block_N=64, num_stages=2, threads=128),
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kernel", choices=sorted(KERNELS))
    args = parser.parse_args()
    import torch

    run = KERNELS[args.kernel]()
    for _ in range(LAUNCHES):
        run()
    torch.cuda.synchronize()
    print(f"{args.kernel}: {LAUNCHES} launches done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
