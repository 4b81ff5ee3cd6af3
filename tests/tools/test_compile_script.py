"""scripts/compile_script.py: a user's script run without a GPU, its kernels built to cubins up to
the first launch, with a one-line verdict."""

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "compile_script.py"

KERNEL = textwrap.dedent("""
    import torch
    import tilelang
    import tilelang.language as T

    @tilelang.jit(out_idx=[1])
    def scale(n, factor):
        @T.prim_func
        def main(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
            with T.Kernel(T.ceildiv(n, 128), threads=128) as bx:
                for i in T.Parallel(128):
                    Y[bx * 128 + i] = X[bx * 128 + i] * {factor}
        return main

    k = scale(1024, 2.0)
    y = k(torch.randn(1024, device="cuda"))
""")


def _run(tmp_path, text):
    path = tmp_path / "user_script.py"
    path.write_text(text)
    return subprocess.run([sys.executable, str(SCRIPT), str(path)], capture_output=True, text=True, timeout=600)


def test_builds_the_kernel_and_stops_at_the_launch(tmp_path):
    got = _run(tmp_path, KERNEL.replace("{factor}", "factor"))
    assert got.returncode == 0, got.stderr[-2000:]
    lines = got.stdout.splitlines()
    assert "COMPILED scale" in lines
    assert lines[-1] == "RESULT ok (stopped at launch)"


def test_a_compile_error_is_the_verdict(tmp_path):
    got = _run(tmp_path, KERNEL.replace("{factor}", "Z"))      # an undefined name in the kernel
    assert got.returncode == 1
    assert got.stdout.splitlines()[-1].startswith("RESULT compile-error")
    assert "Z" in got.stdout.splitlines()[-1]
