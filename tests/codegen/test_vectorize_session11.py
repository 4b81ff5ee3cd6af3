"""Session 11 codegen: wide accesses in T.Parallel, packed pair arithmetic, negative vector
indices, scalar fp4 stores. CPU checks of the generated CUDA (and nvcc where it is installed);
results on a GPU: tests/gpu/test_vectorize_session11_gpu.py."""

import pytest

import tilelang
import tilelang.language as T
from tilelang.codegen.packed_arith import pack_vector_arith
from tilelang.jit import nvcc

try:
    nvcc.find_nvcc()
    HAVE_NVCC = True
except Exception:  # noqa: BLE001
    HAVE_NVCC = False


def _source(func, arch):
    return tilelang.lower(func, arch).source


def _kernel_text(src):
    return src[src.index('extern "C" __global__'):]


def elementwise(dtype, width=4, op="add", rows=128):
    @T.prim_func
    def main(A: T.Tensor((rows, width), dtype), B: T.Tensor((rows, width), dtype), C: T.Tensor((rows, width), dtype),
             D: T.Tensor((rows, width), dtype)):
        with T.Kernel(1, threads=128):
            for i, j in T.Parallel(rows, width):
                if op == "add":
                    D[i, j] = A[i, j] + B[i, j]
                elif op == "fma":
                    D[i, j] = A[i, j] * B[i, j] + C[i, j]
                else:
                    D[i, j] = A[i, j] * B[i, j] - C[i, j]

    return main


def test_parallel_elementwise_uses_16_byte_accesses():
    src = _kernel_text(_source(elementwise(T.float32, width=8), "sm_90a"))
    # two float4 per thread, the outer loop named after the nest's first variable
    assert "for (int i = 0; i < 2; ++i)" in src
    assert "*(float4*)(D + ((i * 512) + (((int)threadIdx.x) * 4))) = " in src
    assert "*(float4*)(A + ((i * 512) + (((int)threadIdx.x) * 4)))" in src
    assert "tl::add2" not in src            # fp32 pairs only on sm_100


def test_parallel_copy_into_swizzled_shared_is_vectorized():
    from tilelang.layout import make_swizzled_layout

    @T.prim_func
    def main(A: T.Tensor((128, 32), T.float32)):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((128, 32), T.float32)
            T.annotate_layout({S: make_swizzled_layout(S)})
            for i, j in T.Parallel(128, 32):
                S[i, j] = A[i, j]

    src = _kernel_text(_source(main, "sm_90a"))
    assert "*(float4*)(((float*)smem) + " in src and "*(float4*)(A + " in src


def test_unprovable_alignment_stays_scalar():
    n = T.dynamic("n")

    @T.prim_func
    def main(A: T.Tensor((128, n), T.float32), B: T.Tensor((128, n), T.float32)):
        with T.Kernel(1, threads=128):
            for i, j in T.Parallel(128, 4):
                B[i, j] = A[i, j] + 1.0

    src = _kernel_text(_source(main, "sm_90a"))
    assert "float4" not in src              # the row stride n gives no 16-byte alignment


def test_register_only_loop_keeps_its_form():
    @T.prim_func
    def main(A: T.Tensor((128, 4), T.float32)):
        with T.Kernel(1, threads=128):
            x = T.alloc_fragment((128, 4), T.float32)
            T.copy(A, x)
            for i, j in T.Parallel(128, 4):
                x[i, j] = x[i, j] * x[i, j]
            T.copy(x, A)

    src = _kernel_text(_source(main, "sm_90a"))
    assert "for (int v = 0; v < 4; ++v)" in src


def test_sm100_float32_pairs_are_packed():
    src = _kernel_text(_source(elementwise(T.float32), "sm_100a"))
    assert "*(float2*)(&(__1.x)) = tl::add2(*(float2*)(&(v_.x)), *(float2*)(&(v__1.x)));" in src
    assert "*(float2*)(&(__1.z)) = tl::add2(" in src
    fma = _kernel_text(_source(elementwise(T.float32, op="fma"), "sm_100a"))
    assert "tl::fma2(" in fma and "tl::mul2" not in fma and "tl::add2" not in fma
    # a product feeding a difference is not fused
    sub = _kernel_text(_source(elementwise(T.float32, op="fms"), "sm_100a"))
    assert "tl::mul2(" in sub and "tl::sub2(" in sub and "fma2" not in sub


@pytest.mark.parametrize("dtype,pair", [(T.float16, "__half2"), (T.bfloat16, "__nv_bfloat162")])
@pytest.mark.parametrize("width", [4, 8])
def test_16_bit_pairs_are_packed_on_sm80(dtype, pair, width):
    src = _kernel_text(_source(elementwise(dtype, width=width, op="fma"), "sm_80"))
    assert f"= tl::fma2(*({pair}*)(&(" in src
    assert "->x = (" not in src and ".x = (v" not in src


def test_pack_vector_arith_keeps_a_product_read_elsewhere():
    text = "\n".join([
        "  float4 __1;",
        "  float4 __2;",
        "    __2.x = (a.x*b.x);",
        "    __2.y = (a.y*b.y);",
        "    __1.x = (__2.x+c.x);",
        "    __1.y = (__2.y+c.y);",
        "  out[0] = __2.x;",
    ])
    out = pack_vector_arith(text, "sm_100a")
    assert "tl::mul2(" in out and "tl::add2(" in out and "fma2" not in out
    assert pack_vector_arith(text, "sm_90a") == text


def negative_index_load():
    @T.prim_func
    def main(A: T.Tensor((1024,), T.float32), B: T.Tensor((4, 4), T.float32)):
        with T.Kernel(1, threads=1):
            for t in T.serial(4):
                B[t, T.Ramp(0, 1, 4)] = A[T.Ramp(t - 2, 1, 4)]

    return main


def negative_index_store():
    @T.prim_func
    def main(B: T.Tensor((4, 4), T.float32), A: T.Tensor((1024,), T.float32)):
        with T.Kernel(1, threads=1):
            for t in T.serial(4):
                A[T.Ramp(t - 2, 1, 4)] = B[t, T.Ramp(0, 1, 4)]

    return main


@pytest.mark.parametrize("make", [negative_index_load, negative_index_store])
def test_vector_index_of_unknown_sign_wraps_per_lane(make):
    src = _kernel_text(_source(make(), "sm_90a"))
    assert "((t < 2) ? (t + 1022) : (t - 2))" in src and "((t < 1) ? (t + 1023) : (t - 1))" in src
    assert "*(float4*)(A + (t - 2))" not in src
    if HAVE_NVCC:
        nvcc.compile_cubin(tilelang.lower(make(), "sm_90a").source, "sm_90a", [])


def test_non_negative_and_negative_vector_indices():
    @T.prim_func
    def main(A: T.Tensor((1024,), T.float32), B: T.Tensor((8, 4), T.float32)):
        with T.Kernel(1, threads=1):
            for t in T.serial(4):
                B[t, T.Ramp(0, 1, 4)] = A[T.Ramp(t * 4, 1, 4)]           # never negative: as written
                B[t + 4, T.Ramp(0, 1, 4)] = A[T.Ramp(-8, 1, 4)]         # always negative: 1016..1019

    src = _kernel_text(_source(main, "sm_90a"))
    assert "*(float4*)(A + (t * 4))" in src
    assert "*(float4*)(A + 1016)" in src
    assert "?" not in src


def test_scalar_fp4_store_keeps_the_other_nibble():
    @T.prim_func
    def main(src: T.Tensor((64, 128), T.float4_e2m1fn), dst: T.Tensor((64, 128), T.float4_e2m1fn),
             perm: T.Tensor((64,), T.int32)):
        with T.Kernel(64, threads=32) as i:
            loc = T.alloc_local((4,), T.float4_e2m1fn)
            for k in T.serial(128):
                loc[k % 4] = src[i, k]
                dst[perm[i], k] = loc[k % 4]

    art = tilelang.lower(main, "sm_90a")
    text = _kernel_text(art.source)
    assert "tl::fp4_store(dst, ((perm[((int)blockIdx.x)] * 128) + k), " in text
    assert "tl::fp4_store_local(loc, " in text
    if HAVE_NVCC:
        nvcc.compile_cubin(art.source, "sm_90a", art.compile_flags)


@pytest.mark.skipif(not HAVE_NVCC, reason="nvcc not found")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a", "sm_100a"])
@pytest.mark.parametrize("dtype", [T.float32, T.float16, T.bfloat16])
def test_packed_sources_compile(arch, dtype):
    for op in ("add", "fma", "fms"):
        art = tilelang.lower(elementwise(dtype, width=8, op=op), arch)
        nvcc.compile_cubin(art.source, arch, art.compile_flags)


def test_min_max_and_byte_arithmetic_stay_within_what_tvm_prints():
    @T.prim_func
    def clamp(A: T.Tensor((128, 8), T.float16), B: T.Tensor((128, 8), T.float16)):
        with T.Kernel(1, threads=128):
            for i, j in T.Parallel(128, 8):
                B[i, j] = T.max(A[i, j], T.float16(0))

    @T.prim_func
    def bytes_(A: T.Tensor((128, 16), T.int8), B: T.Tensor((128, 16), T.int8), C: T.Tensor((128, 16), T.int8)):
        with T.Kernel(1, threads=128):
            for i, j in T.Parallel(128, 16):
                B[i, j] = A[i, j]
                C[i, j] = A[i, j] + A[i, j]

    art = tilelang.lower(clamp, "sm_90a")
    assert "\x00" not in art.source and "*(half4*)(B + " in art.source      # max: 4 lanes of half
    if HAVE_NVCC:
        nvcc.compile_cubin(art.source, "sm_90a", art.compile_flags)

    @T.prim_func
    def copy8(A: T.Tensor((128, 16), T.int8), B: T.Tensor((128, 16), T.int8)):
        with T.Kernel(1, threads=128):
            for i, j in T.Parallel(128, 16):
                B[i, j] = A[i, j]

    assert "*(int4*)(B + " in _kernel_text(_source(copy8, "sm_90a"))          # a byte copy: 16 at a time
    add8 = _kernel_text(_source(bytes_, "sm_90a"))
    assert "int4" not in add8 and "char4" not in add8                          # byte arithmetic: serial


def test_a_load_of_the_stored_tensor_elsewhere_keeps_the_loop_serial():
    """vectorize_parallel: a store whose value reads the stored tensor at another element (lane k
    would read what lane j < k stores first, in the serial loop) stays scalar; reading it at the
    stored element itself vectorises. (The check compared ``Buffer.data``, a fresh call on each
    access in apache-tvm 0.27, and never fired.)"""

    def kernel(shift):
        @T.prim_func
        def main(A: T.Tensor((1024 + 4,), T.float32)):
            with T.Kernel(1, threads=128):
                for i in T.Parallel(1024):
                    A[i + shift] = A[i] + 1.0

        return main

    assert "float4" not in _kernel_text(_source(kernel(4), "sm_90a"))
    assert "*(float4*)(A + " in _kernel_text(_source(kernel(0), "sm_90a"))
