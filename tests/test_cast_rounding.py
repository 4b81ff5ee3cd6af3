"""T.cast: conversions and the rounding-option checks (round / sat / rbits), on CPU."""

import pytest

import tilelang.language as T
from tilelang.language.tir.ir import _VALID_CAST_ROUNDING_MODES, cast


def test_modes_table():
    assert set(_VALID_CAST_ROUNDING_MODES) == {"", "rn", "rz", "rp", "rm", "rs"}


def test_cast_builds_constants_and_casts():
    assert str(T.cast(1, "float16").dtype) == "float16"
    x = T.float32()
    assert str(T.cast(x, T.bfloat16).dtype) == "bfloat16"
    assert T.cast(x, "float32").same_as(x)
    for mode in ("rn", "rz", "rp", "rm"):
        assert str(T.cast(x, "float8_e4m3fn", round=mode).dtype) == "float8_e4m3fn"
    assert str(cast(x, "float8_e4m3fn", sat=False).dtype) == "float8_e4m3fn"


@pytest.mark.parametrize("kwargs,match", [
    ({"round": "nearest"}, "Invalid round 'nearest'"),
    ({"sat": "yes"}, "Invalid sat 'yes'"),
    ({"round": "rs"}, "rbits is required"),
    ({"round": "rn", "rbits": 3}, "rbits is only valid with round='rs'"),
])
def test_invalid_options(kwargs, match):
    with pytest.raises(ValueError, match=match):
        T.cast(1.0, "float8_e4m3fn", **kwargs)


def test_stochastic_rounding_calls_the_rs_helper():
    x = T.float32()
    call = T.cast(x, "float8_e4m3fn", round="rs", rbits=T.uint32())
    assert str(call.dtype) == "float8_e4m3fn"
    assert "__tl_cvt_f32x1_to_e4m3x1_rs_sat" in str(call)
    assert "__tl_cvt_f32x1_to_bf16x1_rs_sat" in str(T.cast(T.float16(), "bfloat16", round="rs", rbits=7))
    # sat=False is rejected by the compile, where the cast is used (tests/frontend/test_frontend_session11.py)
    assert "rs_nosat" in str(T.cast(x, "float16", round="rs", sat=False, rbits=T.uint32()))
    with pytest.raises(ValueError, match="not to int8"):
        T.cast(x, "int8", round="rs", rbits=T.uint32())


def _rs_kernel(dtype):
    @T.prim_func
    def main(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), dtype)):
        with T.Kernel(1, threads=128):
            A_l = T.alloc_fragment((128,), "float32")
            B_l = T.alloc_fragment((128,), dtype)
            r = T.alloc_fragment((1,), "int32")
            T.copy(A, A_l)
            r[0] = T.int32(0x1234567)
            for i in T.Parallel(128):
                B_l[i] = T.cast(A_l[i], dtype, round="rs", rbits=r[0])
            T.copy(B_l, B)

    return main


@pytest.mark.parametrize("dtype,tag", [("float16", "f16"), ("float8_e5m2", "e5m2")])
def test_stochastic_rounding_compiles_for_sm100a_only(dtype, tag):
    import tilelang
    from tilelang.jit.nvcc import NVCCError

    art = tilelang.lower(_rs_kernel(dtype), target="sm_100a", enable_device_compile=True)
    assert f"__tl_cvt_f32x1_to_{tag}x1_rs_sat(" in art.source and art.cubin
    with pytest.raises(NVCCError, match="Stochastic rounding f32-to-FP(16|8) requires sm_100a"):
        tilelang.lower(_rs_kernel(dtype), target="sm_90a", enable_device_compile=True)
