"""Buffer dimensions that are integer expressions of symbols (``T.empty([m * 2])``): the artifact
keeps the expression, the argument binder checks inputs against it and sizes outputs with it."""

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.artifact import ArtifactError, KernelArtifact, ParamSpec
from tilelang.jit.adapter_args import ArgPlan


@tilelang.jit
def doubled(A):
    m = T.dynamic("m")
    A: T.Tensor[[m], T.float32]
    B = T.empty([m * 2], T.float32)
    with T.Kernel(1, threads=1):
        for i in T.serial(m):
            B[i * 2] = A[i] + 1.0
    return B


def _plan(art):
    calls = []
    plan = ArgPlan(art, launch=lambda *a: calls.append(a), device_type="cpu", stream=lambda d: 0)
    return plan, calls


def test_expression_dimension_is_kept_and_sizes_the_output():
    a = torch.arange(37, dtype=torch.float32)
    art = doubled.compile(a).artifact
    assert art.params[1].shape == ["m * 2"]
    assert art.all_symbols() == ["m"]
    plan, calls = _plan(art)
    out = plan.entry(a)
    assert out.shape == (74,)
    assert calls and calls[0][-1][-1] == 37   # the symbol reaches the kernel


def test_expression_dimension_is_checked_on_inputs():
    art = doubled.compile(torch.zeros(3)).artifact
    plan, _ = _plan(art)
    plan.entry(torch.zeros(3), torch.zeros(6))
    with pytest.raises(ValueError, match=r"B.shape\[0\] must be m \* 2 = 6, got 7"):
        plan.entry(torch.zeros(3), torch.zeros(7))


def test_artifact_rejects_expression_of_unknown_symbol():
    art = KernelArtifact(name="k", source="", params=[ParamSpec("A", "tensor", "float32", ["n + 1"])],
                         kernel_args=["A"], grid=["1", "1", "1"], block=[1, 1, 1], dynamic_smem=0, arch="sm_90a",
                         symbols={}, out_idx=[])
    with pytest.raises(ArtifactError, match="no parameter's shape or scalar determines"):
        art.check()


def test_artifact_rejects_non_arithmetic_entry():
    art = KernelArtifact(name="k", source="", params=[ParamSpec("A", "tensor", "float32", ["m", "__import__('os')"])],
                         kernel_args=["A"], grid=["1", "1", "1"], block=[1, 1, 1], dynamic_smem=0, arch="sm_90a",
                         symbols={"m": [0, 0]}, out_idx=[])
    with pytest.raises(ArtifactError):
        art.check()


@pytest.mark.parametrize("form, good, bad", [("mul", 16, 15), ("add", 16, 0), ("muladd", 16, 15)])
def test_a_symbol_only_inside_an_affine_dimension_is_solved(form, good, bad):
    @tilelang.jit
    def zero():
        n = T.symbolic("n")
        extent = {"mul": n * 4, "add": n + 1, "muladd": n * 3 + 1}[form]

        @T.prim_func
        def kernel(A: T.Tensor((extent,), T.int32)):
            with T.Kernel(1) as _:
                for i in range(extent):    # the loop bound TVM's CSE would hoist: built without it
                    A[i] = 0

        return kernel

    art = zero().artifact
    assert art.kernel_args == ["A", "n"] and art.symbols == {"n": [0, 0]}
    plan, calls = _plan(art)
    plan.entry(torch.zeros(good, dtype=torch.int32))
    assert calls[-1][-1][-1] == {"mul": 4, "add": 15, "muladd": 5}[form]
    with pytest.raises(ValueError, match=r"which is not n .* for any n >= 0"):
        plan.entry(torch.zeros(bad, dtype=torch.int32))


def test_loop_bound_of_an_output_expression_needs_no_extra_argument():
    @tilelang.jit
    def kernel(A):
        m = T.dynamic("m")
        A: T.Tensor[[m], T.float32]
        B = T.empty([m * 2 + 1], T.float32)
        with T.Kernel(1, threads=1):
            for i in T.serial(m * 2 + 1):
                B[i] = A[i % m] + 1.0
        return B

    a = torch.arange(37, dtype=torch.float32)
    art = kernel.compile(a).artifact
    assert art.kernel_args == ["A", "B", "m"]
    plan, _ = _plan(art)
    assert plan.entry(a).shape == (75,)
