"""Names in the generated CUDA: TVM prints a buffer ``X``'s storage as ``X_ptr``; the source names
kernel parameters and register / shared arrays ``X`` (as upstream TileLang's source does and its
tests expect), unless the bare name would clash with a name the kernel uses, a macro or a C++
keyword. The launcher's argument names follow the source.
"""

from __future__ import annotations

import tilelang
import tilelang.language as T
from tilelang.codegen.cuda import _bare_names, _rename

_KERNEL = 'extern "C" __global__ void __launch_bounds__(32) k_kernel('


def test_parameters_and_local_arrays_take_the_buffer_names():
    @T.prim_func
    def main(A: T.Tensor((256,), "float32"), C: T.Tensor((256,), "float32")):
        with T.Kernel(1, threads=128):
            A_local = T.alloc_fragment((256,), "float32")
            tmp = T.alloc_local((1,), "float32")
            T.copy(A, A_local)
            tmp[0] = 2.0
            for i in T.Parallel(256):
                A_local[i] = A_local[i] * tmp[0]
            T.copy(A_local, C)

    art = tilelang.lower(main, "sm_90a")
    body = art.source[art.source.index('extern "C"'):]
    assert "_ptr" not in body
    assert "float* __restrict__ A, float* __restrict__ C)" in body
    assert "float A_local[" in body and "float tmp;" in body and "tmp = " in body
    assert list(art.kernel_args) == ["A", "C"]


def test_a_bare_name_the_kernel_uses_keeps_the_suffix():
    src = (_KERNEL + "float* __restrict__ A_ptr, float* __restrict__ B_ptr) {\n"
           "  float A = 1.0f;\n  float x_ptr[2];\n  x_ptr[0] = threadIdx.x;\n  B_ptr[0] = A_ptr[0] + A + x_ptr[0];\n}\n")
    renames = _bare_names(src, ["A_ptr", "B_ptr"])
    assert renames == {"B_ptr": "B", "x_ptr": "x"}      # threadIdx.x is a member, not a name
    out = _rename(src, renames)
    assert "B[0] = A_ptr[0] + A + x[0];" in out


def test_keywords_macros_and_double_suffixes():
    src = ("#define Q 1\n" + _KERNEL + "int* __restrict__ int_ptr, int* __restrict__ Q_ptr, "
           "int* __restrict__ D_ptr, int* __restrict__ D_ptr_ptr, int* __restrict__ TL_DEVICE_ptr) {\n"
           "  D_ptr_ptr[0] = D_ptr[0] + int_ptr[0] + Q_ptr[0] + TL_DEVICE_ptr[0];\n}\n")
    renames = _bare_names(src, ["int_ptr", "Q_ptr", "D_ptr", "D_ptr_ptr", "TL_DEVICE_ptr"])
    # `int` is a keyword, `Q` and TL_DEVICE macros; `D_ptr` is a name the kernel uses, so
    # `D_ptr_ptr` keeps its suffix while `D_ptr` becomes `D`
    assert renames == {"D_ptr": "D"}
    assert "D_ptr_ptr[0] = D[0] + int_ptr[0]" in _rename(src, renames)


def test_prelude_is_left_alone():
    src = "__device__ float f(float y_ptr) { return y_ptr; }\n" + _KERNEL + "float* __restrict__ y_ptr) {\n  y_ptr[0] = 0;\n}\n"
    out = _rename(src, _bare_names(src, ["y_ptr"]))
    assert out.startswith("__device__ float f(float y_ptr) { return y_ptr; }")
    assert "y[0] = 0;" in out


def test_kernel_arguments_follow_the_names():
    @T.prim_func
    def main(Data: T.Tensor((64,), "int32")):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding()
            Data[tx] = tx

    art = tilelang.lower(main, "sm_90a")
    assert "Data[((int)threadIdx.x)] = ((int)threadIdx.x);" in art.source
