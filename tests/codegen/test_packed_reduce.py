"""Packed pair folds of ``T.reduce_*`` (CPU: lowering, generated source, nvcc).

A thread's fold of the registers it holds reads them two at a time and combines them with the
packed ops of ``src/tl/packed.h`` (``tl::add2`` / ``max2`` / ``min2``, ``abs2`` for the abs
kinds, ``max2_nan`` / ``min2_nan`` for 16-bit ``nan_propagate``): float16 everywhere, bfloat16
from sm_80, float32 only from sm_100 (the ``.f32x2`` instructions), a float32 sum / abssum only
while ``annotations={"enable_fadd2": False}`` is not given. Other kernels keep the scalar fold.
Thread-private arrays (``T.alloc_local`` / ``T.alloc_var``) reduce the same way, per thread.
"""

from __future__ import annotations

import shutil

import pytest

import tilelang
import tilelang.language as T
from tilelang.diagnostics.errors import TileLangCompileError
from tilelang.jit import nvcc


def _have_nvcc() -> bool:
    try:
        return bool(nvcc.find_nvcc())
    except Exception:  # noqa: BLE001 - no toolchain: source checks only
        return shutil.which("nvcc") is not None


HAVE_NVCC = _have_nvcc()


def _src(func, arch):
    return tilelang.lower(func, arch).source


def _compiles(source, arch):
    if HAVE_NVCC:
        assert nvcc.compile_cubin(source, arch, [])[:4] == b"\x7fELF"


def _row_reduce(op, dtype=T.float32, *, nan=False, annotations=None, M=128, N=128, threads=None):
    kw = {"nan_propagate": True} if nan else {}

    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), C: T.Tensor((M,), dtype)):
        with T.Kernel(1, threads=threads or M):
            src = T.alloc_fragment((M, N), dtype)
            dst = T.alloc_fragment((M,), dtype)
            T.copy(A, src)
            getattr(T, "reduce_" + op)(src, dst, dim=1, annotations=annotations, **kw)
            T.copy(dst, C)

    return main


PACKED = {"sum": ["tl::add2<float2>"], "abssum": ["tl::add2<float2>", "tl::abs2<float2>"],
          "max": ["tl::max2<float2>"], "min": ["tl::min2<float2>"],
          "absmax": ["tl::max2<float2>", "tl::abs2<float2>"]}


@pytest.mark.parametrize("op", sorted(PACKED))
def test_sm100_float32_fold_uses_pair_ops(op):
    src = _src(_row_reduce(op), "sm_100a")
    for call in PACKED[op]:
        assert call in src
    # the two lanes of the pair partial are combined before the warp all-reduce
    assert "(dst_pack" in src and "warp_allreduce" in src


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
@pytest.mark.parametrize("op", sorted(PACKED))
def test_float32_fold_stays_scalar_before_sm100(op, arch):
    src = _src(_row_reduce(op), arch)
    assert "2<float2>" not in src and "dst_pack" not in src


def test_enable_fadd2_false_keeps_sum_scalar_but_not_max():
    off = {"enable_fadd2": False}
    for op in ("sum", "abssum"):
        assert "tl::add2" not in _src(_row_reduce(op, annotations=off), "sm_100a")
    assert "tl::max2<float2>" in _src(_row_reduce("max", annotations=off), "sm_100a")


def test_enable_fadd2_must_be_boolean():
    with pytest.raises(Exception, match="enable_fadd2.*boolean"):
        _row_reduce("sum", annotations={"enable_fadd2": "no"})


def test_float32_nan_propagate_uses_plain_pair_max():
    src = _src(_row_reduce("max", nan=True), "sm_100a")
    assert "tl::max2<float2>" in src and "max2_nan" not in src


def test_sm100_float32_fold_compiles():
    for op in ("abssum", "min"):
        _compiles(_src(_row_reduce(op), "sm_100a"), "sm_100a")


@pytest.mark.parametrize("dtype,pair", [(T.float16, "__half2"), (T.bfloat16, "__nv_bfloat162")])
def test_half_types_fold_in_pairs_from_sm80(dtype, pair):
    src = _src(_row_reduce("absmax", dtype), "sm_80")
    assert f"tl::max2<{pair}>" in src and f"tl::abs2<{pair}>" in src
    src = _src(_row_reduce("min", dtype, nan=True), "sm_80")
    assert f"tl::min2_nan<{pair}>" in src and "tl::MinOpNan" in src
    _compiles(src, "sm_80")


def test_bfloat16_fold_stays_scalar_before_sm80():
    assert "dst_pack" not in _src(_row_reduce("sum", T.bfloat16), "sm_75")
    assert "tl::add2<__half2>" in _src(_row_reduce("sum", T.float16), "sm_75")


def test_fold_of_eight_registers_keeps_two_pair_partials():
    # 128 columns over 32 threads of a row: 4 registers a row per thread -> one pair partial;
    # 8 registers or more -> two pair partials combined as a tree
    src = _src(_row_reduce("max", T.float16, M=16, N=512, threads=128), "sm_80")
    assert "half2 dst_pack[2]" in src
    assert "dst_pack[0] = " in src and "__hmax((dst_pack[0]).x, (dst_pack[0]).y)" in src


# ----- thread-private arrays ------------------------------------------------------------------------

def _local(op, dtype=T.float16, *, n=8, var=False, clear=True):
    @T.prim_func
    def main(A: T.Tensor((n,), dtype), B: T.Tensor((1,), dtype)):
        with T.Kernel(1, threads=1):
            src = T.alloc_local((n,), dtype)
            dst = T.alloc_var(dtype) if var else T.alloc_local((1,), dtype)
            for i in T.serial(n):
                src[i] = A[i]
            getattr(T, "reduce_" + op)(src, dst, dim=0, clear=clear)
            if var:
                B[0] = dst
            else:
                B[0] = dst[0]

    return main


@pytest.mark.parametrize("var", [False, True])
@pytest.mark.parametrize("op,call", [("sum", "add2"), ("max", "max2"), ("min", "min2")])
def test_local_array_reduce_is_packed(op, call, var):
    src = _src(_local(op, var=var), "sm_80")
    assert f"tl::{call}<__half2>" in src
    assert "*(half2*)(src + (k * 2))" in src       # one vector read per pair
    _compiles(src, "sm_80")


def test_local_array_reduce_over_an_outer_dim_pairs_two_reads():
    @T.prim_func
    def main(A: T.Tensor((8, 4), T.float16), B: T.Tensor((4,), T.float16)):
        with T.Kernel(1, threads=1):
            src = T.alloc_local((8, 4), T.float16)
            dst = T.alloc_local((4,), T.float16)
            for i, j in T.grid(8, 4):
                src[i, j] = A[i, j]
            T.reduce_sum(src, dst, dim=0)
            for j in T.serial(4):
                B[j] = dst[j]

    src = _src(main, "sm_80")
    assert "tl::add2<__half2>" in src and "make_half2(src[" in src
    _compiles(src, "sm_80")


def test_local_array_reduce_scalar_cases():
    # float32 before sm_100, an odd extent, an accumulating (clear=False) reduction
    for func, arch in ((_local("sum", T.float32), "sm_90a"), (_local("sum", T.float32, n=7), "sm_100a"),
                       (_local("max", clear=False), "sm_80")):
        src = _src(func, arch)
        assert "dst_pack" not in src and "for (int r = 0;" in src
    assert "tl::add2<float2>" in _src(_local("sum", T.float32), "sm_100a")


def test_local_array_reduce_checks_shapes_and_scopes():
    @T.prim_func
    def bad_shape(A: T.Tensor((8, 4), T.float16), B: T.Tensor((4,), T.float16)):
        with T.Kernel(1, threads=1):
            src = T.alloc_local((8, 4), T.float16)
            dst = T.alloc_local((8,), T.float16)
            for i, j in T.grid(8, 4):
                src[i, j] = A[i, j]
            T.reduce_sum(src, dst, dim=0)
            B[0] = dst[0]

    with pytest.raises(TileLangCompileError, match="TL0604"):
        _src(bad_shape, "sm_80")

    @T.prim_func
    def mixed(A: T.Tensor((128, 8), T.float16), B: T.Tensor((128,), T.float16)):
        with T.Kernel(1, threads=128):
            src = T.alloc_fragment((128, 8), T.float16)
            dst = T.alloc_local((128,), T.float16)
            T.copy(A, src)
            T.reduce_sum(src, dst, dim=1)
            B[0] = dst[0]

    with pytest.raises(TileLangCompileError, match="TL0002"):
        _src(mixed, "sm_80")
