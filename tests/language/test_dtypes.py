"""The dtype surface of ``T``: every dtype upstream names, in every spelling a kernel may use.

Issue 17 (deliverable 2): torch dtypes where a dtype is accepted, dtype objects usable as
constructors and as ``tvm.DataType``, fp8/fp4 storage and casts through the compiler.
"""

import numpy as np
import pytest
import torch
import tvm

import tilelang
import tilelang.language as T
from tilelang.jit import nvcc
from tilelang.language import dtypes

try:
    nvcc.find_nvcc()
    HAVE_NVCC = True
except Exception:  # noqa: BLE001
    HAVE_NVCC = False


@pytest.mark.parametrize("name", dtypes._all_dtypes)
def test_every_dtype_is_a_datatype_and_a_constructor(name):
    dt = getattr(T, name)
    assert isinstance(dt, tvm.DataType)
    var = dt()
    assert isinstance(var, tvm.tirx.Var)
    got = dtypes.dtype(dt(1.0 if dt.lanes == 1 else 1).ty.dtype)
    assert (int(got.type_code), got.bits, got.lanes) == (int(dt.type_code), dt.bits, dt.lanes)


@pytest.mark.parametrize("value, expected", [
    (torch.float16, "float16"), (torch.bfloat16, "bfloat16"), (torch.float8_e4m3fn, "float8_e4m3fn"),
    (torch.float8_e5m2, "float8_e5m2"), (torch.uint8, "uint8"), (np.float32, "float32"),
    (np.dtype("int16"), "int16"), (float, "float32"), (int, "int32"), (bool, "bool"),
    ("half", "float16"), (T.float16, "float16"), (T.tfloat32, "float32"), (T.float8_e4m3, "float8_e4m3fn"),
])
def test_normalize_dtype_accepts_every_spelling(value, expected):
    assert dtypes.normalize_dtype(value) == expected


def test_unknown_dtype_names_what_was_given():
    with pytest.raises(TypeError, match="complex64"):
        dtypes.dtype(torch.complex64)


def test_storage_types_of_packed_and_custom_dtypes():
    assert T.int4.as_torch() is torch.int8
    assert T.float4_e2m1fn.as_torch() is getattr(torch, "float4_e2m1fn_x2", torch.int8)
    assert T.tfloat32.as_torch() is torch.float32 and T.tfloat32.is_tfloat32()
    assert dtypes.resolve_torch_storage_dtype(T.int4) == T.int8
    assert T.float4_e2m1_unpacked.bits == 8 and int(T.float4_e2m1_unpacked.type_code) == 131
    assert T.float4_e2m1_unpacked.is_float4() and not T.float4_e2m1_unpacked.is_float4_e2m1fn()
    # The queries work on the dtypes TVM itself hands out, as upstream code expects.
    buf = tvm.tirx.decl_buffer((4,), "float16")
    assert buf.dtype.as_torch() is torch.float16 and buf.dtype.bytes == 2


def test_vector_constructor_packs_lanes():
    vec = T.float16x2(1.0, 2.0)
    assert isinstance(vec, tvm.tirx.Shuffle) and str(vec.ty.dtype) == "float16x2"


def test_torch_dtypes_in_kernel_signatures():
    @T.prim_func
    def k(A: T.Tensor((16,), torch.float16), n: T.int32, x: T.short):
        with T.Kernel(1, threads=32):
            A[0] = T.float16(n + x)

    assert str(k.params[1].ty.dtype) == "int32" and str(k.params[2].ty.dtype) == "int16"
    assert 'A: T.Buffer((16,), "float16")' in k.script()


def _cast_kernel(src, dst):
    @T.prim_func
    def k(A: T.Tensor((256,), src), B: T.Tensor((256,), dst)):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(256):
                B[i] = T.cast(A[i], dst)

    return k


@pytest.mark.skipif(not HAVE_NVCC, reason="nvcc not found")
@pytest.mark.parametrize("src, dst", [(T.float32, T.float8_e4m3fn), (T.float8_e5m2, T.float16),
                                      (torch.bfloat16, torch.float8_e4m3fn), (T.float32, T.float8_e8m0fnu),
                                      (T.float32, T.float4_e2m1fn), (T.float4_e2m1fn, T.float32)])
def test_fp8_and_fp4_casts_compile(src, dst):
    art = tilelang.lower(_cast_kernel(src, dst), "sm_90a")
    assert nvcc.compile_cubin(art.source, "sm_90a", art.compile_flags)[:4] == b"\x7fELF"
