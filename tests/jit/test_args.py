"""Argument validation and packing of JITKernel, on CPU tensors (no GPU needed).

Two kinds of plan are used: a real JITKernel (device_type "cuda"), where a
correct call ends in the clear no-CUDA error on this machine, and an ArgPlan
with device_type="cpu" and a recording launcher, which exercises the whole
fast path (outputs, grid, packed values) on CPU tensors.
"""

import random
import time

import pytest
import torch

from tilelang.jit.adapter_args import ArgPlan
from tilelang.artifact import ArtifactError, KernelArtifact, ParamSpec
from tilelang.jit.kernel import JITKernel

SRC = 'extern "C" __global__ void k() {}'


def vec_add_artifact(dtype="float16", out_idx=(2,)):
    return KernelArtifact(
        name="vec_add", source=SRC,
        params=[ParamSpec("A", "tensor", dtype, ["N"]), ParamSpec("B", "tensor", dtype, ["N"]),
                ParamSpec("C", "tensor", dtype, ["N"])],
        kernel_args=["A", "B", "C", "N"], grid=["(N + 255) // 256", "1", "1"], block=[256, 1, 1],
        dynamic_smem=0, arch="sm_90a", symbols={"N": [0, 0]}, out_idx=list(out_idx))


def gemm_artifact():
    return KernelArtifact(
        name="gemm", source=SRC,
        params=[ParamSpec("A", "tensor", "float16", ["M", "K"]),
                ParamSpec("B", "tensor", "float16", ["K", 64]),
                ParamSpec("C", "tensor", "float32", ["M", 64]),
                ParamSpec("alpha", "scalar", "float32", []),
                ParamSpec("steps", "scalar", "int64", [])],
        kernel_args=["A", "B", "C", "M", "K", "alpha", "steps"],
        grid=["(M + 127) // 128", "1", "1"], block=[128, 1, 1], dynamic_smem=0, arch="sm_90a",
        symbols={"M": [0, 0], "K": [0, 1]}, out_idx=[2])


class Recorder:
    def __init__(self):
        self.calls = []

    def __call__(self, device, gx, gy, gz, stream, values):
        self.calls.append(((gx, gy, gz), stream, values))


def cpu_plan(art):
    rec = Recorder()
    return ArgPlan(art, launch=rec, stream=lambda d: 1234, device_type="cpu"), rec


def h(n, dtype=torch.float16):
    return torch.zeros(n, dtype=dtype)


# ---------------------------------------------------------------- error messages
def test_wrong_count_mentions_out_idx():
    k = JITKernel(vec_add_artifact())
    with pytest.raises(TypeError) as e:
        k(h(8))
    msg = str(e.value)
    assert "takes 3 arguments" in msg and "got 1" in msg
    assert "out_idx=[2]" in msg and "2 inputs" in msg


def test_wrong_count_without_out_idx():
    k = JITKernel(vec_add_artifact(out_idx=()))
    with pytest.raises(TypeError, match=r"takes 3 arguments .* got 2$"):
        k(h(8), h(8))


def test_not_a_tensor():
    k = JITKernel(vec_add_artifact())
    with pytest.raises(TypeError, match=r"parameter 'B' \(#1\) must be a torch.Tensor .*got list"):
        k(h(8), [1, 2])


def test_wrong_dtype_names_parameter_and_both_dtypes():
    k = JITKernel(vec_add_artifact())
    with pytest.raises(TypeError, match=r"'A' \(#0\): expected dtype float16 \(torch.float16\), got torch.float32"):
        k(h(8, torch.float32), h(8))


def test_wrong_ndim():
    k = JITKernel(vec_add_artifact())
    with pytest.raises(ValueError, match=r"'B' \(#1\): expected a 1-d tensor of shape \[N\], got a 2-d"):
        k(h(8), torch.zeros(2, 4, dtype=torch.float16))


def test_concrete_dim_mismatch():
    k = JITKernel(gemm_artifact())
    with pytest.raises(ValueError, match=r"'B' \(#1\): B.shape\[1\] must be 64, got 32"):
        k(h((128, 32)), h((32, 32)), 1.0, 3)


def test_symbol_inconsistency_message():
    k = JITKernel(gemm_artifact())
    a, b = h((1024, 32)), h((32, 64))
    with pytest.raises(ValueError, match=r"M is 1024 from A.shape\[0\] but 1000 from C.shape\[0\]"):
        k(a, b, torch.zeros(1000, 64), 1.0, 3)
    with pytest.raises(ValueError, match=r"K is 32 from A.shape\[1\] but 16 from B.shape\[0\]"):
        k(a, h((16, 64)), 1.0, 3)


def test_positions_in_inputs_only_call():
    k = JITKernel(gemm_artifact())
    with pytest.raises(TypeError, match=r"'alpha' \(#3, argument 2 of this call\) expects a float32 scalar"):
        k(h((4, 8)), h((8, 64)), "x", 3)


def test_scalar_range_and_type():
    k = JITKernel(gemm_artifact())
    with pytest.raises(ValueError, match=r"'steps' \(#4.*out of range for int64"):
        k(h((4, 8)), h((8, 64)), 1.0, 2**63)
    with pytest.raises(TypeError, match=r"'steps'.*expects a int64 scalar, got float"):
        k(h((4, 8)), h((8, 64)), 1.0, 2.5)
    with pytest.raises(ValueError, match=r"'alpha'.*out of range for float32"):
        k(h((4, 8)), h((8, 64)), 1e39, 1)


def test_non_contiguous_rejected():
    k = JITKernel(vec_add_artifact())
    strided = torch.zeros(16, dtype=torch.float16)[::2]
    with pytest.raises(ValueError, match=r"'A' \(#0\): must be contiguous .*\.contiguous\(\)"):
        k(strided, h(8))


def test_declared_strides_checked_and_bound():
    art = KernelArtifact(
        name="t", source=SRC,
        params=[ParamSpec("X", "tensor", "float32", ["M", "N"], ["ldx", 1]),
                ParamSpec("Y", "tensor", "float32", ["M", "N"])],
        kernel_args=["X", "Y", "M", "N", "ldx"], grid=["M", "1", "1"], block=[32, 1, 1],
        dynamic_smem=0, arch="sm_80", symbols={"M": [1, 0], "N": [1, 1]}, out_idx=[])
    plan, rec = cpu_plan(art)
    base = torch.zeros(8, 24)
    x = base[:, :16]  # a row-padded view: strides (24, 1)
    plan.entry(x, torch.zeros(8, 16))
    assert rec.calls[-1][2][2:] == (8, 16, 24)
    with pytest.raises(ValueError, match=r"X.stride\(1\) must be 1, got 2"):
        plan.entry(base[:, ::2], torch.zeros(8, 12))


def test_int32_range_of_scalar_symbol():
    art = KernelArtifact(
        name="fill", source=SRC,
        params=[ParamSpec("X", "tensor", "int32", ["n"]), ParamSpec("n", "scalar", "int64", [])],
        kernel_args=["X", "n"], grid=["(n + 127) // 128", "1", "1"], block=[128, 1, 1],
        dynamic_smem=0, arch="sm_80", symbols={"n": [1, -1]}, out_idx=[])
    plan, rec = cpu_plan(art)
    plan.entry(torch.zeros(5, dtype=torch.int32), 5)
    assert rec.calls[-1][2][1] == 5
    with pytest.raises(ValueError, match=r"n is 5 from X.shape\[0\] but 6 from n \(#1\)"):
        plan.entry(torch.zeros(5, dtype=torch.int32), 6)


def test_output_too_large_for_32_bit_indexing():
    art = KernelArtifact(
        name="outer", source=SRC,
        params=[ParamSpec("a", "tensor", "int8", ["M"]), ParamSpec("b", "tensor", "int8", ["N"]),
                ParamSpec("c", "tensor", "int8", ["M", "N"])],
        kernel_args=["a", "b", "c", "M", "N"], grid=["M", "N", "1"], block=[1, 1, 1],
        dynamic_smem=0, arch="sm_80", symbols={}, out_idx=[2])
    plan, rec = cpu_plan(art)
    big = torch.zeros(2**16, dtype=torch.int8)
    with pytest.raises(ValueError, match=r"output 'c' .* spans 4294967296 elements.*32-bit"):
        plan.entry(big, big)
    assert not rec.calls
    art.index_bits = 64  # a 64-bit-index kernel accepts it (not allocated here: small check only)
    plan64, rec64 = cpu_plan(art)
    plan64.entry(big[:4], big[:8])
    assert rec64.calls[-1][0] == (4, 8, 1)


def test_misaligned_view_rejected():
    plan, _ = cpu_plan(vec_add_artifact(dtype="float32"))
    x = torch.zeros(9)[1:]  # contiguous, but 4 bytes past a 16-byte boundary
    with pytest.raises(ValueError, match=r"'A' \(#0\): data pointer .* not 16-byte aligned.*\.clone\(\)"):
        plan.entry(x, torch.zeros(8))


def test_correct_call_without_gpu_raises_no_cuda():
    k = JITKernel(vec_add_artifact())
    if torch.cuda.is_available():
        with pytest.raises(ValueError, match=r"'A' \(#0\) must be a CUDA tensor, got one on cpu"):
            k(h(8), h(8))
        return
    with pytest.raises(RuntimeError, match=r"^no CUDA device: .*vec_add"):
        k(h(8), h(8))
    with pytest.raises(RuntimeError, match=r"^no CUDA device"):
        k(h(8), h(8), h(8))


def test_inputs_only_call_impossible_when_output_symbol_unbound():
    art = KernelArtifact(
        name="gen", source=SRC,
        params=[ParamSpec("x", "tensor", "float32", ["N"]), ParamSpec("y", "tensor", "float32", ["P"])],
        kernel_args=["x", "y", "N", "P"], grid=["1", "1", "1"], block=[1, 1, 1], dynamic_smem=0,
        arch="sm_80", symbols={}, out_idx=[1])
    k = JITKernel(art)
    with pytest.raises(ValueError, match=r"output 'y' uses symbol 'P', which no input determines"):
        k(torch.zeros(4))


# ---------------------------------------------------------------- the fast path itself
def test_fast_path_allocates_output_and_packs_values():
    plan, rec = cpu_plan(gemm_artifact())
    a, b = h((300, 32)), h((32, 64))
    c = plan.entry(a, b, 0.5, 7)
    assert c.shape == (300, 64) and c.dtype == torch.float32
    grid, stream, values = rec.calls[-1]
    assert grid == (3, 1, 1) and stream == 1234
    assert values == (a.data_ptr(), b.data_ptr(), c.data_ptr(), 300, 32, 0.5, 7)
    assert plan.arg_kinds == ["ptr", "ptr", "ptr", "int32", "int32", "float32", "int64"]


def test_fast_path_all_args_returns_given_outputs():
    plan, rec = cpu_plan(gemm_artifact())
    a, b, c = h((10, 32)), h((32, 64)), torch.zeros(10, 64)
    assert plan.entry(a, b, c, 1.0, 1) is c
    plan2, _ = cpu_plan(vec_add_artifact(out_idx=()))
    assert plan2.entry(h(4), h(4), h(4)) is None


def test_multiple_outputs_returned_as_a_list_as_upstream():
    art = vec_add_artifact(out_idx=(1, 2))
    plan, rec = cpu_plan(art)
    out = plan.entry(h(4))
    assert isinstance(out, list) and len(out) == 2 and out[0].shape == (4,)


def test_empty_or_negative_grid_raises():
    plan, rec = cpu_plan(vec_add_artifact())
    with pytest.raises(ValueError, match=r"has a zero dimension"):
        plan.entry(h(0), h(0))
    assert not rec.calls
    art = KernelArtifact(
        name="neg", source=SRC, params=[ParamSpec("n", "scalar", "int32", [])], kernel_args=["n"],
        grid=["n", "1", "1"], block=[1, 1, 1], dynamic_smem=0, arch="sm_80", symbols={}, out_idx=[])
    plan, rec = cpu_plan(art)
    with pytest.raises(ValueError, match=r"grid \(-3, 1, 1\) .* is negative"):
        plan.entry(-3)
    assert not rec.calls
    with pytest.raises(ValueError, match=r"has a zero dimension"):
        plan.entry(0)
    assert not rec.calls
    # ctypes would silently truncate an oversized grid dim: it must be an error instead
    art.grid = ["n * 4", "n", "1"]
    plan, rec = cpu_plan(art)
    with pytest.raises(ValueError, match=r"grid \(4294967296, 1073741824, 1\) .* exceeds CUDA's limits"):
        plan.entry(2**30)
    art.grid = ["n * 2", "1", "1"]
    plan, rec = cpu_plan(art)
    plan.entry(2**30 - 1)
    assert rec.calls[-1][0] == (2**31 - 2, 1, 1)


def test_persistent_grid_is_sized_by_the_device_sm_count(monkeypatch):
    """A persistent kernel's grid names NUM_SMS: min(tiles, multiprocessors of the device)."""
    from tilelang.jit import adapter_args

    art = KernelArtifact(
        name="pers", source=SRC, params=[ParamSpec("n", "scalar", "int32", [])], kernel_args=["n"],
        grid=["min(n * 4, NUM_SMS)", "1", "1"], block=[384, 1, 1], dynamic_smem=0, arch="sm_90a",
        symbols={}, out_idx=[]).check()
    plan, rec = cpu_plan(art)
    plan.entry(1000)
    assert rec.calls[-1][0] == (132, 1, 1)          # device -1 of the CPU plan counts as an H200
    plan.entry(5)
    assert rec.calls[-1][0] == (20, 1, 1)           # fewer tiles than SMs: one block per tile
    monkeypatch.setitem(adapter_args._SM_COUNTS, -1, 7)
    plan.entry(1000)
    assert rec.calls[-1][0] == (7, 1, 1)
    art.grid = ["min(n * 4, NUM_SM)", "1", "1"]
    with pytest.raises(ArtifactError, match="unknown name"):
        art.check()


def _mutations(valid: list) -> list:
    """Plausible wrong argument lists derived from a valid one."""
    bad_values = [None, 1, 2.5, "s", torch.zeros(3), torch.zeros(2, 3, dtype=torch.float16),
                  torch.zeros(4, 64, dtype=torch.float16), torch.zeros(4, 64), torch.zeros(4, 32, dtype=torch.float16),
                  torch.zeros(8, 64, dtype=torch.float16).t(), torch.zeros(4, 64, dtype=torch.float16)[:, :32],
                  torch.zeros(129, dtype=torch.float32)[1:].view(4, 32), -1, 2**40, True]
    out = []
    for i in range(len(valid)):
        for v in bad_values:
            args = list(valid)
            args[i] = v
            out.append(args)
        out.append(valid[:i] + valid[i + 1:])
    return out


def test_fast_path_and_diagnoser_agree():
    """Every argument list the fast path rejects gets a specific error from the diagnoser,
    and every list it accepts passes the diagnoser."""
    plan, rec = cpu_plan(gemm_artifact())
    a, b, c = h((4, 32)), h((32, 64)), torch.zeros(4, 64)
    random.seed(0)
    cases = _mutations([a, b, 1.0, 3]) + _mutations([a, b, c, 1.0, 3])
    accepted = 0
    for args in cases:
        try:
            plan.entry(*args)
        except (TypeError, ValueError) as e:
            assert "internal error" not in str(e)
            continue
        accepted += 1
        assert plan.diagnose(args) is None
    assert accepted > 0 and accepted < len(cases)


def test_generated_source_contains_no_artifact_names():
    plan, _ = cpu_plan(gemm_artifact())
    assert "alpha" not in plan.source and "steps" not in plan.source


def test_fast_path_overhead_is_small():
    """Per-call Python overhead of validation + packing (launch mocked), printed for the record."""
    plan, _ = cpu_plan(gemm_artifact())
    plan.set_launch(lambda *a: None)
    a, b, c = h((256, 32)), h((32, 64)), torch.zeros(256, 64)
    n = 20000
    for _ in range(1000):
        plan.entry(a, b, c, 1.0, 3)
    t0 = time.perf_counter()
    for _ in range(n):
        plan.entry(a, b, c, 1.0, 3)
    per_call = (time.perf_counter() - t0) / n * 1e6
    print(f"\nargument fast path: {per_call:.2f} us per call (3 tensors, 2 scalars)")
    assert per_call < 50  # generous: catches accidental slow paths, not machine noise


def test_kernel_introspection_without_gpu(tmp_path):
    k = JITKernel(gemm_artifact())
    assert k.get_kernel_source() == SRC
    assert k.out_idx == [2] and [p.name for p in k.params] == ["A", "B", "C", "alpha", "steps"]
    k.export_sources(tmp_path / "k.cu", tmp_path / "host.txt")
    assert (tmp_path / "k.cu").read_text() == SRC
    host = (tmp_path / "host.txt").read_text()
    assert "grid: ((M + 127) // 128, 1, 1)" in host and "#2 C: float32[M, 64]" in host and "(output)" in host
    assert "gemm(" in repr(k)


def test_declared_kernel_arg_types_decide_the_abi():
    art = vec_add_artifact()
    art.kernel_arg_types = ["ptr", "ptr", "ptr", "int64"]  # e.g. an int64 shape var in the signature
    plan, rec = cpu_plan(art)
    assert plan.arg_kinds == ["ptr", "ptr", "ptr", "int64"]
    plan.entry(h(8), h(8))
    assert rec.calls[-1][2][3] == 8
    art.kernel_arg_types = ["ptr", "int32", "ptr", "int64"]
    with pytest.raises(ArtifactError, match="kernel argument 'B' cannot be passed as 'int32'"):
        cpu_plan(art)


def test_symbol_range_follows_its_declared_type():
    art = KernelArtifact(
        name="r", source=SRC,
        params=[ParamSpec("x", "tensor", "int8", ["n"]), ParamSpec("s", "scalar", "int64", [])],
        kernel_args=["x", "n", "s"], grid=["1", "1", "1"], block=[1, 1, 1], dynamic_smem=0, arch="sm_80",
        symbols={}, out_idx=[], kernel_arg_types=["ptr", "uint16", "int8"])
    plan, rec = cpu_plan(art)
    plan.entry(torch.zeros(300, dtype=torch.int8), -128)
    assert rec.calls[-1][2][1:] == (300, -128)
    with pytest.raises(ValueError, match=r"symbol n = 70000 \(from x.shape\[0\]\) is outside \[0, 65535\]"):
        plan.entry(torch.zeros(70000, dtype=torch.int8), 0)
    with pytest.raises(ValueError, match=r"'s' \(#1\): value 200 is out of range for int64 as the kernel takes it \(\[-128, 127\]\)"):
        plan.entry(torch.zeros(3, dtype=torch.int8), 200)


def test_float_scalar_listed_in_symbols_is_just_a_param():
    """The compiler lists every scalar param in ``symbols``; a float one is not a symbol."""
    art = gemm_artifact()
    art.symbols = {**art.symbols, "alpha": [3, -1], "steps": [4, -1]}
    art.grid = ["(M + 127) // 128", "steps", "1"]
    plan, rec = cpu_plan(art)
    plan.entry(h((4, 8)), h((8, 64)), 0.25, 2)
    grid, _, values = rec.calls[-1]
    assert grid == (1, 2, 1) and values[-2:] == (0.25, 2)


def test_none_is_a_null_pointer_for_a_tensor_of_constant_shape():
    art = KernelArtifact(
        name="k", source=SRC, params=[ParamSpec("A", "tensor", "float16", ["n"]),
                                      ParamSpec("Bias", "tensor", "float16", [4])],
        kernel_args=["A", "Bias"], grid=["1", "1", "1"], block=[1, 1, 1], dynamic_smem=0, arch="sm_80",
        symbols={"n": [0, 0]}, out_idx=[])
    plan, rec = cpu_plan(art)
    plan.entry(h(3), None)
    assert rec.calls[-1][-1][1] == 0              # upstream's nullptr
    plan.entry(h(3), h(4))
    assert rec.calls[-1][-1][1] != 0
    plan.entry(None, h(4))                        # n is A's alone (and not the grid's): 0 then
    assert rec.calls[-1][-1][0] == 0
    with pytest.raises(ValueError, match=r"Bias.shape\[0\] must be 4, got 5"):
        plan.entry(h(3), h(5))


def test_none_for_a_tensor_whose_symbols_another_argument_binds():
    """TileKernels' optional tensors: ``mask: (n,)`` beside ``x: (n,)`` may be None (a null
    pointer) when ``x`` binds ``n``; not when nothing else does."""
    art = KernelArtifact(
        name="k", source=SRC, params=[ParamSpec("mask", "tensor", "bool", ["n"]),
                                      ParamSpec("x", "tensor", "float32", ["n"]),
                                      ParamSpec("y", "tensor", "float32", ["n", "m"])],
        kernel_args=["mask", "x", "y", "n", "m"], grid=["(n + 127) // 128", "1", "1"], block=[128, 1, 1],
        dynamic_smem=0, arch="sm_80", symbols={"n": [0, 0], "m": [2, 1]}, out_idx=[])
    plan, rec = cpu_plan(art)
    plan.entry(None, torch.zeros(300), torch.zeros(300, 2))
    grid, _, values = rec.calls[-1]
    assert grid == (3, 1, 1) and values[0] == 0 and values[-2:] == (300, 2)
    plan.entry(torch.zeros(300, dtype=torch.bool), torch.zeros(300), torch.zeros(300, 2))
    assert rec.calls[-1][-1][0] != 0
    with pytest.raises(ValueError, match=r"mask.shape\[0\]"):          # a mask of the wrong length
        plan.entry(torch.zeros(7, dtype=torch.bool), torch.zeros(300), torch.zeros(300, 2))
    plan.entry(None, None, torch.zeros(300, 2))          # y binds n too
    assert rec.calls[-1][-1][:2] == (0, 0)
    with pytest.raises(TypeError, match=r"'mask' \(#0\) must be a torch.Tensor"):   # nothing binds n
        plan.entry(None, None, None)


def test_none_for_a_strided_tensor_with_symbols_of_its_own():
    """A null tensor's own symbols (a stride only it has) are 0; a tensor passed there binds them."""
    art = KernelArtifact(
        name="k", source=SRC, params=[ParamSpec("x", "tensor", "float32", ["n"]),
                                      ParamSpec("out2", "tensor", "int64", ["n", 8], strides=["ld", 1])],
        kernel_args=["x", "out2", "n", "ld"], grid=["(n + 127) // 128", "1", "1"], block=[128, 1, 1],
        dynamic_smem=0, arch="sm_80", symbols={"n": [0, 0]}, out_idx=[])
    plan, rec = cpu_plan(art)
    plan.entry(torch.zeros(300), None)
    assert rec.calls[-1][-1][1:] == (0, 300, 0)
    plan.entry(torch.zeros(300), torch.zeros(300, 16, dtype=torch.int64)[:, :8])
    assert rec.calls[-1][-1][2:] == (300, 16)
