"""Upstream's examples/iket on a GPU: each example's kernel, compiled inside ``iket.session()``
(with and without runtime payloads), runs without the IKET runtime, computes the right result
and carries the instrumentation; and each example's ``main()`` runs as upstream's runner does.
CPU side: tests/test_iket.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
from upstream_paths import examples as upstream_examples  # noqa: E402

EXAMPLES = upstream_examples("iket")
needs_examples = pytest.mark.skipif(EXAMPLES is None, reason="upstream's examples/iket is not here")


def _example(name):
    sys.path.insert(0, str(EXAMPLES))
    saved, sys.dont_write_bytecode = sys.dont_write_bytecode, True   # never write into the upstream copy
    try:
        return __import__(name)
    finally:
        sys.dont_write_bytecode = saved
        sys.path.remove(str(EXAMPLES))


def _inputs(name, n):
    a = torch.arange(n, device="cuda", dtype=torch.float32)
    if name == "minimal":
        b = torch.full((n,), 2.0, device="cuda", dtype=torch.float32)
        return (a, b), a + b
    if name == "all_features":
        b = torch.full((n,), 3.0, device="cuda", dtype=torch.float32)
        scale = torch.tensor([0.5], device="cuda", dtype=torch.float32)
        return (a, b, scale), (a + b) * 0.5
    return (a,), a + 1.0


_FACTORIES = {"minimal": "elementwise_add_with_iket", "all_features": "add_scale_with_iket",
              "payload_minimal": "payload_mark_kernel"}


@needs_examples
@pytest.mark.parametrize("runtime_payloads", [False, True])
@pytest.mark.parametrize("name", sorted(_FACTORIES))
def test_instrumented_example_kernel_runs(name, runtime_payloads, tmp_path):
    import tilelang
    from tilelang.tools.cuda import iket

    module = _example(name)
    with iket.session(output_dir=tmp_path, runtime_payloads=runtime_payloads):
        program = getattr(module, _FACTORIES[name])(module.N)
        kernel = tilelang.compile(program, out_idx=-1, target="cuda", execution_backend="cython")
    args, expected = _inputs(name, module.N)
    out = kernel(*args)
    torch.cuda.synchronize()
    torch.testing.assert_close(out, expected)
    source = kernel.get_kernel_source()
    assert "__iket_meta_info" in source and "TL_IKET_EVENT" in source
    assert ("tl_iket_event_payload<ID>((unsigned int)(VALUE))" in source) == runtime_payloads
    # a second launch after the session is over still works (nothing global was left behind)
    out2 = kernel(*args)
    torch.cuda.synchronize()
    torch.testing.assert_close(out2, expected)


@needs_examples
def test_uninstrumented_kernel_runs_outside_a_session():
    import tilelang

    module = _example("all_features")
    kernel = tilelang.compile(module.add_scale_with_iket(module.N), out_idx=-1, target="cuda")
    args, expected = _inputs("all_features", module.N)
    torch.testing.assert_close(kernel(*args), expected)
    assert "__iket_meta_info" not in kernel.get_kernel_source()


@needs_examples
@pytest.mark.parametrize("name,argv", [("minimal", []), ("all_features", []),
                                       ("all_features", ["--iket-runtime-payloads"]), ("payload_minimal", [])])
def test_example_main(name, argv, tmp_path):
    env = dict(os.environ, TL_IKET_OUTPUT_DIR=str(tmp_path), TILELANG_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONDONTWRITEBYTECODE="1")
    env.pop("TL_IKET_SOURCE_OUT", None)
    code = f"import sys; sys.argv = ['{name}.py'] + {argv!r}; import {name} as m; m.main()"
    proc = subprocess.run([sys.executable, "-c", code], cwd=EXAMPLES, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    if name != "payload_minimal":
        assert "instrumented=True" in proc.stdout
    assert "run ok" in proc.stdout
    assert list(tmp_path.glob("*.cu"))
