"""The attention backward's schedules against torch: the default (line-staged dQ atomics, on since
session 27), the in-place packed atomics (``tl.enable_atomic_line_staging`` false), the opt-in
loop-back barrier at the loop head (``tl.enable_loop_head_barrier``) alone and with staging,
through upstream's own examples (their ``main`` asserts O, dQ, dK, dV and dsinks against torch's
autograd) at small shapes. The keys reach the examples' ``@tilelang.jit`` kernels through
``TILELANG_PASS_CONFIGS``; tests/transform/test_loop_back_barrier.py and
test_atomic_line_staging.py check the generated code on CPU."""

import json
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # tests/: upstream_paths
from upstream_paths import examples as upstream_examples  # noqa: E402

CONFIGS = {
    "head_barrier": {"tl.enable_loop_head_barrier": True},
    "default": {},
    "in_place": {"tl.enable_atomic_line_staging": False},
    "both": {"tl.enable_loop_head_barrier": True, "tl.enable_atomic_line_staging": True},
}
CASES = {   # upstream module -> main's keyword arguments (small shapes)
    ("flash_attention", "example_mha_bwd_bshd"): dict(BATCH=1, H=4, N_CTX=256, D_HEAD=64, causal=False),
    ("flash_attention", "example_mha_bwd_bhsd"): dict(BATCH=1, H=4, N_CTX=256, D_HEAD=64, causal=True),
    ("attention_sink", "example_gqa_sink_bwd_bhsd"): dict(BATCH=1, H=8, N_CTX=256, D_HEAD=64, groups=2),
    ("attention_sink", "example_mha_sink_bwd_bhsd"): dict(BATCH=1, H=4, N_CTX=256, D_HEAD=64, window_size=128),
}


def run_example(folder: str, module: str, **kwargs) -> None:
    base = upstream_examples(folder)
    if base is None or not (base / f"{module}.py").is_file():
        pytest.skip(f"upstream's examples/{folder}/{module}.py not found")
    sys.path.insert(0, str(base))
    try:
        __import__(module).main(**kwargs)
    finally:
        sys.path.remove(str(base))


@pytest.mark.parametrize("case", list(CASES), ids=lambda c: c[1])
@pytest.mark.parametrize("name", list(CONFIGS))
def test_backward_matches_torch(monkeypatch, name, case):
    monkeypatch.setenv("TILELANG_PASS_CONFIGS", json.dumps(CONFIGS[name]))
    run_example(*case, **CASES[case])
