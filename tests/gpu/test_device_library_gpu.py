"""The device library's own CUDA test program (tests/gpu/csrc/test_misc.cu: warp reductions of one
value and of several rows a lane, atomics, copies, math, conversions) built with nvcc for the local
GPU and run: every check it prints must PASS. (tests/gpu/csrc/run.sh also runs the GEMM programs,
which take minutes to build; tests/test_src_headers.py compiles them on machines without a GPU.)"""

import shutil
import subprocess
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU"),
              pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")]

ROOT = Path(__file__).resolve().parents[2]


def test_misc_program(tmp_path):
    major, minor = torch.cuda.get_device_capability()
    arch = f"{major}{minor}" + ("a" if major == 9 else "")
    exe = tmp_path / "test_misc"
    build = subprocess.run(["nvcc", "-std=c++17", "-O3", "-I", str(ROOT / "src"), "-gencode",
                            f"arch=compute_{arch},code=sm_{arch}", str(ROOT / "tests/gpu/csrc/test_misc.cu"),
                            "-o", str(exe)], capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr[-4000:]
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=300)
    failed = [line for line in run.stdout.splitlines() if line.startswith("FAIL")]
    assert run.returncode == 0 and not failed, "\n".join(failed) or run.stdout[-4000:] + run.stderr[-2000:]
    assert "warp_allreduce_rows<MaxOp, 1, 32, 16>" in run.stdout
