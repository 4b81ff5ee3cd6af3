"""User ``T.vectorized`` loops the CUDA codegen used to get wrong (tilelang/codegen/cuda.py and
src/tl/packed.h):

* an integer -> fp8 vector cast goes through float32 and converts a pair of lanes at a time; an
  fp8-converting loop wider than 4 lanes runs as a serial loop over 4-lane vectors;
* 8-bit integer ramps / broadcasts (``make_int(a, b, c, d)``, ``make_int4`` of 16 lanes) compile,
  and a 4-lane loop broadcasting a non-constant byte runs serially (TVM packs only constants),
  while a 4-lane byte load (dequantising gemvs: ``q[v] = B[..., k + v]``) stays one 32-bit load;
* a store to an element every lane writes, in a loop reading that buffer (``B[r] = B[r] + A[r, k]``),
  runs serially: a vector would read once and keep only the last lane's sum.
"""

from __future__ import annotations

import shutil

import pytest

import tilelang
import tilelang.language as T
from tilelang.jit import nvcc


def _have_nvcc() -> bool:
    try:
        return bool(nvcc.find_nvcc())
    except Exception:  # noqa: BLE001 - no toolchain: source checks only
        return shutil.which("nvcc") is not None


HAVE_NVCC = _have_nvcc()


def _body(source):
    return source[source.index('extern "C" __global__'):]


def _compiles(source):
    if HAVE_NVCC:
        assert nvcc.compile_cubin(source, "sm_90a", [])[:4] == b"\x7fELF"


def _ramp_cast(dtype, lanes):
    @T.prim_func
    def main(A: T.Tensor((64,), dtype)):
        with T.Kernel(1, threads=256):
            for i in T.vectorized(lanes):
                A[i] = T.cast(i + 1, dtype)
    return main


@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu"])
@pytest.mark.parametrize("lanes", [2, 4, 8])
def test_integer_to_fp8_vector_cast(dtype, lanes):
    src = tilelang.lower(_ramp_cast(dtype, lanes), "sm_90a").source
    body = _body(src)
    assert "(make_int" not in body.replace("= make_int", "")   # no C cast of an int vector to fp8
    assert "__nv_cvt_float2_to_fp8x2" in body or "__tl_cvt_float2_to_e8m0x2" in body
    if lanes == 8:
        assert "for (int i_o = 0; i_o < 2; ++i_o)" in body
    _compiles(src)


@pytest.mark.parametrize("dtype", ["int8", "uint8"])
def test_byte_ramp_of_four_lanes(dtype):
    src = tilelang.lower(_ramp_cast(dtype, 4), "sm_90a").source
    assert "make_int(" in _body(src) or "make_uint(" in _body(src)
    _compiles(src)


@pytest.mark.parametrize("lanes", [4, 32])
def test_byte_broadcast_of_a_variable(lanes):
    @T.prim_func
    def main(A: T.Tensor((64,), "int8")):
        with T.Kernel(1, threads=128):
            a = T.alloc_local((64,), "int8")
            b = T.alloc_var("int8")
            for i in T.vectorized(lanes):
                a[i] = b
            A[0] = a[0]

    src = tilelang.lower(main, "sm_90a").source
    _compiles(src)


@pytest.mark.parametrize("dtype", ["int8", "uint8"])
def test_four_byte_load_stays_one_word(dtype):
    @T.prim_func
    def main(B: T.Tensor((1024, 64), dtype), C: T.Tensor((1024, 64), dtype)):
        with T.Kernel(1024, threads=16) as bx:
            q = T.alloc_local([4], dtype)
            tx = T.get_thread_binding()
            for v in T.vectorized(4):
                q[v] = B[bx, tx * 4 + v]
            for v in T.vectorized(4):
                C[bx, tx * 4 + v] = q[v]

    src = tilelang.lower(main, "sm_90a").source
    body = _body(src)
    word = "int" if dtype == "int8" else "uint"
    assert f"*({word}*)(q + 0) = *({word}*)(B + " in body
    assert "for (int v" not in body
    _compiles(src)


def _accumulate(local):
    @T.prim_func
    def main(A: T.Tensor((128, 4), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            row = T.get_thread_binding(0)
            if local:
                acc = T.alloc_local((1,), "float32")
                acc[0] = 0.0
                for k in T.vectorized(4):
                    acc[0] = acc[0] + A[row, k]
                B[row] = acc[0]
            else:
                B[row] = 0.0
                for k in T.vectorized(4):
                    B[row] = B[row] + A[row, k]
    return main


@pytest.mark.parametrize("local", [False, True])
def test_lane_invariant_accumulation_runs_serially(local):
    body = _body(tilelang.lower(_accumulate(local), "sm_90a").source)
    assert "for (int k = 0; k < 4; ++k)" in body
    assert "float4" not in body


def test_plain_vectorized_copy_still_vectorizes():
    @T.prim_func
    def main(A: T.Tensor((128, 4), "float32"), B: T.Tensor((128, 4), "float32")):
        with T.Kernel(1, threads=128):
            row = T.get_thread_binding(0)
            for k in T.vectorized(4):
                B[row, k] = A[row, k] + 1.0

    assert "float4" in _body(tilelang.lower(main, "sm_90a").source)


def test_fp8_broadcast_of_eight_lanes():
    @T.prim_func
    def main(A: T.Tensor((8,), "float8_e4m3fn")):
        with T.Kernel(1, threads=32):
            for i in T.vectorized(8):
                A[i] = 0

    src = tilelang.lower(main, "sm_90a").source
    assert "for (int i_o = 0; i_o < 2; ++i_o)" in _body(src)
    _compiles(src)


def test_slice_assigned_from_a_slice_is_one_vector_move():
    @T.prim_func
    def main(A: T.Tensor((16, 16), "float32")):
        with T.Kernel(1, threads=128):
            b = A[0, 0:4]
            A[0, 4:8] = b

    assert "*(float4*)(A + 4) = *(float4*)(A + 0);" in _body(tilelang.lower(main, "sm_90a").source)
