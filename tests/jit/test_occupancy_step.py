"""The occupancy step (``tl.enable_occupancy_step``, on by default): a kernel whose registers alone
keep one more block off an SM is compiled again under ``__launch_bounds__(T, blocks + 1)``, and
that build kept only if ptxas fits it without spilling (``tilelang.jit.occupancy``,
``nvcc.compile_artifact``). The arithmetic is checked against what Nsight Compute reported on an
H100 for upstream's gdn chunk_scaled_dot_kkt (84 registers, 5 blocks an SM; session 47)."""

import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import tilelang
import tilelang.language as T
from tilelang import targets
from tilelang.jit import nvcc, occupancy

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from upstream_paths import examples  # noqa: E402

GDN = examples("gdn")
H100 = targets.gpu_spec("sm_90a")
SRC = ('extern "C" __global__ void __launch_bounds__(128) k(float* A);\n'
       'extern "C" __global__ void __launch_bounds__(128) k(float* A) {}\n')

try:
    nvcc.find_nvcc()
    HAVE_NVCC = True
except Exception:  # noqa: BLE001
    HAVE_NVCC = False


def test_blocks_per_sm_follows_the_occupancy_calculator():
    # (ncu, H100: 84 registers x 128 threads -> "Block Limit Registers 5", 9 KiB -> "Shared Mem 10")
    assert occupancy.blocks_per_sm(84, 128, 9216, H100) == (5, 5)
    assert occupancy.blocks_per_sm(80, 128, 9216, H100) == (6, 6)
    # 91 registers x 256 threads: 2 by registers; 24 KiB of shared memory would allow 8
    assert occupancy.blocks_per_sm(91, 256, 24624, H100) == (2, 2)
    # shared memory binds first: 100 KiB a block
    assert occupancy.blocks_per_sm(32, 128, 100 * 1024, H100) == (2, 16)


def test_step_asks_for_one_block_more_within_ten_percent_of_the_registers():
    assert occupancy.step(SRC, [128, 1, 1], ["512", "32", "1"], 9216, "sm_90a", 84, 0) == (6, 80)
    assert occupancy.bounded(SRC, 6).count("__launch_bounds__(128, 6)") == 2


@pytest.mark.parametrize("why, kw", [
    ("one wave", dict(grid=["132", "1", "1"])),
    ("a grid of run-time extent", dict(grid=["(n + 63) // 64", "1", "1"])),
    ("spills already", dict(spills=8)),
    ("shared memory binds", dict(smem=100 * 1024, regs=200)),
    ("more than 10 % of the registers", dict(regs=96, threads=256)),
    ("a run-time shared memory size", dict(smem="m * 4")),
])
def test_step_leaves_alone(why, kw):
    args = dict(grid=["512", "32", "1"], smem=9216, regs=84, spills=0, threads=128)
    args.update(kw)
    src = SRC.replace("(128)", f"({args['threads']})")
    assert occupancy.step(src, [args["threads"], 1, 1], args["grid"], args["smem"], "sm_90a", args["regs"],
                          args["spills"]) is None, why


def test_a_kernel_with_a_bound_of_its_own_is_left_alone():
    src = SRC.replace("__launch_bounds__(128)", "__launch_bounds__(128, 1)")
    assert occupancy.step(src, [128, 1, 1], ["512", "32", "1"], 9216, "sm_90a", 84, 0) is None


@dataclass
class _Art:
    source: str = SRC
    arch: str = "sm_90a"
    compile_flags: tuple = ()
    block: tuple = (128, 1, 1)
    grid: tuple = ("512", "32", "1")
    dynamic_smem: int = 9216
    occupancy_step: bool = True


def _fake_nvcc(monkeypatch, second):
    """nvcc answering, in ptxas's -v log, 84 registers for the plain build and ``second`` (registers,
    spill bytes, stack bytes) for the bounded one."""
    builds = []

    def fake(source, mode, arch, flags, include_dirs):
        builds.append(source)
        assert "-v" in flags
        regs, spills, stack = (84, 0, 0) if ", 6)" not in source else second
        log = (f"ptxas info    : Compiling entry function 'k' for '{arch}'\n"
               f"ptxas info    : Function properties for k\n"
               f"    {stack} bytes stack frame, {spills} bytes spill stores, {spills} bytes spill loads\n"
               f"ptxas info    : Used {regs} registers, used 1 barriers")
        nvcc._LAST_LOG.text = log
        return source.encode(), log

    monkeypatch.setattr(nvcc, "_run_nvcc", fake)
    monkeypatch.setattr(nvcc, "_nvrtc_module", lambda: None)
    return builds


def test_the_bounded_build_is_kept_when_ptxas_fits_it(monkeypatch):
    builds = _fake_nvcc(monkeypatch, (80, 0, 0))
    art = _Art()
    cubin = nvcc.compile_artifact(art)
    assert len(builds) == 2 and "__launch_bounds__(128, 6)" in art.source and cubin == art.source.encode()


@pytest.mark.parametrize("second", [(80, 16, 16), (88, 0, 0)])
def test_the_first_build_is_kept_when_the_bounded_one_spills_or_misses(monkeypatch, second):
    builds = _fake_nvcc(monkeypatch, second)
    art = _Art()
    cubin = nvcc.compile_artifact(art)
    assert len(builds) == 2 and art.source == SRC and cubin == SRC.encode()


def test_the_first_build_is_kept_when_ptxas_cannot_fit_the_bound(monkeypatch):
    """ptxas stops on an instruction that needs more registers than the bound leaves ("Insufficient
    registers (40) to compile instruction": a 64x32 convolution tile of upstream's autotune list
    failed to compile that way); the kernel is the first build, not an error."""
    builds = _fake_nvcc(monkeypatch, (80, 0, 0))
    plain = nvcc._run_nvcc

    def fake(source, mode, arch, flags, include_dirs):
        if ", 6)" in source:
            builds.append(source)
            raise nvcc.NVCCError("nvcc failed (exit status 255)\n  ptxas fatal   : (C7602) Insufficient registers (40)")
        return plain(source, mode, arch, flags, include_dirs)

    monkeypatch.setattr(nvcc, "_run_nvcc", fake)
    art = _Art()
    cubin = nvcc.compile_artifact(art)
    assert len(builds) == 2 and art.source == SRC and cubin == SRC.encode()


def test_a_replaced_compile_cubin_is_the_one_build(monkeypatch):
    """(tests and tools that stand in for nvcc.compile_cubin: no ptxas log, no second build)"""
    calls = []
    monkeypatch.setattr(nvcc, "compile_cubin", lambda *a, **k: calls.append(a) or b"cubin")
    art = _Art()
    assert nvcc.compile_artifact(art) == b"cubin" and art.source == SRC and len(calls) == 1


def test_off_compiles_once_as_written(monkeypatch):
    calls = []
    monkeypatch.setattr(nvcc, "compile_cubin", lambda *a, **k: calls.append(a) or b"cubin")
    art = _Art(occupancy_step=False)
    assert nvcc.compile_artifact(art) == b"cubin" and art.source == SRC and len(calls) == 1


def test_lowering_records_the_key():
    @T.prim_func
    def main(A: T.Tensor((1024,), "float32")):
        with T.Kernel(8, threads=128) as bx:
            for i in T.Parallel(128):
                A[bx * 128 + i] = 1.0

    assert tilelang.lower(main, "sm_90a").occupancy_step
    assert not tilelang.lower(main, "sm_90a", pass_configs={"tl.enable_occupancy_step": False}).occupancy_step


def _kkt():
    spec = importlib.util.spec_from_file_location("kkt_s47", GDN / "example_chunk_scaled_dot_kkt.py")
    m = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(GDN))
    try:
        spec.loader.exec_module(m)
    finally:
        sys.path.pop(0)
    return m


@pytest.mark.skipif(not HAVE_NVCC or GDN is None, reason="needs nvcc and upstream's examples")
@pytest.mark.parametrize("on", [True, False])
def test_upstream_kkt_gets_six_blocks_an_sm(on, tmp_path, monkeypatch):
    import tvm

    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))
    m = _kkt()
    with tvm.transform.PassContext(config={"tl.enable_occupancy_step": on}):
        k = m.tilelang_chunk_scaled_dot_kkt_fwd(1, 32768, 32, 128, 64, T.bfloat16, T.bfloat16, T.float32, True, 64,
                                                64, 128, 0)
    src = k.get_kernel_source()
    assert ("__launch_bounds__(128, 6)" in src) == on
    (info,) = nvcc.ptxas_info(src, "sm_90a", k.artifact.compile_flags).values()
    assert info.spill_stores == 0 and (info.registers <= 80 if on else info.registers > 80)


def test_the_compile_lens_reports_the_build_the_compile_keeps(monkeypatch):
    """The LSP Compile lens shows the registers of the kernel as compiled: the bounded build where
    the occupancy step keeps it (its PTX assembled by ptxas a second time), the first one otherwise."""
    from tilelang_lsp import worker_tools

    def usage(regs, spills=0):
        info = nvcc.PtxasInfo(function="k", arch="sm_90a")
        info.registers, info.spill_stores, info.spill_loads, info.stack_frame = regs, spills, spills, 0
        return info

    for second, kept in ((usage(80), True), (usage(80, 8), False)):
        monkeypatch.setattr(nvcc, "compile_ptx", lambda source, *a, **k: "ptx of " + source)
        monkeypatch.setattr(worker_tools, "ptxas_usage", lambda ptx, *a, **k: {"k": second})
        art, times = _Art(), {}
        art.name = "k"
        ptx, got, bound = worker_tools._occupancy_step(art, "ptx", usage(84), times)
        if kept:
            assert bound == 6 and got.registers == 80 and "__launch_bounds__(128, 6)" in art.source
            assert ptx.startswith("ptx of ") and "occupancy_ms" in times
        else:
            assert bound is None and got.registers == 84 and art.source == SRC and ptx == "ptx"
