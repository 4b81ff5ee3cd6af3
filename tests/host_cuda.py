"""Build and run a host program against the device library (``src/``) with nvcc, for tests that
evaluate its constexpr / __host__ helpers (descriptors, shared-memory addressing) on the CPU."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
NVCC = shutil.which("nvcc")


def run_host_program(tmp_path: Path, name: str, source: str) -> list[str]:
    """Compile ``source`` (which includes ``tl.h``) for sm_90a, run it, return its output lines."""
    src = tmp_path / f"{name}.cu"
    src.write_text(source)
    exe = tmp_path / name
    proc = subprocess.run([NVCC, "-std=c++17", "-O1", "-I", str(SRC), "-gencode", "arch=compute_90a,code=sm_90a",
                           str(src), "-o", str(exe)], capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr
    return subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.splitlines()
