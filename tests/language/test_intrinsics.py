"""Scalar device intrinsics of ``T`` (issue 17, deliverable 2): fast math, IEEE rounding modes,
warp vote / shuffle / match and thread positions build the CUDA calls meant and compile."""

import pytest

import tilelang
import tilelang.language as T
from tilelang.jit import nvcc

try:
    nvcc.find_nvcc()
    HAVE_NVCC = True
except Exception:  # noqa: BLE001
    HAVE_NVCC = False


@T.prim_func
def intrinsics_kernel(A: T.Tensor((128,), T.float32), B: T.Tensor((128,), T.float16),
                      C: T.Tensor((128,), T.float32), M: T.Tensor((128,), T.uint64), I: T.Tensor((128,), T.int32)):
    with T.Kernel(1, threads=128):
        tx = T.get_thread_binding()
        C[tx] = T.__exp(A[tx]) + T.ieee_add(A[tx], A[tx], "rz") + T.ieee_fmaf(A[tx], A[tx], A[tx]) + T.tan(A[tx])
        B[tx] = T.ieee_mul(B[tx], B[tx]) + T.__log(B[tx]) + T.ieee_frsqrt(B[tx])
        M[tx] = T.ballot_sync(tx >= 7) | T.activemask()
        I[tx] = (T.any_sync(tx == 0) + T.all_sync(1) + T.shfl_sync(I[tx], 31) + T.get_lane_idx()
                 + T.get_warp_idx_sync() + T.syncthreads_count(tx < 16) + T.cast(T.match_any_sync(I[tx]), "int32")
                 + T.__ffs(I[tx]) + T.get_warp_group_idx(32, 4) + T.shfl_xor(I[tx], 1))


def test_intrinsics_lower_to_the_cuda_functions():
    source = tilelang.lower(intrinsics_kernel, "sm_90a").source
    for call in ["__expf(", "__fadd_rz(", "__fmaf_rn(", "tanf(", "__hmul(", "tl::fast_log(", "hrsqrt(",
                 "tl::__ballot_sync(", "tl::__activemask()", "tl::__any_sync(", "tl::__all_sync(", "tl::__shfl_sync(",
                 "tl::get_lane_idx()", "tl::get_warp_idx_sync()", "__syncthreads_count(", "tl::__match_any_sync(",
                 "tl::__ffs(", "tl::get_warp_group_idx(32, 4)", "tl::__shfl_xor_sync("]:
        assert call in source, call


@pytest.mark.skipif(not HAVE_NVCC, reason="nvcc not found")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_intrinsics_compile(arch):
    art = tilelang.lower(intrinsics_kernel, arch)
    assert nvcc.compile_cubin(art.source, arch, art.compile_flags)[:4] == b"\x7fELF"


def test_rounding_mode_is_checked_when_traced():
    with pytest.raises(ValueError, match="Invalid rounding mode"):
        T.ieee_add(1.0, 2.0, "invalid_mode")
    with pytest.raises(ValueError, match="Only rounding mode 'rn'"):
        T.ieee_add(T.float16(1.0), T.float16(2.0), "rz")
    with pytest.raises(TypeError, match="frsqrt is not supported for float64"):
        T.ieee_frsqrt(T.float64(4.0))
    assert "__dsqrt_ru" in str(T.ieee_fsqrt(T.float64(4.0), "ru"))


def test_fast_math_rejects_integers_and_keeps_16_bit_types():
    with pytest.raises(TypeError, match="floating-point"):
        T.__exp(T.int32(1))
    assert str(T.__sin(T.bfloat16(1.0)).ty.dtype) == "bfloat16"


def test_predicates_must_be_integers():
    with pytest.raises(TypeError, match="integer or boolean predicate"):
        T.any_sync(T.float32(1.0))


def _bitwise_reduce_kernel(func, clear):
    @T.prim_func
    def k(A: T.Tensor((32, 32), T.int32), B: T.Tensor((32,), T.int32)):
        with T.Kernel(1, threads=128):
            a = T.alloc_fragment((32, 32), T.int32)
            b = T.alloc_fragment((32,), T.int32)
            T.copy(A, a)
            T.copy(B, b)
            func(a, b, clear=clear)
            T.copy(b, B)

    return k


@pytest.mark.parametrize("func, op", [(T.reduce_bitand, "BitAndOp"), (T.reduce_bitor, "BitOrOp"),
                                      (T.reduce_bitxor, "BitXorOp")])
@pytest.mark.parametrize("clear", [True, False])
def test_bitwise_reductions_lower_through_the_warp_allreduce(func, op, clear):
    art = tilelang.lower(_bitwise_reduce_kernel(func, clear), "sm_80")
    assert f"tl::warp_allreduce<tl::{op}" in art.source
    if HAVE_NVCC:
        assert nvcc.compile_cubin(art.source, "sm_80", art.compile_flags)[:4] == b"\x7fELF"


def test_bitwise_reduction_rejects_floats():
    with pytest.raises(Exception, match="integer"):
        @T.prim_func
        def k(A: T.Tensor((32, 32), T.float32), B: T.Tensor((32,), T.float32)):
            with T.Kernel(1, threads=128):
                a = T.alloc_fragment((32, 32), T.float32)
                b = T.alloc_fragment((32,), T.float32)
                T.copy(A, a)
                T.reduce_bitor(a, b)
                T.copy(b, B)


def test_warp_reductions_of_one_register():
    @T.prim_func
    def k(A: T.Tensor((32,), T.float32), B: T.Tensor((32,), T.int32)):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding()
            A[tx] = T.warp_reduce_sum(A[tx]) + T.warp_reduce_max(A[tx]) + T.warp_reduce_min(A[tx])
            B[tx] = T.warp_reduce_bitxor(B[tx]) + T.warp_reduce_bitand(B[tx]) + T.warp_reduce_bitor(B[tx])

    source = tilelang.lower(k, "sm_80").source
    for op in ["SumOp", "MaxOp", "MinOp", "BitXorOp", "BitAndOp", "BitOrOp"]:
        assert f"tl::warp_allreduce<tl::{op}, 1, 32>" in source


def test_any_of_all_of_read_contiguous_ranges_of_every_memory():
    @T.prim_func
    def k(M: T.Tensor((4, 4, 8), "bool"), C: T.Tensor((128,), T.float32)):
        with T.Kernel(4, 4, threads=128) as (bx, by):
            loc = T.alloc_local((8,), "bool")
            sh = T.alloc_shared((8,), "bool")
            for i in T.serial(8):
                loc[i] = M[by, bx, i]
            T.copy(M[by, bx, :], sh)
            tx = T.get_thread_binding()
            if T.any_of(M[by, bx, :]) and T.all_of(loc) and T.any_of(sh) and T.all_of(loc[0:4]):
                C[tx] = 1.0

    art = tilelang.lower(k, "sm_80")
    assert "tl::any_of(" in art.source and "tl::all_of((&(loc[0])), 4)" in art.source
    if HAVE_NVCC:
        assert nvcc.compile_cubin(art.source, "sm_80", art.compile_flags)[:4] == b"\x7fELF"


def test_any_of_refuses_fragments_and_strided_ranges():
    import tvm

    frag = tvm.tirx.decl_buffer((4, 4), "bool", scope="local.fragment")
    with pytest.raises(TypeError, match="fragment"):
        T.any_of(frag)
    buf = tvm.tirx.decl_buffer((4, 4), "bool", scope="shared")
    with pytest.raises(ValueError, match="contiguous"):
        T.all_of(buf[0:2, 0:2])


def test_extract_lane_device_assert_and_dp4a():
    import tvm

    vec = tvm.tirx.Var("v", "float16x2")
    assert T.extract_lane(vec, 1).indices[0].value == 1
    with pytest.raises(IndexError, match="out of bounds"):
        T.extract_lane(vec, 2)

    @T.prim_func
    def k(X: T.Tensor((8,), T.int8), Y: T.Tensor((8,), T.int8), Z: T.Tensor((2,), T.int32)):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding()
            T.device_assert(Z[0] >= 0, "negative")
            acc = T.alloc_local((1,), T.int32)
            acc[0] = 0
            T.dp4a(X[4:8], Y[0:4], acc)
            Z[tx % 2] = acc[0]

    art = tilelang.lower(k, "sm_80")
    assert 'tl::device_assert(' in art.source and "tl::dp4a((&(X[4]))" in art.source
    if HAVE_NVCC:
        assert nvcc.compile_cubin(art.source, "sm_80", art.compile_flags)[:4] == b"\x7fELF"


def test_assume_promises_the_condition_to_nvcc():
    N = T.dynamic("N")

    @T.prim_func
    def k(A: T.Tensor((N,), T.float32), lo: T.int32, hi: T.int32):
        with T.Kernel(1, threads=32):
            for i in T.serial(hi - lo + 1):
                T.assume(lo + i >= 0 and lo + i < N)
                A[lo + i] = 0

    art = tilelang.lower(k, "sm_80")
    body = art.source[art.source.index("__global__"):]
    assert "tl::assume(" in body and "if (" not in body
    if HAVE_NVCC:
        assert nvcc.compile_cubin(art.source, "sm_80", art.compile_flags)[:4] == b"\x7fELF"


def test_reinterpret_takes_the_value_first():
    a = T.reinterpret(T.float32(1.0), T.uint32)
    b = T.reinterpret(T.uint32, T.float32(1.0))  # the older order
    assert str(a.ty.dtype) == str(b.ty.dtype) == "uint32"


def test_match_compares_float_bits_and_widens_small_integers():
    import tvm

    f = T.match_all_sync(tvm.tirx.Var("x", "float32"))
    assert "tl::__match_all_sync" in str(f) and "Cast" not in type(f.args[-1]).__name__
    assert type(T.match_any_sync(tvm.tirx.Var("b", "int8")).args[-1]).__name__ == "Cast"
    with pytest.raises(TypeError, match="32/64-bit"):
        T.match_any_sync(tvm.tirx.Var("h", "float16"))


def test_ordered_atomics_or_and_packed_adds():
    @T.prim_func
    def k(F: T.Tensor((4,), T.int32), D: T.Tensor((64, 8), T.float32), H: T.Tensor((64, 8), T.float16),
          L: T.Tensor((4,), T.int64)):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding()
            S = T.alloc_shared((64, 8), T.float32)
            SH = T.alloc_shared((64, 8), T.float16)
            for i, j in T.Parallel(64, 8):
                S[i, j] = 1.0
                SH[i, j] = 1.0
            v = T.atomic_load(F[0], memory_order="acquire")
            T.atomic_store(F[1], v + 1, memory_order="release")
            T.atomic_or(F[2], tx)
            T.atomic_or(L[0], tx)
            for i, j in T.Parallel(64, 2):
                T.atomic_addx4(D[i, j * 4], S[i, j * 4])
            for i, j in T.Parallel(64, 4):
                T.atomic_addx2(H[i, j * 2], SH[i, j * 2])

    for arch in ("sm_80", "sm_90a"):
        art = tilelang.lower(k, arch)
        for call in ("tl::atomic_load<1>(", "tl::atomic_store<2>(", "tl::atomic_or(", "tl::atomic_addx4(",
                     "tl::atomic_addx2("):
            assert call in art.source, call
        if HAVE_NVCC:
            assert nvcc.compile_cubin(art.source, arch, art.compile_flags)[:4] == b"\x7fELF"


def ordered_rmw_kernel():
    """Upstream's stream-K fixup: partial tiles written, then a counter bumped with release
    (element atomics); a tile atomic with acq_rel; a relaxed one, unchanged."""

    @T.prim_func
    def k(P: T.Tensor((64, 8), T.float32), C: T.Tensor((4,), T.int32), M: T.Tensor((4,), T.float32),
          D: T.Tensor((64, 8), T.float32)):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding()
            S = T.alloc_shared((64, 8), T.float32)
            for i, j in T.Parallel(64, 8):
                S[i, j] = 1.0
                P[i, j] = 2.0
            T.atomic_add(C[0], 1, memory_order="release")
            old = T.atomic_add(C[1], 1, memory_order="acquire", return_prev=True)
            T.atomic_max(M[0], T.float32(tx), memory_order="seq_cst")
            T.atomic_min(M[1], T.float32(old), memory_order="relaxed")
            T.atomic_add(D, S, memory_order="acq_rel")

    return k


def test_read_modify_write_atomics_with_a_memory_order():
    for arch in ("sm_80", "sm_90a"):
        art = tilelang.lower(ordered_rmw_kernel(), arch)
        src = art.source
        for call in ("tl::atomic_add_ordered<2>(", "tl::atomic_add_ordered<1>(", "tl::atomic_max_ordered<3>(",
                     "tl::atomic_min((&(M[1]))", "tl::rmw_fence_before<4>()", "tl::rmw_fence_after<4>()"):
            assert call in src, call
        # the tile atomic sits between its two fences
        assert src.index("tl::rmw_fence_before<4>()") < src.index("D[") < src.index("tl::rmw_fence_after<4>()")
        if HAVE_NVCC:
            assert nvcc.compile_cubin(src, arch, art.compile_flags)[:4] == b"\x7fELF"


def test_atomic_argument_checks():
    import tvm

    buf = tvm.tirx.decl_buffer((4,), "float32")
    with pytest.raises(ValueError, match="memory_order"):
        T.atomic_load(buf[0], memory_order="release")
    with pytest.raises(ValueError, match="memory_order must be one of .*'acq_rel'"):
        T.atomic_add(buf[0], 1.0, memory_order="strong")
    with pytest.raises(TypeError, match="integer"):
        T.atomic_or(buf[0], 1)
    half = tvm.tirx.decl_buffer((4,), "float16")
    with pytest.raises(TypeError, match="float32"):
        T.atomic_addx4(half[0], half[0])


@pytest.mark.parametrize("reverse", [False, True])
def test_cummax_is_the_running_maximum(reverse):
    @T.prim_func
    def k(A: T.Tensor((64, 64), T.float32), B: T.Tensor((64, 64), T.float32)):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((64, 64), T.float32)
            f = T.alloc_fragment((64, 64), T.float32)
            T.copy(A, s)
            T.copy(s, f)
            T.cummax(f, dim=1, reverse=reverse)
            T.copy(f, B)

    source = tilelang.lower(k, "sm_80").source
    assert "-CUDART_INF_F" in source and "max(cumsum_acc," in source


@pytest.mark.parametrize("dtype, suffix", [(T.float32, "float2"), (T.float16, "__half2"), (T.bfloat16, "__nv_bfloat162")])
def test_packed_pair_arithmetic(dtype, suffix):
    @T.prim_func
    def k(A: T.Tensor((256,), dtype), B: T.Tensor((256,), dtype), C: T.Tensor((256,), dtype),
          D: T.Tensor((256,), dtype)):
        with T.Kernel(1, threads=128):
            tid = T.get_thread_binding()
            idx = T.Ramp(tid * 2, 1, 2)
            D[idx] = T.add2(T.fma2(A[idx], B[idx], C[idx]),
                            T.abs2(T.max2(T.sub2(A[idx], B[idx]), T.min2(A[idx], T.mul2(B[idx], C[idx])))))

    art = tilelang.lower(k, "sm_80")
    for op in ("add2", "sub2", "mul2", "fma2", "max2", "min2", "abs2"):
        assert f"tl::{op}<{suffix}>(" in art.source
    if HAVE_NVCC:
        assert nvcc.compile_cubin(art.source, "sm_80", art.compile_flags)[:4] == b"\x7fELF"


def test_packed_ops_need_pairs_of_one_dtype():
    import tvm

    with pytest.raises(ValueError, match="float32x2"):
        T.add2(tvm.tirx.Var("a", "float32x4"), tvm.tirx.Var("b", "float32x4"))
    with pytest.raises(ValueError, match="same dtype"):
        T.fma2(tvm.tirx.Var("a", "float16x2"), tvm.tirx.Var("b", "float16x2"), tvm.tirx.Var("c", "bfloat16x2"))


def test_atomic_or_refuses_an_order_it_cannot_give():
    with pytest.raises(NotImplementedError, match="relaxed atomicOr"):
        T.atomic_or(None, 1, memory_order="seq_cst")
