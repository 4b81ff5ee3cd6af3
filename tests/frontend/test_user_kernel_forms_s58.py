"""Forms from DeepSeek's TileKernels and TileOPs that upstream's 0.1.15 accepted and ours refused:
``T.async_copy(..., loop_layout=...)``, a closure variable the enclosing function assigns only
under a Python flag and the kernel reads only under the same (false) flag, and ``tilelang.cdiv``
of host values (torch tensors of chunk lengths, floats). Each kernel is lowered and its CUDA
compiled with nvcc."""

import pytest

import tilelang
import tilelang.language as T
from tilelang.frontend.errors import ParseError
from tilelang.jit import nvcc


def _lowered(func, arch="sm_90a"):
    art = tilelang.lower(func, arch)
    assert nvcc.compile_cubin(art.source, art.arch, art.compile_flags)[:4] == b"\x7fELF"
    return art


def test_async_copy_takes_a_loop_layout():
    # TileKernels' engram gate backward: the copy's thread mapping as upstream's hint (ours picks its own)
    def lay(i, j):
        return i * 32 + (j // 4) % 32, (j % 4) + (j // 128) * 4

    @T.prim_func
    def main(A: T.Tensor((4, 256), T.bfloat16), B: T.Tensor((4, 256), T.bfloat16)):
        with T.Kernel(1, threads=128):
            layout = T.Fragment((4, 256), forward_fn=lay)
            s = T.alloc_shared((4, 256), T.bfloat16)
            T.async_copy(A[0:4, 0:256], s, loop_layout=layout)
            T.ptx_wait_group(0)
            T.copy(s, B)

    assert "cp_async" in _lowered(main).source


def _gate(grouped, n=128):
    if grouped:
        per_group = n // 4

    @T.prim_func
    def main(A: T.Tensor((n,), T.float32)):
        with T.Kernel(1, threads=128):
            if grouped:
                A[0] = T.float32(per_group)
            for i in T.Parallel(n):
                A[i] = A[i] + 1.0

    return main


def test_closure_variable_unassigned_where_the_kernel_never_reads_it():
    # TileKernels' top-2 sum gate: `per_group` exists only when the experts are grouped
    assert "A[0] = 0x1p+5f" not in _lowered(_gate(False)).source
    assert "A[0] = 0x1p+5f" in _lowered(_gate(True)).source


def test_closure_variable_unassigned_where_the_kernel_reads_it_is_located():
    def make(grouped=False, n=128):
        if grouped:
            per_group = n // 4

        @T.prim_func
        def main(A: T.Tensor((n,), T.float32)):
            with T.Kernel(1, threads=128):
                for i in T.Parallel(n):
                    A[i] = A[i] + per_group

        return main

    with pytest.raises(ParseError, match="per_group") as err:
        make()
    assert "A[i] + per_group" in str(err.value)


def test_cdiv_of_host_values_as_upstream_computes_it():
    torch = pytest.importorskip("torch")
    lens = torch.tensor([100, 37, 64], dtype=torch.int32)
    assert tilelang.cdiv(lens, 32).tolist() == [4, 2, 2]      # TileOPs' NSA chunk offsets
    assert tilelang.cdiv(7.5, 2) == 4.0 and tilelang.cdiv(70, 32) == 3
    n = T.dynamic("n")
    assert "n" in str(tilelang.cdiv(n, 32))                  # a TIR expression: T.ceildiv
