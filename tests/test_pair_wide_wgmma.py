"""Two GEMM blocks per SM (``warp_specialize.plan_pair``) only where one consumer warpgroup's wgmma
fits the pair's 128-register compile limit: a 64x256 tile on 128 threads holds 128 accumulator
registers in one m64n256 instruction (ptxas: "Insufficient registers (128) ... 154 or higher"),
so it runs one block per SM; 128x128 tiles keep the pair. Also: nvcc's failure message puts the
error lines before the (long) log."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import tilelang

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import gemm  # noqa: E402


@pytest.mark.parametrize("bm,bn,paired", [(64, 256, False), (128, 128, True)])
def test_block_pair_needs_room_for_one_wgmma_accumulator(bm, bn, paired):
    func = gemm.matmul.get_prim_func(4096, 4096, 4096, trans_B=True, block_M=bm, block_N=bn, block_K=64,
                                     num_stages=3, threads=128)
    src = tilelang.lower(func, "sm_90a").source
    assert ("__launch_bounds__(256, 2)" in src) == paired


def test_nvcc_failure_message_leads_with_the_errors():
    from tilelang.jit.nvcc import _failure_message

    log = "k.cu(1): warning #177-D: variable declared but never referenced\n" * 400 + \
        "ptxas fatal   : (C7602) Insufficient registers (128) to compile instruction\n"
    msg = _failure_message("nvcc", 255, ["nvcc", "k.cu"], None, log)
    assert msg.splitlines()[1].strip().startswith("ptxas fatal   : (C7602) Insufficient registers")
