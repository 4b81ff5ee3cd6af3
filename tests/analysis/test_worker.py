"""The worker boundary: time limits, crashes, and keeping user code out of the checker's process."""

from __future__ import annotations

import os

from fixture_check import FIXTURES, check_fixture


def test_timeout_and_crash_are_reported_and_the_worker_recovers(worker):
    from tilelang_lsp.session import Session

    session = Session(target="sm_90a", timeout=3.0, worker=worker)
    diagnostics = check_fixture(FIXTURES / "build_timeout.py", lambda target: session)
    # `fine` was built after both failures: the session recovered with a fresh worker.
    assert all(d.binding is None or "fine" not in d.binding for d in diagnostics)


def test_user_code_never_runs_in_the_checker_process(session_for, tmp_path):
    marker = tmp_path / "ran.txt"
    source = (
        "import os\n"
        "import tilelang\n"
        f"MARK = {str(marker)!r}\n"
        "@tilelang.jit\n"
        "def factory(N=1):\n"
        "    open(MARK, 'w').write(str(os.getpid()))\n"
        "    return None\n"
    )
    path = tmp_path / "marker.py"
    path.write_text(source)
    session_for().check_file(str(path))
    assert marker.exists(), "the factory should have run in the worker"
    assert int(marker.read_text()) != os.getpid()


def test_unsaved_text_is_checked_not_the_file_on_disk(session_for, tmp_path):
    path = tmp_path / "buffer.py"
    path.write_text("x = 1\n")
    text = (FIXTURES / "tma_alignment.py").read_text()
    report = session_for().check_file(str(path), text)
    assert [d.code for d in report.diagnostics] == ["TL0301"]
    assert report.diagnostics[0].span.file == str(path)


def test_the_public_handlers_load_build_and_check_in_process(tmp_path):
    """``load_module``/``build_kernel``: what the language server's worker runs in its own process."""
    from tilelang_lsp import worker_build as worker

    path = str(tmp_path / "tma.py")
    text = (FIXTURES / "tma_alignment.py").read_text() + "\n\ndef broken(n):\n    raise ValueError('no')\n"
    modules = {}
    loaded = worker.load_module({"op": "load", "path": path, "text": text}, modules)
    assert loaded["ok"] and loaded["diagnostics"] == [] and modules[path].__name__ == loaded["module"]
    message = {"op": "build", "path": path, "factory": "matmul", "args": ["M", "N", "K"], "kwargs": [],
               "binding": "matmul(M=1024, N=1024, K=1001)", "target": "sm_90a", "prim_func": False,
               "out_idx_span": None}
    reply = worker.build_kernel(modules[path], {**message, "summary": True})
    assert reply["built"] and reply["summary"]["gemms"][0]["M"] == 128
    assert "summary" not in worker.build_kernel(modules[path], message)
    assert [d["code"] for d in reply["diagnostics"]] == ["TL0301"]
    assert reply["diagnostics"][0]["binding"] == message["binding"]
    reply = worker.build_kernel(modules[path], {**message, "factory": "broken", "args": ["1"]})
    assert not reply["built"]
    assert [d["code"] for d in reply["diagnostics"]] == ["TL0802"]
    assert reply["diagnostics"][0]["span"]["line"] == text.splitlines().index("    raise ValueError('no')") + 1


PASS_CONFIGS = '''import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1], pass_configs=CONFIGS)
def gemm(M=256, N=256, K=256, block=64):
    @T.prim_func
    def kernel(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(N // block, M // block, threads=128) as (bx, by):
            A_s = T.alloc_shared((block, 32), "float16")
            B_s = T.alloc_shared((32, block), "float16")
            C_l = T.alloc_fragment((block, block), "float32")
            T.clear(C_l)
            for k in T.Pipelined(K // 32, num_stages=3):
                T.copy(A[by * block, k * 32], A_s)
                T.copy(B[k * 32, bx * block], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * block, bx * block])

    return kernel
'''


def test_a_build_checks_and_summarises_with_the_factorys_pass_configs(tmp_path):
    """Issue 16: the checker inferred layouts without the kernel's pass configs, so with
    ``tl.disable_wgmma`` its checks (and the hovers) described a wgmma kernel the compiler never builds."""
    from tilelang_lsp import worker_build

    kinds = {}
    for configs in ("{}", '{"tl.disable_wgmma": True}'):
        path = str(tmp_path / f"gemm_{len(kinds)}.py")
        text = PASS_CONFIGS.replace("CONFIGS", configs)
        modules = {}
        assert worker_build.load_module({"op": "load", "path": path, "text": text}, modules)["diagnostics"] == []
        reply = worker_build.build_kernel(modules[path], {
            "op": "build", "path": path, "factory": "gemm", "args": [], "kwargs": [], "binding": "gemm()",
            "target": "sm_90a", "prim_func": False, "out_idx_span": None, "summary": True})
        assert reply["built"] and reply["diagnostics"] == [], reply["diagnostics"]
        summary = reply["summary"]
        kinds[configs] = (summary["gemms"][0]["kind"], summary["pipelines"][0]["warp_specialized"])
    assert kinds == {"{}": ("wgmma", True), '{"tl.disable_wgmma": True}': ("mma", False)}


def test_loading_runs_the_definitions_inside_an_if_but_not_its_loops_or_calls(tmp_path):
    """Issue 16: a module-level ``if`` ran whole, so a benchmark loop or a kernel launch inside it
    hung the checker; now ``if``/``try`` keep only their definitions, at any depth."""
    from tilelang_lsp import worker_build

    path = str(tmp_path / "guarded.py")
    text = ("import time\n"
            "if True:\n"
            "    while True:\n"
            "        time.sleep(1)\n"
            "    print('a script line')\n"
            "    LIMIT = 4\n"
            "    try:\n"
            "        import not_a_module_anywhere\n"
            "    except ImportError:\n"
            "        FALLBACK = 'yes'\n"
            "        time.sleep(3600)\n"
            "else:\n"
            "    LIMIT = 8\n")
    modules = {}
    reply = worker_build.load_module({"op": "load", "path": path, "text": text}, modules)
    assert reply["diagnostics"] == [] and reply["hung"] is None
    assert modules[path].LIMIT == 4 and modules[path].FALLBACK == "yes"
