"""The Compile lens in the worker: one nvcc run per compile, and a ``.cu`` path per workspace (issue 16)."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from lsp_testing import FIXTURES


def _nvcc_available() -> bool:
    return bool(shutil.which("nvcc") or Path("/usr/local/cuda/bin/nvcc").exists())


@pytest.mark.skipif(not _nvcc_available(), reason="nvcc is not installed")
def test_compile_lens_runs_nvcc_once_and_reads_ptxas_from_its_ptx(monkeypatch, tmp_path):
    from tilelang.jit import nvcc

    from tilelang_lsp import worker_tools
    from tilelang_lsp.worker_check import CheckService

    runs = []
    real = nvcc._run_nvcc
    monkeypatch.setattr(nvcc, "_run_nvcc", lambda *a, **k: runs.append(a[1]) or real(*a, **k))
    path = tmp_path / "kernel.py"
    path.write_text((FIXTURES / "no_clear.py").read_text())
    data = worker_tools.compile_kernel(CheckService(), {"path": str(path), "text": path.read_text(),
                                                        "factory": "matmul_no_clear", "target": "sm_80"})
    assert data["error"] is None, data
    assert runs == ["ptx"], f"nvcc ran for {runs}"
    assert 0 < data["registers"] <= 255 and data["spill_stores"] == 0
    assert data["instructions"]["mma.sync"] > 0 and data["target"] == "sm_80"
    assert set(data["times"]) == {"lower_ms", "ptx_ms", "ptxas_ms"}


def test_the_cuda_file_of_a_compile_is_unique_per_workspace():
    from tilelang_lsp.handlers.code_lens import cuda_path

    def server(root):
        return SimpleNamespace(workspace=SimpleNamespace(root_uri=root), path_of=lambda uri: uri[len("file://"):])

    a = cuda_path(server("file:///work/a"), "file:///work/a/k.py", "matmul")
    b = cuda_path(server("file:///work/b"), "file:///work/b/k.py", "matmul")
    assert a != b and a.name == b.name == "k.matmul.cu"
    assert cuda_path(server("file:///work/a"), "file:///work/a/sub/k.py", "matmul").parent == a.parent
    # no workspace folder: the document's folder decides
    assert cuda_path(server(None), "file:///x/k.py", "f").parent != cuda_path(server(None), "file:///y/k.py", "f").parent
