"""tf32 wgmma on sm_90a (CPU side): a T.gemm whose operands are declared ``T.tfloat32`` and both
K-major (A as M x K, B as N x K) takes the wgmma path (m64nNk8, A in shared memory or in
registers), as upstream plans it; float32 operands, and tfloat32 ones that are M/N-major, keep
mma.sync (which rounds float32 operands to tf32). The register A operand is laid out in 32-bit
words exactly as the 16-bit one: lane ``(r % 8) * 4 + k % 4`` holds columns ``k`` and ``k + 4`` of
rows ``r`` and ``r + 8`` of each 64 x 8 step. GPU results: tests/gpu/test_tf32_wgmma_gpu.py."""

from __future__ import annotations

import re

import pytest

import tilelang
import tilelang.language as T
from tilelang.jit import nvcc
from tilelang.layout.axes import wgmma_operand_a
from tilelang.transform.kernel import analyze_kernel
from tilelang.transform.layout_inference import infer_layouts

from test_fp8_wgmma import fp8_matmul
from test_wgmma_mix import tf32_beside_wgmma_kernel

try:
    HAVE_NVCC = bool(nvcc.find_nvcc())
except Exception:  # noqa: BLE001 - no toolchain: source checks only
    HAVE_NVCC = False


def tf32_matmul(M, N, K, block_M=128, block_N=128, block_K=32, a_dtype=T.tfloat32, b_dtype=T.tfloat32,
                threads=128, stages=3, trans_b=True, a_in_registers=False):
    """C = A B^T (or A B) in float32 through tf32 tensor cores (float32 tensors, tiles of
    ``a_dtype`` / ``b_dtype``); ``a_in_registers``: the register-A wgmma."""
    return fp8_matmul(M, N, K, block_M, block_N, block_K, a_dtype, b_dtype, T.float32, T.float32, threads, stages,
                      trans_b, global_dtype=T.float32, a_in_registers=a_in_registers)


def _plans(func, arch="sm_90a"):
    info = analyze_kernel(func)
    return info, infer_layouts(info, arch)


@pytest.mark.parametrize("a_in_registers", [False, True])
def test_tfloat32_k_major_gemm_takes_wgmma(a_in_registers):
    func = tf32_matmul(256, 256, 256, a_in_registers=a_in_registers)
    _, layouts = _plans(func)
    assert [p.kind for p in layouts.gemms.values()] == ["wgmma"]
    src = tilelang.lower(func, "sm_90a").source
    call = "wgmma_gemm_rs" if a_in_registers else "wgmma_gemm_ss"
    assert re.search(rf"tl::{call}(_async)?<128, 128, 32, 1, false, true", src), src


@pytest.mark.parametrize("kw, why", [
    (dict(a_dtype=T.float32, b_dtype=T.float32), "T.tfloat32"),
    (dict(b_dtype=T.float32), "T.tfloat32"),
    (dict(trans_b=False), "K-major"),
])
def test_other_float32_gemms_keep_mma_sync(kw, why):
    from tilelang.analysis.summary import summarize

    func = tf32_matmul(256, 256, 256, **kw)
    _, layouts = _plans(func)
    assert [p.kind for p in layouts.gemms.values()] == ["mma"]
    (gemm,) = summarize(func, "sm_90a")["gemms"]
    assert why in gemm["why_not_wgmma"], gemm


def test_register_a_layout_is_the_16_bit_one_in_words():
    """Element (r, k) of a 64 x 8 tf32 step: lane (r % 8) * 4 + k % 4 of warp r // 16, register
    ((k // 4) * 2 + (r % 16) // 8); the 16-bit layout holds elements (r, 2k), (r, 2k + 1) in that
    thread's 32-bit word of the same number."""
    M, K = 128, 16
    t32 = wgmma_operand_a(M, K, 1, 128, elem_bytes=4).owners()
    t16 = wgmma_operand_a(M, 2 * K, 1, 128, elem_bytes=2).owners()
    assert t32.shape == (128, M // 64 * K // 8 * 4)
    for tid in range(128):
        for reg in range(t32.shape[1]):
            r, k = divmod(int(t32[tid, reg]), K)
            mi, rr, ki, kk = r // 64, r % 64, k // 8, k % 8
            assert tid == (rr // 16) * 32 + (rr % 8) * 4 + kk % 4, (tid, reg, r, k)
            assert reg == (mi * (K // 8) + ki) * 4 + (kk // 4) * 2 + (rr % 16) // 8, (tid, reg, r, k)
            assert divmod(int(t16[tid, 2 * reg]), 2 * K) == (r, 2 * k)
            assert divmod(int(t16[tid, 2 * reg + 1]), 2 * K) == (r, 2 * k + 1)


def test_gdn_shaped_kernel_puts_every_gemm_on_wgmma():
    """gdn chunk_delta_bwd in small, its tf32 gemm declared T.tfloat32 as the example does: both
    gemms take wgmma (their accumulators share one layout), none is left on mma.sync."""
    _, layouts = _plans(tf32_beside_wgmma_kernel(tf32=T.tfloat32))
    assert [p.kind for p in layouts.gemms.values()] == ["wgmma", "wgmma"] and not layouts.mixed
    src = tilelang.lower(tf32_beside_wgmma_kernel(tf32=T.tfloat32), "sm_90a").source
    assert "tl::wgmma_gemm_rs<128, 32, 64, 1, false, true" in src and "tl::gemm_" not in src


@pytest.mark.skipif(not HAVE_NVCC, reason="no nvcc")
@pytest.mark.parametrize("a_in_registers", [False, True])
def test_ptxas_takes_the_tf32_instructions(a_in_registers):
    art = tilelang.lower(tf32_matmul(256, 256, 256, a_in_registers=a_in_registers), "sm_90a")
    ptx = nvcc.compile_ptx(art.source, "sm_90a")
    insts = re.findall(r"wgmma\.mma_async\.sync\.aligned\.(m64n\d+k\d+)\.f32\.tf32\.tf32", ptx)
    assert insts and set(insts) == {"m64n128k8"}, insts
    assert "cvt.rna.tf32" not in ptx      # declared tf32: nothing rounds
    assert nvcc.compile_cubin(art.source, "sm_90a", art.compile_flags)[:4] == b"\x7fELF"
