"""pytest plugin: record a hash of every CUDA source the compiler emits, per test.

    TL_CUDA_HASHES=/tmp/before.txt python -m pytest -p scripts.cuda_hash_plugin tests
    ... change the compiler ...
    TL_CUDA_HASHES=/tmp/after.txt  python -m pytest -p scripts.cuda_hash_plugin tests
    diff /tmp/before.txt /tmp/after.txt

A refactor that must not change code generation is checked this way: every kernel lowered by any
test (examples, language kernels, inline test kernels) gets one line ``nodeid arch name sha256``.
"""

from __future__ import annotations

import hashlib
import os

import pytest

_current = ["<collect>"]
_lines: list = []


def pytest_configure(config):
    from tilelang.engine import pipeline

    for i, (name, run) in enumerate(pipeline.PASSES):
        if name == "emit_cuda":
            def emit(st, _run=run):
                _run(st)
                digest = hashlib.sha256(st.cuda.source.encode()).hexdigest()[:16]
                _lines.append(f"{_current[0]} {st.arch} {st.name} {digest}")
            pipeline.PASSES[i] = (name, emit)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    _current[0] = item.nodeid
    yield
    _current[0] = "<other>"


def pytest_unconfigure(config):
    path = os.environ.get("TL_CUDA_HASHES")
    if path:
        with open(path, "w") as f:
            f.write("\n".join(sorted(_lines)) + "\n")
