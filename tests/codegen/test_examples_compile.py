"""Every example's generated CUDA compiles with nvcc for sm_90a and sm_80, and the tensor-core
path emits the instructions meant (mma.sync, ldmatrix, cp.async in the PTX)."""

import importlib
import sys
from pathlib import Path

import pytest

import tilelang
from tilelang.jit import nvcc

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "tests" / "gpu"))

EXAMPLES = sorted(p.stem for p in (ROOT / "examples").glob("*.py") if not p.stem.startswith("_"))

try:
    nvcc.find_nvcc()
    HAVE_NVCC = True
except Exception:  # noqa: BLE001
    HAVE_NVCC = False

needs_nvcc = pytest.mark.skipif(not HAVE_NVCC, reason="nvcc not found")


def _kernels(name):
    return importlib.import_module(name).kernels()


@needs_nvcc
@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
@pytest.mark.parametrize("name", EXAMPLES)
def test_example_compiles(name, arch):
    for func in _kernels(name):
        art = tilelang.lower(func, arch)
        assert art.source.startswith('#include "tl.h"')
        cubin = nvcc.compile_cubin(art.source, arch, art.compile_flags)
        assert cubin[:4] == b"\x7fELF"


@needs_nvcc
@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_gemm_ptx_uses_tensor_cores(arch):
    import gemm

    art = tilelang.lower(gemm.matmul.get_prim_func(512, 512, 512), arch)
    ptx = nvcc.compile_ptx(art.source, arch, art.compile_flags)
    if arch == "sm_90a":
        # Warp-specialised: a TMA producer warpgroup and mbarriers feed asynchronous wgmma.
        assert "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16" in ptx and "mma.sync" not in ptx
        assert "cp.async.bulk.tensor.2d.shared::cluster.global" in ptx
        assert "mbarrier.try_wait.parity" in ptx and "cp.async.cg" not in ptx
        assert ".param .align 128 .b8" in ptx   # the __grid_constant__ CUtensorMap parameters
    else:
        assert "mma.sync.aligned.m16n8k16" in ptx
        assert "ldmatrix.sync.aligned" in ptx
        assert "cp.async.cg.shared.global" in ptx
        assert "cp.async.wait_group" in ptx
    info = nvcc.ptxas_info(art.source, arch, art.compile_flags)
    (entry,) = info.values()
    assert entry.spill_stores == 0 and entry.spill_loads == 0


@needs_nvcc
def test_memory_bound_kernels_use_16_byte_accesses():
    import rmsnorm

    art = tilelang.lower(rmsnorm.rmsnorm.get_prim_func(4096, 4096), "sm_90a")
    ptx = nvcc.compile_ptx(art.source, "sm_90a")
    assert "ld.global.v4" in ptx or "ld.global.nc.v4" in ptx
    assert "st.global.v4" in ptx
    assert "shfl.sync.bfly" in ptx


def _language_kernel_names():
    import language_kernels as lk

    return sorted(lk.ALL)


@needs_nvcc
@pytest.mark.parametrize("name", _language_kernel_names())
def test_language_kernels_compile(name):
    import language_kernels as lk

    art = tilelang.lower(lk.ALL[name](), "sm_90a")
    nvcc.compile_cubin(art.source, "sm_90a", art.compile_flags)


@needs_nvcc
def test_shared_memory_epilogue_ptx_stores_by_tma():
    import gemm

    art = tilelang.lower(gemm.matmul.get_prim_func(512, 512, 512, block_K=64, smem_epilogue=True), "sm_90a")
    ptx = nvcc.compile_ptx(art.source, "sm_90a", art.compile_flags)
    assert "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group" in ptx
    assert "cp.async.bulk.commit_group" in ptx and "cp.async.bulk.wait_group.read 0" in ptx
    assert "fence.proxy.async" in ptx
