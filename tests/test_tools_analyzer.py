"""tilelang.tools.Analyzer: FLOPs of T.gemm, global bytes of tile-op regions and element accesses
(per block times grid and loop trip counts), and the roofline estimate against a device."""

import math

import pytest
import tvm

import tilelang
import tilelang.language as T
from tilelang.carver.arch import CUDA
from tilelang.tools import AnalysisResult, Analyzer


class _BareDevice:
    """What upstream's own tests pass: a compute capability and upstream's bandwidth weights."""
    compute_capability = "80"
    bandwidth = [750, 12080]


def _gemm(M, N, K, bm, bn, bk, trans_b=True, dtype=T.float16):
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((N, K) if trans_b else (K, N), dtype),
             C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), dtype)
            B_s = T.alloc_shared((bn, bk) if trans_b else (bk, bn), dtype)
            C_l = T.alloc_fragment((bm, bn), T.float32)
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                T.copy(A[by * bm, k * bk], A_s)
                if trans_b:
                    T.copy(B[bx * bn, k * bk], B_s)
                else:
                    T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_l, transpose_B=trans_b)
            T.copy(C_l, C[by * bm, bx * bn])
    return main


def test_gemm_flops_and_bytes():
    result = Analyzer.analysis(_gemm(64, 64, 64, 32, 32, 32), _BareDevice())
    assert result.total_flops == 2 * 64 * 64 * 64
    # 4 blocks x (2 k-steps x two 32x32 fp16 tiles read + one 32x32 fp16 tile written)
    assert result.total_global_bytes == 4 * (2 * 2 * 2048 + 2048) == 40_960
    assert isinstance(result, AnalysisResult)


def test_gemm_not_transposed_and_uneven_tiles():
    result = Analyzer.analysis(_gemm(256, 128, 512, 128, 64, 32, trans_b=False), CUDA("sm_90a"))
    assert result.total_flops == 2 * 256 * 128 * 512
    blocks, ksteps = 2 * 2, 512 // 32
    assert result.total_global_bytes == blocks * (ksteps * (128 * 32 + 32 * 64) * 2 + 128 * 64 * 2)


def test_single_block_and_grid_reset():
    @T.prim_func
    def one(A: T.Tensor((32, 32), T.float16), B: T.Tensor((32, 32), T.float16),
            C: T.Tensor((32, 32), T.float16)):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((32, 32), T.float16)
            B_s = T.alloc_shared((32, 32), T.float16)
            C_l = T.alloc_fragment((32, 32), T.float32)
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.clear(C_l)
            T.gemm(A_s, B_s, C_l, transpose_B=True)
            T.copy(C_l, C)

    analyzer = Analyzer(one, _BareDevice())
    analyzer.block_counts["blockIdx.y"] = 7
    result = analyzer.ir_pass().calculate()
    assert (result.total_flops, result.total_global_bytes) == (2 * 32 ** 3, 3 * 2048)
    again = analyzer.ir_pass().calculate()   # counting twice does not accumulate
    assert again.total_flops == result.total_flops


def test_elementwise_global_accesses_count_per_element():
    @T.prim_func
    def scale(A: T.Tensor((1024, 256), T.float32), B: T.Tensor((1024, 256), T.float16)):
        with T.Kernel(1024 // 64, threads=128) as bx:
            for i, j in T.Parallel(64, 256):
                B[bx * 64 + i, j] = T.cast(A[bx * 64 + i, j] * 2.0, T.float16)

    result = Analyzer.analysis(scale, CUDA("sm_90a"))
    assert result.total_flops == 0
    assert result.total_global_bytes == 1024 * 256 * (4 + 2)
    assert result.bound == "memory" and result.compute_time == 0.0
    assert result.estimated_time == pytest.approx(result.total_global_bytes / (result.expected_bandwidth_GBps * 1e9))


def test_global_to_global_copy_counts_both_ways():
    @T.prim_func
    def k(A: T.Tensor((128, 128), T.float16), B: T.Tensor((128, 128), T.float16)):
        with T.Kernel(2, threads=128) as bx:
            T.copy(A[bx * 64:bx * 64 + 64, 0:128], B[bx * 64:bx * 64 + 64, 0:128])

    # 2 blocks x 64x128 fp16 read from A and written to B
    assert Analyzer.analysis(k, _BareDevice()).total_global_bytes == 2 * 2 * 64 * 128 * 2


def test_estimate_uses_the_device_facts():
    func = _gemm(4096, 4096, 4096, 128, 128, 64)
    dev = CUDA("sm_80")
    result = Analyzer.analysis(func, dev)
    assert result.expected_bandwidth_GBps == 2039.0 and result.expected_tflops == 312.0
    assert result.compute_time == pytest.approx(2 * 4096 ** 3 / 312e12)
    # DRAM traffic: A, B read and C written once each (tile re-reads by other blocks hit the L2)
    assert result.dram_bytes == 3 * 4096 * 4096 * 2 < result.total_global_bytes
    assert result.memory_time == pytest.approx(result.dram_bytes / 2039e9)
    assert result.estimated_time == max(result.compute_time, result.memory_time)
    assert result.bound == ("compute" if result.compute_time > result.memory_time else "memory")
    assert result.arithmetic_intensity == pytest.approx(result.total_flops / result.dram_bytes)
    assert "FLOPs" in str(result)


def test_bare_device_reads_upstream_bandwidth_convention():
    result = Analyzer.analysis(_gemm(64, 64, 64, 32, 32, 32), _BareDevice())
    assert result.expected_bandwidth_GBps == 12.08
    assert result.expected_tflops == 312.0   # sm_80 fp16 tensor-core peak from tilelang.targets


def test_unknown_peak_leaves_compute_time_open():
    class Dev:
        compute_capability = "75"
        bandwidth = [0, 300_000]

    result = Analyzer.analysis(_gemm(64, 64, 64, 32, 32, 32), Dev())
    assert result.compute_time is None and result.expected_tflops is None
    assert result.estimated_time == result.memory_time


def test_irmodule_and_jit_factory():
    M = N = K = 128

    @tilelang.jit
    def eager(A, B):
        A: T.Tensor((M, K), T.float16)
        B: T.Tensor((N, K), T.float16)
        C = T.empty((M, N), T.float16)
        with T.Kernel(2, 2, threads=128) as (bx, by):
            A_s = T.alloc_shared((64, 64), T.float16)
            B_s = T.alloc_shared((64, 64), T.float16)
            C_l = T.alloc_fragment((64, 64), T.float32)
            T.clear(C_l)
            for k in T.serial(2):
                T.copy(A[by * 64, k * 64], A_s)
                T.copy(B[bx * 64, k * 64], B_s)
                T.gemm(A_s, B_s, C_l, transpose_B=True)
            T.copy(C_l, C[by * 64, bx * 64])
        return C

    func = eager.get_tir()
    mod = tvm.IRModule({"main": func})
    assert Analyzer.analysis(mod, _BareDevice()).total_flops == 2 * 128 ** 3
    with pytest.raises(TypeError, match="PrimFunc"):
        Analyzer("not a kernel", _BareDevice())


def test_symbolic_extent_is_a_clear_error():
    n = T.dynamic("n")

    @T.prim_func
    def dyn(A: T.Tensor((n, 64), T.float16), B: T.Tensor((n, 64), T.float16)):
        with T.Kernel(T.ceildiv(n, 64), threads=128) as bx:
            S = T.alloc_shared((64, 64), T.float16)
            T.copy(A[bx * 64, 0], S)
            T.copy(S, B[bx * 64, 0])

    with pytest.raises(ValueError, match=r"grid dimension blockIdx.x .* not a constant.*static shapes"):
        Analyzer.analysis(dyn, _BareDevice())


def test_zero_traffic_kernel():
    @T.prim_func
    def nothing(A: T.Tensor((16,), T.float32)):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((16,), T.float32)
            T.clear(S)

    result = Analyzer.analysis(nothing, _BareDevice())
    assert (result.total_flops, result.total_global_bytes, result.arithmetic_intensity) == (0, 0, 0.0)
    assert not math.isnan(result.estimated_time)
