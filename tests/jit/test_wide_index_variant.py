"""A kernel over symbolic shapes indexes with 32-bit integers; a call that binds a tensor of more
than 2**31 elements runs on its 64-bit-index variant (``tl.enable_wide_index``), which the
JITKernel compiles on the first such call (``JITKernel.with_wide_variant``)."""

import re

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang.artifact import IndexWidthError
from tilelang.jit import nvcc

SM90 = "cuda -arch=sm_90a"
WIDE = "tl.enable_wide_index"


@tilelang.jit(out_idx=[-1], target=SM90)
def double(block=256):
    n, m = T.dynamic("n, m")

    @T.prim_func
    def kernel(A: T.Tensor((n, m), T.int8), B: T.Tensor((n, m), T.int8)):
        with T.Kernel(T.ceildiv(m, block), n, threads=block) as (bx, by):
            for i in T.Parallel(block):
                B[by, bx * block + i] = A[by, bx * block + i] * T.int8(2)

    return kernel


def _body(src):
    return src[src.index("{", src.rindex("__global__ void")):]


def test_the_wide_variant_indexes_in_64_bits_and_compiles():
    narrow = double()
    wide = tilelang.compile(narrow.prim_func, out_idx=[-1], target=SM90, pass_configs={WIDE: True})
    assert narrow.artifact.index_bits == 32 and wide.artifact.index_bits == 64
    assert "int64_t" not in _body(narrow.get_kernel_source())
    assert re.search(r"\(\(int64_t\)m\)", _body(wide.get_kernel_source()))
    assert wide.artifact.kernel_args == narrow.artifact.kernel_args   # same launch, same symbols
    assert nvcc.compile_cubin(wide.get_kernel_source(), "sm_90a", wide.artifact.compile_flags)


def test_a_call_past_2_31_elements_runs_on_the_wide_variant():
    kernel = double()
    with pytest.raises(RuntimeError, match="no CUDA device"):
        kernel(torch.empty(4, 8, dtype=torch.int8))
    assert kernel._wide is None                       # small calls keep the 32-bit kernel
    big = torch.empty(2**16, 2**15 + 1, dtype=torch.int8)   # 2 GiB of address space, never touched
    with pytest.raises(RuntimeError, match="no CUDA device"):    # (past the argument checks: launching)
        kernel(big)
    assert kernel._wide is not None and kernel._wide.artifact.index_bits == 64


def test_a_kernel_that_cannot_recompile_refuses_the_call():
    kernel = tilelang.JITKernel(double().artifact)
    big = torch.empty(2**16, 2**15 + 1, dtype=torch.int8)
    with pytest.raises(IndexWidthError, match=r"spans 2147549184 elements.*32-bit"):
        kernel(big)
