"""A warp-specialised loop with two consumer warpgroups stays one tile per block when its fragments
leave a consumer thread too few of its setmaxnreg registers for the persistent loop's own
(``warp_specialize.persistent_plan``: upstream's example_gqa_bwd spilled 36 bytes persistent, none
without); upstream's example_mha_fwd_bhsd, within, stays persistent."""

import importlib
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from upstream_paths import examples  # noqa: E402

from tilelang.transform.kernel import analyze_kernel  # noqa: E402
from tilelang.transform.layout_inference import infer_layouts  # noqa: E402
from tilelang.transform.lower_tile_ops import Lowerer  # noqa: E402
from tilelang.transform.warp_specialize import CONSUMER_REGS, PERSISTENT_REGS  # noqa: E402

FA = examples("flash_attention")
pytestmark = pytest.mark.skipif(FA is None, reason="upstream's examples/flash_attention not found")


def _lowerer(func):
    info = analyze_kernel(func)
    return Lowerer(info, infer_layouts(info, "sm_90a"), {})


def _module(name):
    if str(FA) not in sys.path:
        sys.path.insert(0, str(FA))
    return importlib.import_module(name)


def test_register_tight_backward_keeps_one_tile_per_block():
    m = _module("example_gqa_bwd")
    kernel = m.flashattn_bwd_atomic_add(8, 32, 1024, 192, 128, False, 128, 32, threads=256, num_stages=2, groups=16)
    lw = _lowerer(kernel.prim_func)
    assert lw.ws is not None and lw.ws.persistent is None
    assert lw.layouts.fragment_words() == 232 > CONSUMER_REGS - PERSISTENT_REGS
    assert "232 of a consumer thread's 232 registers" in lw.persistent_why


def test_attention_forward_within_budget_stays_persistent():
    m = _module("example_mha_fwd_bhsd")
    kernel = m.flashattn(8, 32, 4096, 4096, 128, False, block_M=128, block_N=128, num_stages=2, threads=256)
    lw = _lowerer(kernel.prim_func)
    assert lw.ws is not None and lw.ws.persistent is not None
    assert lw.layouts.fragment_words() <= CONSUMER_REGS - PERSISTENT_REGS
