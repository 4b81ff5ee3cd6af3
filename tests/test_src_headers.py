"""Compile-only checks of the CUDA device library in src/tl (no GPU needed).

Every test here runs nvcc for sm_80 and for sm_90a and is skipped when nvcc
is not installed.  The programs under tests/gpu/csrc are compiled but not
run; tests/gpu/csrc/run.sh runs them on a machine with a GPU.

* every header compiles inside a kernel shaped like TVM's generated code,
  with TVM's `uint`/`uchar`/`ushort`/`int64_t`/`uint64_t` macros defined
  before or after `tl.h`, and with the half/bf16 operators disabled;
* the GEMM and misc test programs compile (test_gemm.cu in its reduced
  TL_TEST_QUICK form, since the full one takes over half a minute per
  architecture; set TL_TEST_FULL=1 to compile the full one);
* the PTX contains the instructions the library exists to emit;
* the pipelined 128x128x32 half GEMM (2x2 warps) neither spills nor needs a
  stack frame.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
CSRC = ROOT / "tests" / "gpu" / "csrc"
NVCC = shutil.which("nvcc")

pytestmark = pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")

ARCHS = {
    "sm_80": ["-gencode", "arch=compute_80,code=sm_80"],
    "sm_90a": ["-gencode", "arch=compute_90a,code=sm_90a"],
}
BASE_FLAGS = ["-std=c++17", "-O3", "-I", str(SRC)]
NO_16BIT_OPERATORS = [
    "-D__CUDA_NO_HALF_OPERATORS__",
    "-D__CUDA_NO_HALF_CONVERSIONS__",
    "-D__CUDA_NO_HALF2_OPERATORS__",
    "-D__CUDA_NO_BFLOAT16_OPERATORS__",
    "-D__CUDA_NO_BFLOAT16_CONVERSIONS__",
]


def nvcc(args: list[str], timeout: float = 120) -> subprocess.CompletedProcess:
    cmd = [NVCC, *BASE_FLAGS, *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        pytest.fail(f"{' '.join(cmd)} failed:\n{proc.stdout}\n{proc.stderr}")
    return proc


def ptxas_report(text: str) -> dict[str, dict[str, int]]:
    """Parses `-Xptxas -v` output into {function: {registers, stack, spill_*}}."""
    funcs: dict[str, dict[str, int]] = {}
    current = None
    for line in text.splitlines():
        m = re.search(r"Function properties for (\S+)", line)
        if m:
            current = funcs.setdefault(m.group(1), {})
            continue
        m = re.search(r"Compiling entry function '([^']+)'", line)
        if m:
            current = funcs.setdefault(m.group(1), {})
            continue
        if current is None:
            continue
        m = re.search(
            r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line
        )
        if m:
            current["stack"], current["spill_stores"], current["spill_loads"] = map(int, m.groups())
        m = re.search(r"Used (\d+) registers", line)
        if m:
            current["registers"] = int(m.group(1))
    return funcs


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize(
    "variant",
    ["prelude_after", "prelude_before", "prelude_before_no_16bit_operators"],
)
def test_all_headers_compile(arch, variant, tmp_path):
    flags = []
    if variant.startswith("prelude_before"):
        flags.append("-DTL_PRELUDE_BEFORE")
    if variant.endswith("no_16bit_operators"):
        flags += NO_16BIT_OPERATORS
    nvcc([*ARCHS[arch], *flags, "-cubin", str(CSRC / "all_headers.cu"), "-o", str(tmp_path / "a.cubin")])
    assert (tmp_path / "a.cubin").stat().st_size > 0


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("program", ["test_gemm", "test_misc"])
def test_gpu_programs_compile(arch, program, tmp_path):
    flags = []
    if program == "test_gemm" and not os.environ.get("TL_TEST_FULL"):
        flags.append("-DTL_TEST_QUICK")
    nvcc(
        [*ARCHS[arch], *flags, "-cubin", str(CSRC / f"{program}.cu"), "-o", str(tmp_path / "p.cubin")],
        timeout=300,
    )
    assert (tmp_path / "p.cubin").stat().st_size > 0


@pytest.mark.parametrize("arch", ARCHS)
def test_ptx_contains_tensor_core_and_async_copy(arch, tmp_path):
    ptx_path = tmp_path / "k.ptx"
    nvcc([*ARCHS[arch], "-ptx", str(CSRC / "all_headers.cu"), "-o", str(ptx_path)])
    ptx = ptx_path.read_text()
    for needle in [
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
        "ldmatrix.sync.aligned.m8n8.x4.shared.b16",
        "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16",
        "cp.async.cg.shared.global",
        "cp.async.commit_group",
        "cp.async.wait_group",
        "shfl.sync.bfly",
        "ex2.approx.ftz.f32",
    ]:
        assert needle in ptx, f"{needle!r} missing from the PTX for {arch}"
    # The library must not fall back to generic (non-tensor-core) code or
    # local memory in this kernel.
    assert "ld.local" not in ptx and "st.local" not in ptx


@pytest.mark.parametrize("arch", ARCHS)
def test_gemm_128x128x32_does_not_spill(arch, tmp_path):
    proc = nvcc(
        [*ARCHS[arch], "-cubin", "-Xptxas", "-v", str(CSRC / "gemm_bench.cu"), "-o", str(tmp_path / "b.cubin")]
    )
    report = ptxas_report(proc.stdout + proc.stderr)
    gemms = {name: info for name, info in report.items() if "gemm_pipelined_kernel" in name}
    assert gemms, f"no GEMM kernel in the ptxas report:\n{proc.stderr}"
    for name, info in gemms.items():
        assert info.get("spill_stores") == 0 and info.get("spill_loads") == 0, (name, info)
        assert info.get("stack") == 0, (name, info)
        assert 0 < info.get("registers", 0) <= 255, (name, info)


def test_umbrella_header_includes_every_header():
    umbrella = (SRC / "tl.h").read_text()
    included = set(re.findall(r'#include "tl/([^"]+)"', umbrella))
    # macros_park.h / macros_restore.h are fragments included around system headers, not
    # library headers of their own.
    present = {p.name for p in (SRC / "tl").glob("*.h") if not p.name.startswith("macros_")}
    assert included == present


def test_headers_avoid_tvm_macro_names_and_stay_small():
    """TVM's prelude may #define these names; the library must not use them."""
    for header in [SRC / "tl.h", *sorted((SRC / "tl").glob("*.h"))]:
        text = header.read_text()
        assert len(text.splitlines()) < 800, header
        code = re.sub(r"//.*", "", text)
        # Parking the macros (push_macro / #undef / pop_macro) is the one
        # legitimate mention of these names.
        code = re.sub(r"^\s*#\s*(undef|pragma)\b.*$", "", code, flags=re.M)
        code = re.sub(r'"[^"\n]*"', '""', code)
        for name in ["uint", "uchar", "ushort"]:
            assert not re.search(rf"\b{name}\b", code), (header, name)


STAGED_FLOATS = r"""
#include "tl.h"
// A float tile copied into one shared slot per step with tl::copy_vec and read back by the same
// thread as float4 (what a T.copy then a T.Parallel lower to; rms_norm_splitk's shape).
extern "C" __global__ void __launch_bounds__(128) staged(const float* __restrict__ a, float* __restrict__ b) {
  extern __shared__ __align__(64) unsigned char smem[];
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  for (int k = 0; k < 16; ++k) {
    tl::copy_vec<16>(&((float*)smem)[threadIdx.x * 4], &a[k * 512 + threadIdx.x * 4]);
    float4 v = *(float4*)(((float*)smem) + threadIdx.x * 4);
    acc.x += v.x * v.x; acc.y += v.y * v.y; acc.z += v.z * v.z; acc.w += v.w * v.w;
  }
  tl::zero_vec<8>(&b[threadIdx.x * 2]);
  *(float4*)(&b[512 + threadIdx.x * 4]) = acc;
}
"""


def test_copy_vec_moves_floats_as_floats(tmp_path):
    """``tl::copy_vec`` / ``zero_vec`` move a float tile through float vectors (ld.v4.f32), so nvcc
    forwards each copy into shared memory to the thread's own float4 read of it and drops the
    stores the next step overwrites: one st.shared left of 16. Through int4 (the old form) every
    store stayed (rms_norm_splitk: 50 STS.128 against upstream's 4)."""
    src = tmp_path / "staged.cu"
    src.write_text(STAGED_FLOATS)
    ptx_path = tmp_path / "staged.ptx"
    nvcc([*ARCHS["sm_90a"], "-ptx", str(src), "-o", str(ptx_path)])
    ptx = ptx_path.read_text()
    assert "ld.global.nc.v4.f32" in ptx and ".v4.u32" not in ptx and ".v4.b32" not in ptx
    assert len(re.findall(r"\bst\.shared\.", ptx)) <= 1
    assert "st.global.v2.f32" in ptx     # zero_vec<8> of floats: one float2 store
