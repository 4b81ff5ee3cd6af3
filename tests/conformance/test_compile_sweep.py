"""scripts/compile_sweep.py: the child compiles each variant of each kernel factory call an example
module's main() makes (autotune configs, tile knobs, sizes, dtypes) without a GPU; ``compare``
lists the variants ours fails where upstream's package compiles (docs/conformance.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from host_cuda import NVCC

ROOT = Path(__file__).resolve().parents[2]
SWEEP = ROOT / "scripts" / "compile_sweep.py"
CHILD = ROOT / "scripts" / "compile_sweep_child.py"

MODULE = '''
import torch
import tilelang
import tilelang.language as T
from tilelang.autotuner import autotune


@autotune(configs=[{"threads": 128}, {"threads": 256}])
@tilelang.jit(out_idx=[-1])
def scale(M, N, block_M=64, threads=128):
    @T.prim_func
    def main(X: T.Tensor((M, N), "float16"), Y: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            for i, j in T.Parallel(block_M, N):
                Y[bx * block_M + i, j] = X[bx * block_M + i, j] * 2
    return main


def main():
    x = torch.randn(256, 32, device="cuda").half()     # a CPU tensor under the sweep
    kernel = scale(256, 32, block_M=64, threads=128)
    kernel(x)                                          # no GPU: the module stops here
'''


def _child(tmp_path, mode, most="2"):
    module = tmp_path / "example_scale.py"
    module.write_text(MODULE)
    out = tmp_path / f"{mode}.json"
    proc = subprocess.run([sys.executable, str(CHILD), str(module), str(out), mode, most],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(out.read_text()), proc.stdout


@pytest.mark.skipif(not NVCC, reason="nvcc not found")
def test_configs_mode_compiles_autotune_configs_and_tile_knobs(tmp_path):
    records, log = _child(tmp_path, "configs")
    kinds = sorted((r["kind"], r["variant"].split(":")[0]) for r in records)
    # both autotune configs, then two of the eight (block_M, threads) combinations
    assert [k for k in kinds if k[0] == "autotune"] == [("autotune", "#0/2"), ("autotune", "#1/2")]
    assert len([k for k in kinds if k[0] == "knob"]) == 2
    assert all(r["ok"] for r in records), records
    assert "main stopped" in log and "no CUDA device" in log


@pytest.mark.skipif(not NVCC, reason="nvcc not found")
def test_sizes_mode_makes_the_problem_sizes_odd(tmp_path):
    records, _ = _child(tmp_path, "sizes")
    variants = [r["variant"] for r in records]
    assert [v.split(":")[0] for v in variants] == ["M odd", "M + 8"]    # N=32 is too small to vary
    assert "M=217" in variants[0] and "M=264" in variants[1]
    assert all(r["ok"] for r in records), records


def _write(folder: Path, module: str, records: list) -> None:
    folder.mkdir(exist_ok=True)
    (folder / f"{module}.json").write_text(json.dumps(records))


def test_compare_counts_what_ours_fails_and_upstream_compiles(tmp_path):
    def rec(variant, ok, error=""):
        return {"kind": "knob", "factory": "f", "variant": variant, "ok": ok, "error": error}

    _write(tmp_path / "ours", "gemm__m", [rec("a", True), rec("b", False, "error[TL0201]: conflict"),
                                          rec("c", False, "error[TL0501]: the kernel needs 272 KiB"),
                                          rec("d", True)])
    _write(tmp_path / "up", "gemm__m", [rec("a", True), rec("b", True), rec("c", True), rec("d", False, "X")])
    proc = subprocess.run([sys.executable, str(SWEEP), "compare", str(tmp_path / "ours"), str(tmp_path / "up")],
                          capture_output=True, text=True)
    assert proc.returncode == 1
    assert "both compile: 1" in proc.stdout and "ours fails, upstream's compiles: 2" in proc.stdout
    assert "gemm/m f [knob] b" in proc.stdout and "TL0201" in proc.stdout
    assert "1 variant(s) ours fails where upstream's compiles" in proc.stdout   # TL0501 not counted
    _write(tmp_path / "ours", "gemm__m", [rec("a", True), rec("c", False, "error[TL0501]: over")])
    again = subprocess.run([sys.executable, str(SWEEP), "compare", str(tmp_path / "ours"), str(tmp_path / "up")],
                           capture_output=True, text=True)
    assert again.returncode == 0


EAGER = '''
import torch
import tilelang
import tilelang.language as T


@tilelang.jit
def double(X, block=128):
    M, N = T.const("M, N")
    X: T.Tensor((M, N), "float16")
    Y = T.empty((M, N), "float16")
    with T.Kernel(T.ceildiv(M, block), threads=128) as bx:
        for i, j in T.Parallel(block, N):
            if bx * block + i < M:
                Y[bx * block + i, j] = X[bx * block + i, j] * 2
    return Y


def main():
    double(torch.randn(256, 64, device="cuda").half())
'''


@pytest.mark.skipif(not NVCC, reason="nvcc not found")
def test_sizes_mode_remakes_an_eager_factorys_tensors(tmp_path):
    module = tmp_path / "example_double.py"
    module.write_text(EAGER)
    out = tmp_path / "sizes.json"
    proc = subprocess.run([sys.executable, str(CHILD), str(module), str(out), "sizes"], capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    records = json.loads(out.read_text())
    assert [r["variant"].split(", block")[0] for r in records] == ["tensor sizes odd: X=tensor[217, 52]",
                                                                 "tensor sizes + 8: X=tensor[264, 72]"]
    assert all(r["ok"] for r in records), records
