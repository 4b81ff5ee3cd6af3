"""A warp-specialised block of one consumer warpgroup that runs alone on its SM (a constant grid
of at most one block per SM) is declared ``__launch_bounds__(256, 1)`` and its producer warpgroup
gives its registers to the consumer (setmaxnreg 24 / 240): ``warp_specialize.plan_single_wave``.
Grids of more blocks than SMs and kernels with a register limit of their own keep ptxas's count."""

import shutil
import sys
from pathlib import Path

import pytest
from tvm import tirx

import tilelang
from tilelang.language.builtins import MIN_BLOCKS_ATTR
from tilelang.transform import smem_plan

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import bench_launch  # noqa: E402

SM90 = "cuda -arch=sm_90a"


def _attention(B=2, H=4, S=512, D=64, min_blocks=None):
    """bench_launch's small attention (one stage, 64x64 tiles, 128 threads; B2 H4 S512 D64: 64
    blocks), with ``T.annotate_min_blocks_per_sm(min_blocks)`` over the kernel body if given."""
    func = bench_launch.build_kernels()[2].get_prim_func(B, H, S, D)
    if min_blocks is None:
        return func

    def wrap(stmt):   # the annotation's attribute statement inside the innermost launch binding
        if isinstance(stmt.body, tirx.AttrStmt) and stmt.body.attr_key == "thread_extent":
            return tirx.AttrStmt(stmt.node, stmt.attr_key, stmt.value, wrap(stmt.body))
        inner = tirx.AttrStmt(tirx.IntImm("int32", 0), MIN_BLOCKS_ATTR, tirx.IntImm("int32", min_blocks), stmt.body)
        return tirx.AttrStmt(stmt.node, stmt.attr_key, stmt.value, inner)
    return func.with_body(wrap(func.body))


def source(func, **configs):
    return tilelang.compile(func, target=SM90, pass_configs=configs).get_kernel_source()


def _roles(src):
    """(producer branch, consumer branch) of the role split."""
    body = src[src.index("__global__ void __launch_bounds__"):]
    split = body.index("if (128 <= ((int)threadIdx.x)) {")
    other = body.index("} else {", split)
    return body[split:other], body[other:]


def test_one_wave_block_gives_the_producer_registers_to_the_consumer():
    src = source(_attention())
    assert src.count("__launch_bounds__(256, 1)") == 2         # declaration and definition
    producer, consumer = _roles(src)
    # each role's first statement; nothing else touches the registers
    assert producer.split("\n")[1].strip() == "tl::setmaxnreg_dec<24>();"
    assert consumer.split("\n")[1].strip() == "tl::setmaxnreg_inc<240>();"
    assert src.count("setmaxnreg") == 2


@pytest.mark.parametrize("case", ["many_waves", "key_off", "own_limit"])
def test_other_blocks_keep_ptxas_registers(case):
    if case == "many_waves":          # 512 blocks: a second block per SM hides the first's waits
        func, configs = _attention(S=4096), {}
    elif case == "key_off":
        func, configs = _attention(), {"tl.disable_single_wave_setmaxnreg": True}
    else:                             # the kernel fixes its registers itself
        func, configs = _attention(min_blocks=2), {}
    src = source(func, **configs)
    assert "setmaxnreg" not in src
    assert "__launch_bounds__(256, 1)" not in src
    if case == "own_limit":           # (an annotation wrapping the loop stopped warp specialisation
        assert "__launch_bounds__(256, 2)" in src    # with an internal error before)
    assert "tl::tma_load" in src     # still warp-specialised


def test_top_level_statements_look_inside_an_annotation():
    a, b = (tirx.Evaluate(tirx.IntImm("int32", i)) for i in (1, 2))
    body = tirx.AttrStmt(tirx.IntImm("int32", 0), MIN_BLOCKS_ATTR, tirx.IntImm("int32", 2), tirx.SeqStmt([a, b]))
    c = tirx.Evaluate(tirx.IntImm("int32", 3))
    top = smem_plan.top_level(tirx.SeqStmt([c, body]))
    assert len(top) == 3 and all(x.same_as(y) for x, y in zip(top, (c, a, b)))


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_one_wave_block_compiles_without_spills():
    from tilelang.jit import nvcc

    info = next(iter(nvcc.ptxas_info(source(_attention()), "sm_90a", ["--use_fast_math"]).values()))
    assert info.spill_stores == 0 and info.spill_loads == 0
    assert info.registers == 240      # the consumer's budget (ptxas reports the largest)
