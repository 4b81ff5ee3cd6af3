"""``T.view`` of a shared buffer as another element type (CPU: IR, generated CUDA, errors).

The view reads the buffer's bytes: a narrower view shifts its piece out of one buffer element, a
wider one joins several, each element addressed through the buffer's own layout (swizzle too).
Numerics on the GPU: tests/gpu/test_views_dtype_gpu.py.
"""

import re

import pytest

import tilelang
import tilelang.language as T
from tilelang.diagnostics import TileLangCompileError


def _reinterpret_kernel(shape, dtype, new_shape, new_dtype, swizzled=False):
    @T.prim_func
    def main(A: T.Tensor(shape, dtype), B: T.Tensor(new_shape, new_dtype)):
        with T.Kernel(1, threads=128):
            A_shared = T.alloc_shared(shape, dtype)
            A_view = T.view(A_shared, new_shape, dtype=new_dtype)
            if swizzled:
                T.annotate_layout({A_shared: tilelang.layout.make_swizzled_layout(A_shared)})
            T.copy(A, A_shared)
            T.copy(A_view, B)

    return main


def _body(art):
    src = art.source
    return src[src.index("__global__"):]


def test_narrowing_view_shifts_a_piece_out_of_one_element():
    art = tilelang.lower(_reinterpret_kernel((64, 64), T.float32, (64, 128), T.bfloat16), "sm_90a", out_idx=-1)
    body = _body(art)
    # one float read per bf16, the half chosen by the view index's parity
    assert "((float*)smem)[" in body and "nv_bfloat16*)smem" not in body
    assert re.search(r"\(ushort\)\(\(\*\(uint \*\)\(&\(\w+\)\)\) >> \(\(uint\)\(\(v & 1\) \* 16\)\)\)", body)
    assert "A_view" not in body


def test_widening_view_joins_consecutive_elements():
    art = tilelang.lower(_reinterpret_kernel((64, 128), T.bfloat16, (64, 64), T.float32), "sm_90a", out_idx=-1)
    body = _body(art)
    assert body.count("((nv_bfloat16*)smem)[") >= 3     # the copy in, and two halves per float out
    assert "<< (uint)16" in body and "(*(float *)(&(" in body


def test_swizzled_buffer_is_read_through_its_swizzle():
    plain = _body(tilelang.lower(_reinterpret_kernel((64, 128), T.bfloat16, (64, 64), T.float32), "sm_90a",
                                 out_idx=-1))
    swz = _body(tilelang.lower(_reinterpret_kernel((64, 128), T.bfloat16, (64, 64), T.float32, True), "sm_90a",
                               out_idx=-1))
    reads = [line for line in swz.splitlines() if "nv_bfloat16 v_" in line]
    assert len(reads) == 2 and all("^" in line for line in reads)    # the XOR of the swizzle, per element
    assert not any("^" in line for line in plain.splitlines() if "nv_bfloat16 v_" in line)


def test_reinterpreting_views_compile_with_nvcc():
    art = tilelang.lower(_reinterpret_kernel((64, 64), T.float32, (64, 128), T.bfloat16, True), "sm_90a",
                         out_idx=-1, enable_device_compile=True)
    assert art.cubin


def test_row_major_annotation_of_a_dtype_view_is_accepted():
    @T.prim_func
    def main(A: T.Tensor((64, 64), T.float16), B: T.Tensor((64, 128), T.int8)):
        with T.Kernel(1, threads=128):
            A_stage = T.alloc_shared((2, 64, 64), T.float16, scope="shared.dyn")
            A_i8 = T.view(A_stage, (2, 64, 128), dtype=T.int8)
            T.annotate_layout({A_i8: T.Layout((2, 64, 128), lambda s, i, j: [s, i, j])})
            for i, j in T.Parallel(64, 64):
                A_stage[0, i, j] = A[i, j]
            for i, j in T.Parallel(64, 128):
                B[i, j] = A_i8[0, i, j]

    body = _body(tilelang.lower(main, "sm_90a", out_idx=-1))
    assert "(signed char)((uchar)(" in body and "((half*)smem)[" in body


def test_other_annotation_of_a_dtype_view_is_a_located_error():
    @T.prim_func
    def main(A: T.Tensor((64, 64), T.float16), B: T.Tensor((64, 128), T.int8)):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((64, 64), T.float16)
            A_i8 = T.view(A_s, (64, 128), dtype=T.int8)
            T.annotate_layout({A_i8: T.Layout((64, 128), lambda i, j: [j, i])})
            T.copy(A, A_s)
            T.copy(A_i8, B)

    with pytest.raises(TileLangCompileError, match="only the row-major layout") as err:
        tilelang.lower(main, "sm_90a", out_idx=-1)
    assert err.value.diagnostics[0].span.line > 0


def test_widening_store_writes_each_element_and_narrowing_store_is_refused():
    @T.prim_func
    def widen(A: T.Tensor((64,), T.float32), B: T.Tensor((128,), T.float16)):
        with T.Kernel(1, threads=64):
            S = T.alloc_shared((128,), T.float16)
            W = T.view(S, (64,), dtype=T.float32)
            for i in T.Parallel(64):
                W[i] = A[i]
            T.copy(S, B)

    body = _body(tilelang.lower(widen, "sm_90a", out_idx=-1))
    assert body.count("((half*)smem)[") >= 3      # two half stores per float, then the copy out

    @T.prim_func
    def narrow(A: T.Tensor((128,), T.float16), B: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=64):
            S = T.alloc_shared((64,), T.float32)
            H = T.view(S, (128,), dtype=T.float16)
            for i in T.Parallel(128):
                H[i] = A[i]
            T.copy(S, B)

    with pytest.raises(TileLangCompileError, match="would rewrite part of an element"):
        tilelang.lower(narrow, "sm_90a", out_idx=-1)


def _gemm_on_view_kernel(B=64, D=128, H=64, src_dtype="uint8", dtype="float8_e4m3fn"):
    # sglang's fp8 paged MQA logits: K arrives as the bytes of a page (a 1-D uint8 shared buffer)
    # and the gemm reads them as a (B, D) fp8 tile
    @T.prim_func
    def main(q: T.Tensor((H, D), dtype), kv: T.Tensor((B * D,), src_dtype), o: T.Tensor((B, H), "float32")):
        with T.Kernel(1, threads=128):
            q_s = T.alloc_shared((H, D), dtype)
            k_bytes = T.alloc_shared((B * D,), src_dtype)
            T.copy(q, q_s)
            T.copy(kv, k_bytes)
            k_s = T.view(k_bytes, (B, D), dtype)
            acc = T.alloc_fragment((B, H), "float32")
            T.gemm(k_s, q_s, acc, transpose_B=True, clear_accum=True)
            T.copy(acc, o)

    return main


def test_gemm_on_a_view_of_another_type_and_shape_runs_on_a_staged_tile():
    art = tilelang.lower(_gemm_on_view_kernel(), "sm_90a", enable_device_compile=True)
    assert art.cubin
    body = _body(art)
    # the view's bytes are copied once into a tile of the gemm's own layout (swizzled), 16 bytes
    # at a time through unsigned views of both buffers, before the gemm reads that tile
    staging = [line for line in body.splitlines() if line.strip().startswith("*(uint4*)(smem +")]
    assert len(staging) == 1 and "^" in staging[0].split("=")[0]
    assert "tl::wgmma_gemm_ss<64, 64, 128" in body


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_gemm_on_a_reshape_of_a_flat_buffer(arch):
    art = tilelang.lower(_gemm_on_view_kernel(D=64, src_dtype="float16", dtype="float16"), arch,
                         enable_device_compile=True)
    assert art.cubin
    assert ("tl::wgmma_gemm_ss<64, 64, 64" if arch == "sm_90a" else "tl::gemm_ss<") in _body(art)


def _fp4_views_kernel(rows=16, cols=64):
    """Bytes P stored through a uint8 view of an fp4 shared buffer (each byte two elements, the
    even one in the low nibble), read back through the view (Y) and element-wise as floats (Z);
    the same bytes in a uint8 buffer read through an fp4 view (Z2)."""
    @T.prim_func
    def main(P: T.Tensor((rows, cols // 2), T.uint8), Y: T.Tensor((rows, cols // 2), T.uint8),
             Z: T.Tensor((rows, cols), T.float32), Z2: T.Tensor((rows, cols), T.float32)):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((rows, cols), T.float4_e2m1fn)
            v = T.view(s, shape=[rows, cols // 2], dtype=T.uint8)
            for i, j in T.Parallel(rows, cols // 2):
                v[i, j] = P[i, j]
            T.copy(v, Y)
            for i, j in T.Parallel(rows, cols):
                Z[i, j] = T.cast(s[i, j], T.float32)
            b = T.alloc_shared((rows, cols // 2), T.uint8)
            T.copy(P, b)
            w = T.view(b, shape=[rows, cols], dtype=T.float4_e2m1fn)
            for i, j in T.Parallel(rows, cols):
                Z2[i, j] = T.cast(w[i, j], T.float32)

    return main


def test_fp4_shared_buffer_viewed_as_bytes_and_bytes_as_fp4():
    # upstream #1936: T.view(fp4 shared, [rows, cols // 2], uint8) to write the packed bytes out
    art = tilelang.lower(_fp4_views_kernel(), "sm_90a", enable_device_compile=True)
    body = _body(art)
    assert art.cubin
    assert body.count("tl::fp4_bits(") == 2             # a byte read through the view: both nibbles
    assert body.count("tl::fp4_store(smem") == 2        # a byte stored through it: each nibble
    assert "tl::fp4_from_bits(" in body                 # an fp4 element of the uint8 buffer's byte


def test_fp4_view_of_a_fragment_is_a_located_error():
    @T.prim_func
    def main(X: T.Tensor((16, 64), T.float32), Y: T.Tensor((16, 32), T.uint8)):
        with T.Kernel(1, threads=128):
            f = T.alloc_fragment((16, 64), T.float4_e2m1fn)
            for i, j in T.Parallel(16, 64):
                f[i, j] = T.cast(X[i, j], T.float4_e2m1fn)
            v = T.view(f, shape=[16, 32], dtype=T.uint8)
            T.copy(v, Y)

    with pytest.raises(TileLangCompileError, match="may change the element type only to one of the same width") \
            as err:
        tilelang.lower(main, "sm_90a")
    assert err.value.diagnostics[0].span.line > 0
