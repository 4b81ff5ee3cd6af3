"""Codegen-level intrinsics and properties of the generated CUDA (CPU: lowering, source text, nvcc).

Explicit-width loads/stores (T.ldg*/stg*/lds*/sts*), T.__ldg, T.import_source, T.access_ptr,
T.annotate_restrict_buffers, the splitting of wide T.vectorized loops, T.unroll's pragma, CUDA's
isfinite, and the prelude's `#if` spelling.
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


def _src(func, arch="sm_90a"):
    return tilelang.lower(func, arch).source


def _body(source):
    return source[source.index('extern "C" __global__'):]


def _compiles(art_source, arch="sm_90a"):
    if HAVE_NVCC:
        assert nvcc.compile_cubin(art_source, arch, [])[:4] == b"\x7fELF"


def test_explicit_width_loads_and_stores():
    @T.prim_func
    def k(X: T.Tensor((256,), T.float32), Y: T.Tensor((256,), T.float32)):
        with T.Kernel(32, threads=32) as pid:
            S = T.alloc_shared((256,), T.float32)
            v = T.ldg128(X[pid * 4:pid * 4 + 4])
            T.sts128(S[pid * 4:pid * 4 + 4], v)
            T.sync_threads()
            w = T.lds128(S[pid * 4:pid * 4 + 4])
            T.stg128(Y[pid * 4:pid * 4 + 4], w, pred=pid < 16)
            Y[pid * 2:pid * 2 + 2] = T.reinterpret(T.ldg64(X[pid * 2:pid * 2 + 2], pred=pid < 8), T.float32x2)
            T.stg32(Y[pid], T.reinterpret(X[pid], T.uint32))

    src = _src(k)
    body = _body(src)
    for fn in ("load_global_128(", "store_shared_128(", "load_shared_128(", "store_global_128_conditional(",
               "load_global_64_conditional(", "store_global_32("):
        assert "tl::" + fn in body, fn
    # one whole-vector call, not one per lane
    assert body.count("tl::load_global_128(") == 1 and ".x = tl::load" not in body
    _compiles(src)


def test_explicit_width_checks():
    with pytest.raises(ValueError, match="64 bits"):
        @T.prim_func
        def k(X: T.Tensor((256,), T.float32)):
            with T.Kernel(1, threads=32):
                T.ldg64(X[0:4])

    with pytest.raises(TypeError, match="shared memory"):
        @T.prim_func
        def k2(X: T.Tensor((256,), T.float32)):
            with T.Kernel(1, threads=32):
                T.lds32(X[0])


def test_ldg_address_form():
    @T.prim_func
    def k(x: T.Tensor((128,), T.float16), y: T.Tensor((128,), T.float16)):
        with T.Kernel(128, threads=32) as pid:
            y[pid] = T.__ldg(x[pid])

    src = _src(k)
    assert "__ldg(&(x[" in src
    _compiles(src)


def test_import_source_and_access_ptr():
    helper = "__device__ void tl_test_twice(const float *a, float *b) { b[0] = 2.0f * a[0]; }"

    @T.prim_func
    def k(A: T.Tensor((128,), T.float32), B: T.Tensor((128,), T.float32)):
        with T.Kernel(1, threads=128) as _:
            tx = T.get_thread_binding()
            a = T.alloc_local((1,), T.float32)
            b = T.alloc_local((1,), T.float32)
            T.import_source(helper)
            T.import_source(helper)   # once in the source however often imported
            a[0] = A[tx]
            T.call_extern("void", "tl_test_twice", T.access_ptr(a, "r"), T.access_ptr(b, "w"))
            B[tx] = b[0]

    src = _src(k)
    assert src.count("tl_test_twice(const float") == 1
    assert src.index("tl_test_twice(const float") < src.index('extern "C" __global__')
    assert "__tl_import_source" not in src
    _compiles(src)


def test_annotate_restrict_buffers_drops_restrict():
    @T.prim_func
    def k(x: T.Tensor((128,), T.float32), y: T.Tensor((128,), T.float32), z: T.Tensor((128,), T.float32)):
        with T.Kernel(128, threads=32) as pid:
            T.annotate_restrict_buffers(x, y)
            y[pid] = x[pid] + z[pid]

    sig = next(line for line in _src(k).splitlines() if line.startswith('extern "C" __global__'))
    assert "__restrict__ x" not in sig and "__restrict__ y" not in sig and "__restrict__ z" in sig


def test_wide_vectorized_loop_is_split_by_alignment():
    def make(stride):
        @T.prim_func
        def k(A: T.StridedTensor((128, 128), (1, stride), T.float32),
              B: T.StridedTensor((128, 128), (1, stride), T.float32)):
            with T.Kernel(1, threads=128):
                col = T.get_thread_binding(0)
                for row in T.vectorized(128):
                    B[row, col] = A[row, col]
        return k

    aligned, odd = _src(make(128)), _src(make(130))
    assert "float4" in aligned and "float32x128" not in aligned
    assert "float2" in odd and "float4" not in _body(odd)


def test_vectorized_invariant_load_limits_width():
    @T.prim_func
    def k(A: T.Tensor((128, 128), T.float32), B: T.Tensor((128, 128), T.float32), C: T.Tensor((128, 64), T.float32)):
        with T.Kernel(1, threads=128):
            r = T.get_thread_binding(0)
            for c in T.vectorized(128):
                B[r, c] = A[r, c] * C[r, c // 2]

    body = _body(_src(k))
    assert "float2" in body and "float4" not in body


def test_unroll_keeps_a_pragma_loop_and_honours_step():
    @T.prim_func
    def k(A: T.Tensor((16, 16), T.float32)):
        with T.Kernel(1, threads=128):
            for i in T.unroll(0, 16, step=4):
                A[0, i] = 1.0
            for j in T.unroll(4, unroll_factor=2):
                A[1, j] = 2.0

    body = _body(_src(k))
    assert "#pragma unroll\n" in body and "#pragma unroll 2" in body
    assert "(v * 4)" in body or "v * 4" in body    # i = 4 * v: the step is applied


def test_isfinite_is_cudas():
    @T.prim_func
    def k(x: T.Tensor((1,), T.float32), h: T.Tensor((1,), T.float16), y: T.Tensor((2,), T.int32)):
        with T.Kernel(1, threads=1):
            y[0] = T.if_then_else(T.isfinite(x[0]), 1, 0)
            y[1] = T.if_then_else(T.isfinite(h[0]), 1, 0)

    body = _body(_src(k))
    assert body.count("isfinite(") == 2 and "CUDART_INF_F" not in body


def test_prelude_has_no_branch_text():
    @T.prim_func
    def k(A: T.Tensor((128,), T.bfloat16)):
        with T.Kernel(1, threads=128):
            A[T.get_thread_binding()] = T.bfloat16(1)

    src = _src(k)
    assert "if (" not in src
    _compiles(src)


def test_one_element_copy():
    @T.prim_func
    def k(A: T.Tensor((256,), T.int32), B: T.Tensor((256,), T.int32)):
        with T.Kernel(4, threads=64) as bx:
            T.copy(A[bx * 64], B[bx * 64])

    body = _body(_src(k))
    assert "B[(((int)blockIdx.x) * 64)] = A[(((int)blockIdx.x) * 64)]" in body
