"""T.wgmma_gemm / T.wait_wgmma (CPU: generated source, nvcc, errors).

T.wgmma_gemm forces the sm_90a wgmma lowering, issues without waiting (float accumulators), and
builds its operand descriptors in the kernel source, so that a K slice of a shared buffer (static
or runtime start) is a valid operand; T.wait_wgmma(n) retires the groups. Where wgmma cannot be
used the compile fails with an error that is also a ``tvm.error.InternalError`` (upstream's type).
"""

import pytest
import tvm

import tilelang
import tilelang.language as T
from tilelang.diagnostics import TileLangCompileError


def _kernel(acc="float32", M=64, K=16, rows_a=None):
    rows_a = rows_a or M

    @T.prim_func
    def main(A: T.Tensor((rows_a, K), T.float16), B: T.Tensor((K, 64), T.float16),
             D: T.Tensor((rows_a, 64), T.float16)):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((rows_a, K), T.float16)
            B_s = T.alloc_shared((K, 64), T.float16)
            C = T.alloc_fragment((rows_a, 64), acc)
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.wgmma_gemm(A_s, B_s, C, clear_accum=True)
            T.wait_wgmma(0)
            T.copy(C, D)

    return main


def _sliced(M, N, K, tiles, static=False):
    kt = K // tiles

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((N, K), T.float16), D: T.Tensor((M, N), T.float16)):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((M, K), T.float16)
            B_s = T.alloc_shared((N, K), T.float16)
            C = T.alloc_fragment((M, N), T.float32)
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.clear(C)
            if static:
                T.wgmma_gemm(A_s[:, kt:], B_s[:, kt:], C, transpose_B=True)
            else:
                for j in T.serial(tiles):
                    T.wgmma_gemm(A_s[:, j * kt:(j + 1) * kt], B_s[:, j * kt:(j + 1) * kt], C, transpose_B=True)
            T.wait_wgmma(0)
            T.copy(C, D)

    return main


def _source(func, arch="sm_90a"):
    return tilelang.lower(func, target=arch).source


def test_float_accumulator_is_left_in_flight():
    src = _source(_kernel())
    assert src.count("tl::wait_wgmma<0>();") == 1
    assert "tl::wgmma_gemm_ss_desc<64, 64, 16, 1, false, false, true, 32, 128, half>" in src
    # the accumulator is pinned behind the user's wait, and nothing waits before it
    assert src.index("tl::wait_wgmma<0>();") < src.index("tl::wgmma_fence_accumulator<32>")
    assert "wgmma_gemm_ss<" not in src and "wgmma_wait<" not in src


def test_half_accumulator_compiles_with_nvcc():
    kernel = tilelang.compile(_kernel(acc="float16"), target="sm_90a")
    src = kernel.get_kernel_source()
    assert src.count("tl::wait_wgmma<0>();") == 1
    assert "wgmma_fence_accumulator" not in src     # the half call waits itself


def test_static_slice_offsets_the_address():
    src = tilelang.compile(_sliced(64, 64, 32, 2, static=True), target="sm_90a").get_kernel_source()
    assert src.count("initialize_wgmma_descriptor<32, 1, 16>") == 2   # 32-byte swizzle from K=16
    assert "increase_descriptor_offset" not in src
    # A at byte 0, its K slice one 64-row x 32-byte slab further; B after A (4096 bytes)
    assert "smem)[0]))) + 2048)" in src and "+ 6144)" in src


@pytest.mark.parametrize("M,N,K,tiles,slab", [(64, 64, 64, 4, 2048), (128, 64, 64, 2, 8192), (64, 128, 64, 2, 4096)])
def test_runtime_slice_moves_the_descriptor(M, N, K, tiles, slab):
    src = tilelang.compile(_sliced(M, N, K, tiles), target="sm_90a").get_kernel_source()
    assert src.count("tl::increase_descriptor_offset(") == 2
    assert f"(j * {slab})" in src


def test_sm80_is_rejected_at_the_operand():
    with pytest.raises(tvm.error.InternalError, match=r"T\.wgmma_gemm\(\) requires Hopper WGMMA lowering") as info:
        _source(_kernel(), arch="sm_80")
    assert isinstance(info.value, TileLangCompileError)
    assert "target=sm_80" in str(info.value) and "A_s = T.alloc_shared" in str(info.value)


def test_shape_wgmma_cannot_take_is_rejected():
    with pytest.raises(tvm.error.InternalError, match="M=32 does not split into 64-row blocks"):
        _source(_kernel(rows_a=32))


def test_row_slice_is_rejected():
    @T.prim_func
    def main(A: T.Tensor((128, 16), T.float16), B: T.Tensor((16, 64), T.float16)):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((128, 16), T.float16)
            B_s = T.alloc_shared((16, 64), T.float16)
            C = T.alloc_fragment((64, 64), T.float32)
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.wgmma_gemm(A_s[64:128, :], B_s, C)
            T.wait_wgmma(0)

    with pytest.raises(tvm.error.InternalError, match="sliced along its rows"):
        _source(main)


def test_wait_wgmma_takes_a_constant():
    with pytest.raises(Exception, match="T.wait_wgmma takes a constant 0..7"):
        @T.prim_func
        def main(A: T.Tensor((16,), T.float16)):
            with T.Kernel(1, threads=128):
                T.wait_wgmma(9)


def test_plain_gemm_keeps_its_lowering():
    @T.prim_func
    def main(A: T.Tensor((64, 16), T.float16), B: T.Tensor((16, 64), T.float16), D: T.Tensor((64, 64), T.float16)):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((64, 16), T.float16)
            B_s = T.alloc_shared((16, 64), T.float16)
            C = T.alloc_fragment((64, 64), T.float32)
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.gemm(A_s, B_s, C, clear_accum=True)
            T.copy(C, D)

    src = _source(main)
    assert "tl::wgmma_gemm_ss<64, 64, 16, 1, false, false, true>" in src
    assert "initialize_wgmma_descriptor" not in src
