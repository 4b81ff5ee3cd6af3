"""Generated structure pinned for session 13's vectorisation changes (CPU only: the CUDA source).

* tile-level ``T.atomic_add`` from shared / global memory uses packed atomics (``tl::atomic_addx4``
  for float32, ``tl::atomic_addx2`` for 16-bit floats on sm_90) where both sides are contiguous
  and aligned, and stays element-wise otherwise;
* a ``T.Parallel`` store whose value converts float16 <-> float32 (``Q[i] * scale`` into a float16
  tile) runs 4 lanes at a time with paired conversions;
* a global read indexed by a ``T.Pipelined`` loop without stages, or by block indices remapped by
  ``T.use_swizzle``, needs no bounds guard when the tile provably fits (and so can be vectorized).
"""

import tilelang
import tilelang.language as T


def _src(func, target="sm_90a"):
    src = tilelang.lower(func, target=target).source
    return src[src.find('extern "C" __global__ void __launch'):]


def test_atomic_add_from_shared_is_packed_x4():
    @T.prim_func
    def k(A: T.Tensor((128, 64), "float32"), O: T.Tensor((128, 64), "float32")):
        with T.Kernel(2, threads=128) as bx:
            S = T.alloc_shared((64, 64), "float32")
            T.copy(A[bx * 64:(bx + 1) * 64, :], S)
            T.atomic_add(O[bx * 64:(bx + 1) * 64, :], S)

    src = _src(k)
    assert src.count("tl::atomic_addx4(") == 1 and "tl::atomic_add(" not in src
    assert "it < 8" in src          # 64 * 64 / 4 vectors over 128 threads


def test_atomic_add_half_is_packed_x2_and_odd_rows_stay_scalar():
    @T.prim_func
    def k(A: T.Tensor((64, 64), "float16"), O: T.Tensor((64, 64), "float16"),
          C: T.Tensor((64, 63), "float32"), D: T.Tensor((64, 63), "float32")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((64, 64), "float16")
            T.copy(A, S)
            T.atomic_add(O, S)
            T.atomic_add(D, C)      # rows of 63: no aligned vector

    src = _src(k)
    assert src.count("tl::atomic_addx2(") == 1
    assert src.count("tl::atomic_add(") == 1


def test_atomic_max_and_mixed_types_stay_element_wise():
    @T.prim_func
    def k(A: T.Tensor((64, 64), "float32"), O: T.Tensor((64, 64), "float32"),
          H: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((64, 64), "float32")
            T.copy(A, S)
            T.atomic_max(O, S)
            T.atomic_add(H, S)      # float32 into float16: converted per element

    src = _src(k)
    assert "atomic_addx" not in src
    assert "tl::atomic_max(" in src and "tl::atomic_add(" in src


def test_atomic_add_before_sm80_stays_element_wise():
    @T.prim_func
    def k(A: T.Tensor((64, 64), "float32"), O: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            T.atomic_add(O, A)

    assert "atomic_addx" not in _src(k, target="sm_75")


def _scaled_load(stages):
    @T.prim_func
    def k(Q: T.Tensor((4, 1024, 8, 128), "float16"), O: T.Tensor((4, 1024, 8, 128), "float16")):
        with T.Kernel(2, 2, 32, threads=128) as (bx, by, bz):
            q = T.alloc_shared((64, 64), "float16")
            T.use_swizzle(10)
            for i in T.Pipelined(16, num_stages=stages):
                for r, c in T.Parallel(64, 64):
                    q[r, c] = Q[bz // 8, i * 64 + r, bz % 8, by * 64 + c] * 0.125
                T.copy(q, O[bz // 8, i * 64:(i + 1) * 64, bz % 8, by * 64:(by + 1) * 64])
    return k


def test_parallel_cast_store_runs_four_lanes_with_paired_conversions():
    src = _src(_scaled_load(0))
    # no bounds guard (the loop and the swizzled block indices are bounded), 8-byte loads
    assert "half4 v_ = *(half4*)(Q + " in src
    assert "__half22float2(tl::vpart<half2, 0>(v_))" in src
    assert "__float22half2_rn(tl::vpart<float2, 0>(" in src
    assert "*(half4*)(((half*)smem) + " in src
    assert "? " not in src and "condval" not in src


def test_cast_vectorisation_needs_paired_types():
    @T.prim_func
    def k(A: T.Tensor((64, 64), "int32"), B: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            for r, c in T.Parallel(64, 64):
                B[r, c] = T.Cast("float32", A[r, c]) * 2.0

    src = _src(k)
    assert "float4" not in src and "int4" not in src


def test_fragment_cast_to_fp8_is_paired():
    @T.prim_func
    def k(X: T.Tensor((64, 128), "float32"), Y: T.Tensor((64, 128), "float8_e4m3fn")):
        with T.Kernel(8, threads=128) as bx:
            x = T.alloc_fragment((8, 128), "float32")
            y = T.alloc_fragment((8, 128), "float8_e4m3fn")
            T.copy(X[bx * 8:(bx + 1) * 8, :], x)
            T.copy(x, y)
            T.copy(y, Y[bx * 8:(bx + 1) * 8, :])

    src = _src(k)
    # two registers per conversion, saturating as the scalar __nv_fp8_e4m3(float) is
    assert "__nv_cvt_float2_to_fp8x2(tl::vbits<float2>(" in src and "__NV_SATFINITE, __NV_E4M3" in src
    assert "((__nv_fp8_e4m3)" not in src
