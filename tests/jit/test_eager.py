"""The eager style: @tilelang.jit functions that take tensors, T.const dimensions, T.empty outputs."""

import sys
from pathlib import Path

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.jit.eager import EagerError, is_eager
from tilelang.transform.kernel import analyze_kernel, op_name, tile_calls

sys.path.insert(0, str(Path(__file__).resolve().parent))
import eager_kernels as ek  # noqa: E402


def test_eager_detected():
    assert is_eager(ek.matmul.__wrapped__)
    assert type(ek.matmul).__name__ == "EagerJit"


def test_specialised_prim_func_keeps_user_spans():
    a = torch.randn(256, 128, dtype=torch.float16)
    b = torch.randn(128, 192, dtype=torch.float16)
    f = ek.matmul.get_prim_func(a, b)
    assert [str(p.name) for p in f.params] == ["A", "B", "C"]
    assert [int(x) for x in f.params[2].shape] == [256, 192]
    gemm = [c for c in tile_calls(analyze_kernel(f).body) if op_name(c) == "gemm"][0]
    source = Path(ek.__file__).read_text().splitlines()
    assert source[gemm.span.line - 1].strip() == "T.gemm(A_shared, B_shared, C_local)"
    assert gemm.span.source_name.name == ek.__file__


def test_outputs_become_out_idx_and_scalars_specialise():
    x = torch.randn(256, 64)
    k = ek.scale_rows.compile(x, alpha=3.0)
    assert k.out_idx == [1, 2]
    assert ek.scale_rows.compile(x, alpha=3.0) is k
    assert ek.scale_rows.compile(x, alpha=2.0) is not k


def test_cache_key_counts_strides():
    """T.const values can be bound from a tensor's strides: a view with the same shape and other
    strides must not reuse the kernel built for the contiguous tensor."""
    x = torch.randn(256, 64)
    view = torch.randn(64, 256).t()
    assert view.shape == x.shape and view.stride() != x.stride()
    key = ek.scale_rows._key
    assert key((x,), {}) == key((torch.randn(256, 64),), {})
    assert key((x,), {}) != key((view,), {})


def test_inconsistent_dimensions_are_named():
    a = torch.randn(256, 128, dtype=torch.float16)
    b = torch.randn(64, 192, dtype=torch.float16)
    with pytest.raises(EagerError, match="K is 128"):
        ek.matmul.compile(a, b)


def test_const_outside_eager_is_a_clear_error():
    with pytest.raises(RuntimeError, match="eager-style"):
        T.const("M")


def test_jit_stacked_on_a_prim_func_is_that_kernel_compiled_on_use():
    # an older upstream form that users' code still has (KernelBench solutions): @tilelang.jit(...)
    # directly on a @T.prim_func; the object called with tensors is the kernel itself
    @tilelang.jit(out_idx=-1)
    @T.prim_func
    def copy_kernel(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(128):
                B[i] = A[i]

    assert copy_kernel._kernel is None                 # nothing compiled at decoration
    assert "__global__" in copy_kernel.get_kernel_source()
    assert isinstance(copy_kernel._kernel, tilelang.JITKernel)
    assert copy_kernel._kernel.out_idx == [1]
