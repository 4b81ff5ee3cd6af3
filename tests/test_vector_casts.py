"""Vectorized casts: converting copies and register-to-register T.Parallel casts run as vector
lanes, and the CUDA source converts a pair of lanes per intrinsic (``__float22half2_rn``,
``__nv_cvt_float2_to_fp8x2``, ``__tl_cvt_*`` of src/tl/fp8.h) instead of one cast per lane.
Also: lanes of fp8 vectors are reached through the scalar fp8 type (CUDA's fp8x4 has no ``.x``).
"""

from __future__ import annotations

import shutil

import pytest

import tilelang
import tilelang.language as T
from tilelang.codegen.cuda import _fp8_lane_access, _pair_vector_casts
from tilelang.jit import nvcc


def _have_nvcc() -> bool:
    try:
        return bool(nvcc.find_nvcc())
    except Exception:  # noqa: BLE001 - no toolchain: source checks only
        return shutil.which("nvcc") is not None


HAVE_NVCC = _have_nvcc()


def _body(source):
    return source[source.index('extern "C" __global__'):]


def _copy(M, src, dst):
    @T.prim_func
    def main(A: T.Tensor((M,), src), B: T.Tensor((M,), dst)):
        with T.Kernel(1, threads=128):
            T.copy(A, B)
    return main


def _parallel(M, src, dst):
    @T.prim_func
    def main(A: T.Tensor((M,), src), B: T.Tensor((M,), dst)):
        with T.Kernel(1, threads=128):
            A_local = T.alloc_fragment((M,), src)
            B_local = T.alloc_fragment((M,), dst)
            T.copy(A, A_local)
            for i in T.Parallel(M):
                B_local[i] = A_local[i]
            T.copy(B_local, B)
    return main


# ---------------------------------------------------------------- the source rewrite (text only)
def test_lane_by_lane_cast_becomes_pairs():
    tvm_text = ("  half4 __1;\n  float4 v_ = *(float4*)(A + 0);\n"
                "  __1.x = (half)(v_.x);\n  __1.y = (half)(v_.y);\n  __1.z = (half)(v_.z);\n  __1.w = (half)(v_.w);\n"
                "  *(half4*)(B + 0) = __1;")
    out = _pair_vector_casts(tvm_text)
    assert "(half)" not in out
    assert ("__1 = tl::vjoin<half4>(__float22half2_rn(tl::vpart<float2, 0>(v_)), "
            "__float22half2_rn(tl::vpart<float2, 1>(v_)));") in out


def test_fp8_vector_cast_becomes_pairs():
    tvm_text = "  *(float2*)(B + i) = (float2)(*(__nv_fp8x2_e5m2*)(A + i));"
    out = _pair_vector_casts(tvm_text)
    assert out == ("  *(float2*)(B + i) = tl::vbits<float2>(__tl_cvt_fp8x2_to_float2("
                   "tl::vbits<__nv_fp8x2_storage_t>(*(__nv_fp8x2_e5m2*)(A + i)), __NV_E5M2));")


def test_casts_without_a_pair_conversion_are_left_alone():
    tvm_text = ("  int2 __1;\n  float2 v_ = *(float2*)(A + 0);\n  __1.x = (int)(v_.x);\n  __1.y = (int)(v_.y);\n"
                "  x = (float2)(y + z);")
    assert _pair_vector_casts(tvm_text) == tvm_text


def test_fp8_vector_lanes_through_the_scalar_type():
    text = "  __nv_fp8x4_e4m3 v_ = *(__nv_fp8x4_e4m3*)(A);\n  r.x = max(v_.x, v_.w);"
    out = _fp8_lane_access(text)
    assert "max(((__nv_fp8_e4m3*)(&v_))[0], ((__nv_fp8_e4m3*)(&v_))[3])" in out
    assert "r.x" in out      # not an fp8 vector: untouched


# ---------------------------------------------------------------- lowering + codegen
@pytest.mark.parametrize("src, dst, lanes, check", [
    ("float32", "float16", 2, "__float22half2_rn"),
    ("float16", "float32", 4, "__half22float2"),
    ("float32", "bfloat16", 4, "__float22bfloat162_rn"),
    ("bfloat16", "float32", 2, "__bfloat1622float2"),
    ("float32", "float8_e4m3fn", 4, "__nv_cvt_float2_to_fp8x2"),
    ("float8_e5m2", "float32", 2, "__tl_cvt_fp8x2_to_float2"),
    ("float8_e4m3fn", "float16", 4, "__tl_cvt_fp8x2_to_half2"),
    ("float16", "float8_e5m2", 2, "__tl_cvt_half2_to_fp8x2"),
    ("float32", "float8_e8m0fnu", 2, "__tl_cvt_float2_to_e8m0x2"),
])
def test_converting_copy_and_parallel_cast_use_pairs(src, dst, lanes, check):
    for make in (_copy, _parallel):
        body = _body(tilelang.lower(make(128 * lanes, src, dst), "sm_90a").source)
        assert check in body, (make.__name__, body)


def test_same_dtype_copy_is_unchanged():
    body = _body(tilelang.lower(_copy(512, "float16", "float16"), "sm_90a").source)
    assert "tl::copy_vec<16>" in body and "tl::v" not in body


def test_cast_without_pair_stays_scalar():
    body = _body(tilelang.lower(_copy(256, "int32", "float32"), "sm_90a").source)
    assert "((float)A[" in body and "tl::v" not in body


def test_parallel_cast_with_scale_is_vectorized():
    @T.prim_func
    def main(A: T.Tensor((512,), "float32"), B: T.Tensor((512,), "float16")):
        with T.Kernel(1, threads=128):
            A_local = T.alloc_fragment((512,), "float32")
            B_local = T.alloc_fragment((512,), "float16")
            T.copy(A, A_local)
            for i in T.Parallel(512):
                B_local[i] = A_local[i] * 0.5
            T.copy(B_local, B)

    body = _body(tilelang.lower(main, "sm_90a").source)
    assert body.count("__float22half2_rn") == 2


@pytest.mark.skipif(not HAVE_NVCC, reason="nvcc not found")
def test_paired_casts_compile():
    for make, src, dst, lanes in ((_parallel, "float32", "bfloat16", 4), (_copy, "float8_e4m3fn", "float16", 4),
                                  (_copy, "bfloat16", "float8_e8m0fnu", 2)):
        art = tilelang.lower(make(128 * lanes, src, dst), "sm_90a")
        assert nvcc.compile_cubin(art.source, "sm_90a", [])[:4] == b"\x7fELF"


@pytest.mark.skipif(not HAVE_NVCC, reason="nvcc not found")
def test_vectorized_fp8_max_compiles():
    @T.prim_func
    def main(A: T.Tensor((1024,), "float8_e4m3"), B: T.Tensor((1024,), "float8_e4m3"),
             C: T.Tensor((1024,), "float8_e4m3")):
        with T.Kernel(8, threads=32) as bx:
            for i in T.Parallel(32):
                for v in T.vectorized(4):
                    idx = bx * 128 + i * 4 + v
                    C[idx] = T.max(A[idx], B[idx])

    art = tilelang.lower(main, "sm_90a")
    # the max of fp8 values is taken in float32 (codegen/narrow_floats): on the lanes of a float4,
    # never on members of an fp8 vector (which has none)
    assert "float4 __1;" in art.source and "__1.x = max(v_.x, v__1.x);" in art.source
    assert "__nv_fp8x4_e4m3 __1" not in art.source
    assert nvcc.compile_cubin(art.source, "sm_90a", [])[:4] == b"\x7fELF"


def test_float64_arithmetic_stays_double():
    # "float6" is a prefix of "float64": the fp6 test of codegen/narrow_floats once took double for a
    # narrow float and computed it in float32 (a GPU test's float64 epilogue drifted by 1e-5)
    from tilelang.language.dtypes import is_narrow_float

    assert not is_narrow_float("float64") and not is_narrow_float("float64x2")
    assert all(is_narrow_float(t) for t in ("float8_e4m3fn", "float6_e2m3fn", "float4_e2m1fn", "float8_e5m2x4"))

    @T.prim_func
    def main(A: T.Tensor((32, 32), "float64"), C: T.Tensor((32, 32), "float64")):
        with T.Kernel(1, threads=128):
            c = T.alloc_fragment((32, 32), "float64")
            T.copy(A, c)
            for i, j in T.Parallel(32, 32):
                c[i, j] = c[i, j] * 2 + T.exp(c[i, j]) + i
            T.copy(c, C)

    body = tilelang.lower(main, "sm_90a").source
    body = body[body.index("__global__"):]
    assert "(float)" not in body and "expf(" not in body and "exp(c[" in body
