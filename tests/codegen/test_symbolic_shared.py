"""Shared buffers of run-time extent (``T.alloc_shared((m, N))`` over a symbolic ``m``, upstream
issue #1238): they take bytes after every static tile (``Lowerer._plan_tail``), the kernel's
dynamic shared memory is an expression the launch evaluates per call (``artifact.dynamic_smem``),
and a ``T.copy`` of an unbounded run-time extent runs as a flat chunked ``T.Parallel``
(``kernel.expand_unbounded_copies``). What needs a compile-time extent is a located TL0002."""

import re
import shutil

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.analysis import CheckContext, check
from tilelang.artifact import parse_int_expr
from tilelang.diagnostics.errors import TileLangCompileError
from tilelang.jit import nvcc
from tilelang.jit.adapter_args import ArgPlan

SM90, SM80 = "cuda -arch=sm_90a", "cuda -arch=sm_80"
N = 256


def roundtrip():
    m = T.dynamic("m")

    @T.prim_func
    def main(A: T.Tensor((m, N), "float16"), B: T.Tensor((m, N), "float16")):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((m, N), "float16")
            T.copy(A[0:m, :], s)
            T.copy(s, B[0:m, :])

    return main


def behind_a_static_tile():
    """A static tile and a reduction first, then the run-time buffer; a T.Parallel over it."""
    n = T.dynamic("n")

    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32"), S: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=128) as _:
            head = T.alloc_shared((128,), "float32")
            acc = T.alloc_fragment((128,), "float32")
            total = T.alloc_fragment((1,), "float32")
            row = T.alloc_shared((n,), "float32")
            T.copy(X[0:128], head)
            T.copy(head, acc)
            T.reduce_sum(acc, total, dim=0)
            T.copy(X[0:n], row)
            for i in T.Parallel(n):
                Y[i] = row[i] * 2.0
            S[0] = total[0]

    return main


@tilelang.jit
def doubled_rows(A, threads: int = 128):
    """Eager style; a 2-D T.Parallel over the run-time tile (flattened, then chunked)."""
    m, n = T.dynamic("m"), T.const("n")
    A: T.Tensor((m, n), T.float32)
    B = T.empty((m, n), T.float32)
    with T.Kernel(1, threads=threads) as _:
        s = T.alloc_shared((m, n), T.float32)
        T.copy(A[0:m, :], s)
        for i, j in T.Parallel(m, n):
            s[i, j] = s[i, j] * 2.0
        T.copy(s, B[0:m, :])
    return B


def test_a_2d_parallel_over_a_run_time_tile_is_chunked():
    art = doubled_rows.compile(n=64).artifact
    assert _smem(art, m=10) == 10 * 64 * 4
    assert "j_flat_chunk < (((m * 64) + 127) >> 7)" in art.source
    assert "smem)[((j_flat_chunk * 128) + ((int)threadIdx.x))] = (((float*)smem)[" in art.source
    if shutil.which("nvcc"):
        nvcc.compile_cubin(art.source, art.arch, art.compile_flags)


def _up(nbytes):
    return -(-nbytes // 128) * 128


def _smem(art, **values):
    tree = parse_int_expr(art.dynamic_smem, set(values))
    return eval(compile(tree, "smem", "eval"), {"__builtins__": {}, "min": min, "max": max}, values)


def test_the_launch_sizes_the_buffer_from_the_symbol():
    art = tilelang.compile(roundtrip(), out_idx=[1], target=SM90).artifact
    assert isinstance(art.dynamic_smem, str) and "m" in art.dynamic_smem
    assert _smem(art, m=64) == 64 * N * 2 and _smem(art, m=3) == _up(3 * N * 2)
    src = art.source
    assert "extern __shared__" in src and "tl::tma" not in src     # element-wise, chunked by the block


def test_a_run_time_buffer_comes_after_the_static_bytes():
    art = tilelang.compile(behind_a_static_tile(), out_idx=[1, 2], target=SM90).artifact
    start = int(re.search(r"int smem_tail = (\d+);", art.source).group(1))
    assert start >= 128 * 4 and start % 128 == 0    # after `head` (and the reduction's workspace)
    assert _smem(art, n=1000) == start + _up(4000) and _smem(art, n=32) == start + 128
    assert f"+ {start // 4})] = X[" in art.source        # `row` filled at its start, in floats


@pytest.mark.parametrize("target", [SM90, SM80])
@pytest.mark.parametrize("factory", [roundtrip, behind_a_static_tile])
def test_nvcc_compiles(factory, target):
    art = tilelang.compile(factory(), out_idx=[1] if factory is roundtrip else [1, 2], target=target).artifact
    if shutil.which("nvcc") is None:
        pytest.skip("no nvcc")
    nvcc.compile_cubin(art.source, target.split("=")[1], art.compile_flags)


class _Launch:
    def __init__(self):
        self.calls = []

    def __call__(self, *args):
        self.calls.append(args)


def test_each_call_passes_its_own_size():
    art = tilelang.compile(roundtrip(), out_idx=[1], target=SM90).artifact
    launch = _Launch()
    plan = ArgPlan(art, launch=launch, stream=lambda d: 0, device_type="cpu")
    for m in (64, 5):
        plan.entry(torch.zeros(m, N, dtype=torch.float16))
    assert [c[-1] for c in launch.calls] == [64 * N * 2, _up(5 * N * 2)]


def swizzled_operand():
    m = T.dynamic("m")

    @T.prim_func
    def main(A: T.Tensor((m, 64), "float16"), W: T.Tensor((64, 64), "float16"), C: T.Tensor((m, 64), "float32")):
        with T.Kernel(1, threads=128):
            a = T.alloc_shared((m, 64), "float16")
            w = T.alloc_shared((64, 64), "float16")
            c = T.alloc_fragment((64, 64), "float32")
            T.copy(A[0:m, :], a)
            T.copy(W, w)
            T.gemm(a[0:64, :], w, c, clear_accum=True)
            T.copy(c, C[0:64, :])

    return main


def test_a_swizzled_run_time_tile_is_a_located_error():
    with pytest.raises(TileLangCompileError) as e:
        tilelang.compile(swizzled_operand(), out_idx=[2], target=SM90)
    text = str(e.value)
    assert "error[TL0002]: 'a' is allocated with run-time shape [m, 64], but it has a swizzled layout" in text
    assert 'a = T.alloc_shared((m, 64), "float16")' in text


def test_the_checker_reports_it_at_the_allocation():
    found = check(swizzled_operand(), "sm_90a", CheckContext(read_source=lambda f: open(f).read()))
    assert [d.code for d in found] == ["TL0002"]
    line = next(i for i, t in enumerate(open(__file__).read().splitlines(), 1) if 'a = T.alloc_shared((m, 64)' in t)
    assert (found[0].span.line, found[0].span.column) == (line, 17)
    assert check(roundtrip(), "sm_90a") == [] and check(behind_a_static_tile(), "sm_90a") == []


def test_the_hover_counts_the_static_bytes_and_names_the_run_time_ones():
    from tilelang.analysis.summary import summarize
    from tilelang_lsp.hover import budget_line

    assert budget_line(summarize(roundtrip(), "sm_90a")) == (
        "kernel total: s (m x 256 x 2 B), sized at each launch (at most 227 KiB per block on sm_90a)")
    assert budget_line(summarize(behind_a_static_tile(), "sm_90a")).startswith(
        "kernel total: 0.5 KiB + row (n x 4 B), sized at each launch")


def test_the_kernels_first_launch_and_the_launcher_take_the_size(monkeypatch):
    """JITKernel's first launch and KernelLauncher with a fake driver: each launch passes its size
    to cuLaunchKernel, past 48 KiB the function is opted in once, over the device's limit is an
    error naming the size before any launch."""
    import ctypes

    from tilelang.jit import driver
    from tilelang.jit.kernel import JITKernel

    launches, opted = [], []

    class Fake:
        def fast_get_current(self, ptr):
            ptr.contents.value = 7

        def fast_launch(self, func, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
            launches.append(smem)
            return 0

    monkeypatch.setattr(driver, "_driver", Fake())
    monkeypatch.setattr(driver, "func_attribute", lambda f, a: 0)
    monkeypatch.setattr(driver, "device_attribute", lambda d, a: 232448)
    monkeypatch.setattr(driver, "set_max_dynamic_smem", lambda f, n: opted.append(n))
    k = JITKernel(tilelang.compile(roundtrip(), out_idx=[1], target=SM90).artifact)
    plan = k._plan = ArgPlan(k.artifact, launch=k._first_launch, stream=lambda d: 0, device_type="cpu")
    art = k.artifact

    def launcher():
        lw = driver.KernelLauncher(b"", art.name, plan.arg_kinds, art.block, 0, art.arch)
        lw._funcs[-1] = (ctypes.c_void_p(0x99), 7)
        return lw

    monkeypatch.setattr(k, "_get_launcher", launcher)
    for m in (100, 5, 120):
        plan.entry(torch.zeros(m, N, dtype=torch.float16))
    assert launches == [100 * N * 2, _up(5 * N * 2), 120 * N * 2]
    assert opted == [100 * N * 2, 120 * N * 2]
    with pytest.raises(RuntimeError, match=r"512000 B dynamic shared memory .* run-time extent"):
        plan.entry(torch.zeros(1000, N, dtype=torch.float16))
    assert len(launches) == 3
