"""benchmarks/bench_upstream.py on CPU: --list, --compare of two hand-made result files, the exit
code without a GPU, and that it (with _upstream_cases.py) imports nothing of ours but ``tilelang``."""

from __future__ import annotations

import ast
import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "bench_upstream.py"
CASES_FILE = ROOT / "benchmarks" / "_upstream_cases.py"


def _load():
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        spec = importlib.util.spec_from_file_location("bench_upstream_under_test", SCRIPT)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(SCRIPT.parent))


bench = _load()


def _run(*args, timeout=120):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout,
                          cwd=str(ROOT))


def test_list_names_every_family_with_its_size():
    proc = _run("--list")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for module in ("gemm/example_gemm.py", "gemm_fp8/example_tilelang_gemm_fp8.py",
                   "dequantize_gemm/example_dequant_gemm_fp4_hopper.py", "gemv/example_gemv.py",
                   "grouped_gemm/example_grouped_gemm_fwd.py", "flash_attention/example_mha_fwd_bhsd.py",
                   "flash_attention/example_mha_fwd_bshd.py", "flash_attention/example_gqa_fwd_bshd.py",
                   "flash_decoding/example_gqa_decode.py", "deepseek_mla/example_mla_decode.py",
                   "deepseek_nsa/example_tilelang_nsa_fwd.py",
                   "blocksparse_attention/example_tilelang_block_sparse_attn.py",
                   "linear_attention/example_linear_attn_fwd.py", "gdn/example_chunk_o.py", "norm/rms_norm.py",
                   "elementwise/example_elementwise_add.py", "topk/example_topk.py",
                   "cast/example_per_token_cast_to_fp8.py"):
        assert module in out, module
    assert "mha_fwd_bhsd_causal" in out and "gqa_fwd_bshd" in out
    assert "M=N=K=4096" in out                       # sizes are listed
    assert out.rstrip().endswith(f"{len(bench.CASES)} cases")
    names = [c.name for c in bench.CASES]
    assert len(names) == len(set(names))


def test_list_only_filters_and_unknown_only_is_an_error():
    proc = _run("--list", "--only", "rms_norm,topk_router")
    assert proc.returncode == 0
    assert "rms_norm_splitk" in proc.stdout and "topk_router" in proc.stdout
    assert "gemm_fp16" not in proc.stdout
    assert proc.stdout.rstrip().endswith("3 cases")
    proc = _run("--compile-only", "--only", "no_such_case")
    assert proc.returncode == 1 and "no case matches" in proc.stderr


def _record(ms, ref_ms, ok=True, error=None, version="x"):
    return {"ms": ms, "ref_ms": ref_ms, "ok": ok, "maxdiff": 1e-3, "error": error,
            "tilelang_version": version, "tilelang_path": f"/site/{version}/tilelang"}


def test_compare_prints_ratios_and_geometric_mean(tmp_path):
    ours = {"_meta": {"tilelang_version": "0.1.0", "tilelang_path": "/ours", "gpu": "H200"},
            "gemm_fp16_nn_128x128x32": _record(1.0, 0.8, version="0.1.0"),
            "rms_norm": _record(0.5, 1.0, version="0.1.0"),
            "topk_router": _record(None, 0.1, ok=False, error="TileLangCompileError: boom", version="0.1.0"),
            "mla_decode": _record(2.0, 4.0, ok=False, version="0.1.0")}
    upstream = {"_meta": {"tilelang_version": "0.1.15", "tilelang_path": "/up"},
                "gemm_fp16_nn_128x128x32": _record(2.0, 0.8, version="0.1.15"),
                "rms_norm": _record(0.5, 1.0, version="0.1.15"),
                "topk_router": _record(0.2, 0.1, version="0.1.15"),
                "mla_decode": _record(3.0, 4.0, version="0.1.15")}
    a, b = tmp_path / "ours.json", tmp_path / "up.json"
    a.write_text(json.dumps(ours))
    b.write_text(json.dumps(upstream))
    proc = _run("--compare", str(a), str(b))
    assert proc.returncode == 0, proc.stderr
    lines = {ln.split("|")[1].strip(): ln for ln in proc.stdout.splitlines() if ln.startswith("| ")}
    gemm = [c.strip() for c in lines["gemm_fp16_nn_128x128x32"].split("|")[1:-1]]
    assert gemm[1:7] == ["1.0000", "2.0000", "2.00x", "0.8000", "0.80x", "0.40x"]
    rms = [c.strip() for c in lines["rms_norm"].split("|")[1:-1]]
    assert rms[3] == "1.00x" and rms[5] == "2.00x"
    assert "ours: error: TileLangCompileError: boom" in lines["topk_router"]
    assert "ours: wrong result" in lines["mla_decode"]
    topk = [c.strip() for c in lines["topk_router"].split("|")[1:-1]]
    assert topk[3] == "-" and topk[6] == "0.50x"       # no ratio without both; upstream vs torch still shown
    geo = [c.strip() for c in lines["**geometric mean**"].split("|")[1:-1]]
    assert geo[3] == f"{(2.0 * 1.0) ** 0.5:.2f}x (2 cases)"
    assert "0.1.15" in proc.stdout and "0.1.0" in proc.stdout
    # the table follows the case order of the script
    order = [ln.split("|")[1].strip() for ln in proc.stdout.splitlines() if ln.startswith("| ") and "**" not in ln]
    assert order[1:] == ["gemm_fp16_nn_128x128x32", "mla_decode", "rms_norm", "topk_router"]


def test_compare_with_unreadable_file_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    proc = _run("--compare", str(bad), str(bad))
    assert proc.returncode == 1
    assert "cannot read" in proc.stderr and "Traceback" not in proc.stderr


def test_geomean_skips_missing_values():
    assert bench.geomean([2.0, None, 8.0, 0.0]) == pytest.approx(4.0)
    assert bench.geomean([]) is None


def test_measuring_without_gpu_exits_2_without_traceback():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is visible")
    proc = _run("--only", "rms_norm")
    assert proc.returncode == 2
    assert "no CUDA GPU" in proc.stderr and "Traceback" not in proc.stderr


ALLOWED_TOP = {"__future__", "argparse", "importlib", "json", "math", "os", "sys", "time", "traceback", "types",
               "dataclasses", "pathlib", "typing", "subprocess", "tempfile", "torch", "triton", "tilelang", "_upstream_cases",
               "_interleave", "select", "shlex", "signal", "statistics"}


@pytest.mark.parametrize("path", [SCRIPT, CASES_FILE, SCRIPT.parent / "_interleave.py"], ids=lambda p: p.name)
def test_imports_only_public_tilelang_torch_triton(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path.name}:{node.lineno}: relative import"
            names = [node.module]
        else:
            continue
        for name in names:
            assert name.split(".")[0] in ALLOWED_TOP, f"{path.name}:{node.lineno}: imports {name}"
            if name.startswith("tilelang"):
                assert name in ("tilelang", "tilelang.language"), f"{path.name}:{node.lineno}: imports {name}"
            if name.startswith("triton"):
                assert name in ("triton", "triton.testing"), name


def test_a_chunk_child_that_dies_has_its_unfinished_and_failed_cases_rerun_alone(monkeypatch, tmp_path):
    """--isolate --chunk K: one child for K cases; what it did not finish (it died) or finished with
    an error (a sticky CUDA error spreads to later cases) runs again, each case in a child of its own."""
    import argparse
    a, b, c = bench.CASES[:3]
    calls = []

    def fake_child(cmd, out, case_timeout, verbose=False):
        names = cmd[cmd.index("--names") + 1].split(",")
        calls.append(names)
        if len(names) == 3:     # the chunk: a fine, b failed, the child died before c
            out.write_text(json.dumps({a.name: _record(1.0, 2.0), b.name: _record(None, None, False, "sticky")}))
            return -11, "child process exited -11: Segmentation fault"
        if names == [b.name]:
            out.write_text(json.dumps({b.name: _record(3.0, 2.0)}))
            return 0, "child process exited 0: done"
        return 1, "child process exited 1: RuntimeError: still broken"   # c alone: no record

    monkeypatch.setattr(bench, "run_child", fake_child)
    args = argparse.Namespace(case_timeout=10, warmup=1, rep=1, verbose=False)
    got = bench.measure_isolated([a, b, c], tmp_path, args, {"tilelang_version": "x"})
    assert calls == [[a.name, b.name, c.name], [b.name], [c.name]]
    assert got[a.name]["ms"] == 1.0 and got[b.name]["ms"] == 3.0
    assert got[c.name]["error"] == "child process exited 1: RuntimeError: still broken"
    assert got[c.name]["size"] == c.size


def test_a_chunk_child_cut_for_a_hang_does_not_run_the_hung_case_again(monkeypatch, tmp_path):
    """A child killed because no case finished within --case-timeout stopped in the first case it
    had not recorded: that case gets the timeout as its error, the ones after it run alone."""
    import argparse
    a, b, c = bench.CASES[:3]
    calls = []

    def fake_child(cmd, out, case_timeout, verbose=False):
        names = cmd[cmd.index("--names") + 1].split(",")
        calls.append(names)
        if len(names) == 3:     # a done, then b hangs
            out.write_text(json.dumps({a.name: _record(1.0, 2.0)}))
            return None, "timed out: no case finished in 10s (hang?)"
        out.write_text(json.dumps({names[0]: _record(5.0, 2.0)}))
        return 0, "child process exited 0: done"

    monkeypatch.setattr(bench, "run_child", fake_child)
    args = argparse.Namespace(case_timeout=10, warmup=1, rep=1, verbose=False)
    got = bench.measure_isolated([a, b, c], tmp_path, args, {"tilelang_version": "x"})
    assert calls == [[a.name, b.name, c.name], [c.name]]
    assert got[b.name]["error"] == "timed out: no case finished in 10s (hang?)" and got[c.name]["ms"] == 5.0


def test_run_child_kills_a_child_that_records_nothing_for_the_case_timeout(tmp_path):
    """run_child's clock restarts with every case the child records: a child that records one case
    quickly and then hangs is killed one case timeout later, and its record is kept."""
    out = tmp_path / "chunk.json"
    script = (f"import json, time, pathlib; p = pathlib.Path({str(out)!r}); time.sleep(1.0); "
              "p.write_text(json.dumps({'a': 1})); time.sleep(60)")
    start = time.monotonic()
    rc, err = bench.run_child([sys.executable, "-c", script], out, case_timeout=2.5)
    assert rc is None and err == "timed out: no case finished in 2.5s (hang?)"
    assert 3.0 < time.monotonic() - start < 20 and json.loads(out.read_text()) == {"a": 1}
    rc, err = bench.run_child([sys.executable, "-c", "print('fine')"], tmp_path / "none.json", case_timeout=30)
    assert rc == 0 and err == "child process exited 0: fine"


def test_budget_stops_starting_cases_and_resume_measures_only_the_rest(monkeypatch, tmp_path, capsys):
    """--budget S: no case starts after S seconds (what ran is in --json); --resume then measures only
    the cases that file lacks and merges them in."""
    import torch
    names = [c.name for c in bench.CASES]
    picked = [c for c in bench.CASES if sum(c.name in n for n in names) == 1][:3]   # --only matches substrings
    measured = []

    def fake_measure(c, examples, h, ident, verbose):
        measured.append(c.name)
        time.sleep(0.3)
        return {**bench._blank(c, ident), "ms": 1.0, "ref_ms": 2.0, "ok": True, "maxdiff": 0.0}

    monkeypatch.setattr(bench, "measure", fake_measure)
    monkeypatch.setattr(bench, "gpu_missing", lambda: None)
    monkeypatch.setattr(bench, "examples_dir", lambda arg: tmp_path)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "fake GPU")
    out = tmp_path / "run.json"
    only = ",".join(c.name for c in picked)
    assert bench.main(["--only", only, "--json", str(out), "--budget", "0.1"]) == 0
    assert "case(s) not started (run again with --resume" in capsys.readouterr().out
    first = [n for n in json.loads(out.read_text()) if not n.startswith("_")]
    assert 1 <= len(first) < 3 and measured == first
    measured.clear()
    assert bench.main(["--only", only, "--json", str(out), "--resume"]) == 0
    assert set(measured) == {c.name for c in picked} - set(first)
    assert {n for n in json.loads(out.read_text()) if not n.startswith("_")} == {c.name for c in picked}
    assert bench.main(["--only", only, "--json", str(out), "--resume"]) == 0
    assert "holds every selected case already" in capsys.readouterr().out


def test_parallel_compile_only_builds_in_child_processes():
    sys.path.insert(0, str(ROOT / "tests"))
    from upstream_paths import examples
    if examples() is None:
        pytest.skip("upstream's examples are not beside this checkout")
    proc = _run("--compile-only", "--jobs", "2", "--only", "elementwise_add", "--examples", str(examples()),
                timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "building 1 cases in 1 processes" in proc.stdout and "built in" in proc.stdout


def test_compile_only_dumps_each_cases_cuda(tmp_path):
    sys.path.insert(0, str(ROOT / "tests"))
    from upstream_paths import examples
    if examples() is None:
        pytest.skip("upstream's examples are not beside this checkout")
    dump = tmp_path / "cuda"
    proc = _run("--compile-only", "--jobs", "2", "--only", "elementwise_add", "--examples", str(examples()),
                "--dump", str(dump), timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    src = (dump / "elementwise_add.cu").read_text()
    assert '#include "tl.h"' in src and "__global__" in src
