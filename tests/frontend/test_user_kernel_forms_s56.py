"""Forms from inference engines' and kernel libraries' TileLang kernels (lmdeploy's sparse top-k,
a DeepSeek-V4 port's SwiGLU + fp8 cast, a Birkhoff projection's half-warp shuffles, FlashQLA's
Hopper backward) that upstream's 0.1.15 compiled and ours refused: a kernel symbol aliased as
``_``, casts to the ``float8_e4m3`` alias and between fp8 formats, an integer literal past int32 in
an expression, sixteen mbarriers beside a tile that leaves them 2 KiB, and a one-element fragment
a thread branch reduces into and reads by scalar code. Each is lowered and its CUDA compiled with
nvcc."""

import re

import pytest

import tilelang
import tilelang.language as T
from tilelang.analysis import check
from tilelang.jit import nvcc


def _lowered(func, arch="sm_90a"):
    art = tilelang.lower(func, arch)
    assert nvcc.compile_cubin(art.source, art.arch, art.compile_flags)[:4] == b"\x7fELF"
    return art


def _body(art) -> str:
    return art.source[art.source.index('extern "C" __global__'):]


def test_a_kernel_symbol_assigned_to_a_name_stays_the_kernel_symbol():
    n = T.dynamic("n")

    @T.prim_func
    def kernel(X: T.Tensor[(n, 64), T.float32], Y: T.Tensor[(n,), T.float32]):
        _ = n          # lmdeploy: `_ = score_stride`, a symbol read only by the signature
        m = n
        with T.Kernel(m, threads=32) as row:
            Y[row] = X[row, 0]

    assert [str(v) for v in kernel.buffer_map[kernel.params[0]].shape] == ["n", "64"]
    assert "int n)" in _body(_lowered(kernel))


def test_cast_to_the_float8_e4m3_alias_is_a_cast_to_its_storage_type():
    @T.prim_func
    def kernel(x: T.Tensor[(64, 128), "float32"], h: T.Tensor[(64, 128), "float16"],
               y: T.Tensor[(64, 128), "float8_e4m3"], z: T.Tensor[(64, 128), "float8_e4m3"]):
        with T.Kernel(64, threads=128) as m:
            for j in T.Parallel(128):
                y[m, j] = T.Cast("float8_e4m3", x[m, j])
                z[m, j] = (h[m, j] * 2).astype("float8_e4m3")

    body = _body(_lowered(kernel))
    assert "__nv_fp8_e4m3" in body and "float8_e4m3)" not in body


def test_a_cast_between_fp8_formats_goes_through_float32():
    @T.prim_func
    def kernel(x: T.Tensor[(64, 128), "float8_e5m2"], y: T.Tensor[(64, 128), "float8_e4m3"]):
        with T.Kernel(64, threads=128) as m:
            for j in T.Parallel(128):
                y[m, j] = x[m, j]

    body = _body(_lowered(kernel))
    assert "((__nv_fp8_e4m3)((float)x[" in body


def test_an_integer_literal_past_int32_is_a_64_bit_constant():
    @T.prim_func
    def kernel(A: T.Tensor((256,), "float32"), B: T.Tensor((256,), "float32")):
        with T.Kernel(1, threads=256):
            for tx in T.Parallel(256):
                mask = T.if_then_else((tx & 31) < 16, 0x0000FFFF, 0xFFFF0000)   # a half-warp's lanes
                B[tx] = A[tx] + T.shfl_xor(A[tx], 1, mask=mask)

    body = _body(_lowered(kernel))
    assert "(int64_t)4294901760" in body and "__shfl_xor_sync(" in body


def _barriers_beside(rows):
    @T.prim_func
    def kernel(X: T.Tensor((rows, 128), "float32"), Y: T.Tensor((rows, 128), "float32")):
        with T.Kernel(1, threads=256):
            buf = T.alloc_shared((rows, 128), "float32")
            bars = [T.alloc_barrier(arrive_count=256) for _ in range(16)]
            T.copy(X, buf)
            for b in bars:
                T.mbarrier_arrive(b)
            T.copy(buf, Y)
    return kernel


def test_mbarriers_take_eight_bytes_each_and_sit_together():
    kernel = _barriers_beside(452)      # 231424 bytes of tile, 1024 left of sm_90a's 227 KiB
    assert not [d for d in check(kernel, "sm_90a") if d.code == "TL0501"]
    art = _lowered(kernel)
    assert art.dynamic_smem == 452 * 128 * 4 + 16 * 8
    slots = sorted(int(s) for s in re.findall(r"mbarrier_init\(\(&\(\(\(uint64_t\*\)smem\)\[(\d+)\]", art.source))
    assert slots == list(range(452 * 128 // 2, 452 * 128 // 2 + 16))


def test_mbarriers_past_the_budget_are_still_reported():
    kernel = _barriers_beside(454)      # the whole 227 KiB in tile, then the barriers' 128 bytes
    found = [d for d in check(kernel, "sm_90a") if d.code == "TL0501"]
    assert found and "(232576 bytes)" in found[0].message


def test_a_fragment_read_by_scalar_code_inside_a_thread_branch_is_laid_out_for_its_threads():
    # FlashQLA's fused backward: a 128-thread role reduces into a one-element fragment and adds it
    # to shared memory by a scalar statement in the same `if tx < 128:` (was TL0201: the scalar use
    # replicated it over the block's 512 threads, the reduction over the branch's 128)
    @T.prim_func
    def kernel(X: T.Tensor((128, 2), "float32"), Y: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=512):
            s = T.alloc_shared((64,), "float32")
            r = T.alloc_fragment((128, 2), "float32")
            d = T.alloc_fragment((1), "float32")
            tx = T.get_thread_binding()
            T.fill(s, 0)
            if tx < 128:
                for i, j in T.Parallel(128, 2):
                    r[i, j] = X[i, j]
                T.reduce_sum(T.reshape(r, (128 * 2,)), d, dim=0, clear=True)
                s[63] += d[0]
            T.copy(s, Y)

    body = _body(_lowered(kernel))
    branch = body[body.index("if (((int)threadIdx.x) < 128) {"):]
    assert "tl::named_barrier_sync(3, 128);" in branch and "d = d_red[0];" in branch


def _elementwise(dtype, op):
    @T.prim_func
    def kernel(A: T.Tensor((128,), dtype), C: T.Tensor((128,), dtype), B: T.Tensor((128,), dtype)):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(128):
                B[i] = op(A[i], C[i])
    return kernel


def test_fp8_arithmetic_and_comparisons_are_computed_in_float32():
    for dtype in ("float8_e4m3", "float8_e5m2"):
        body = _body(_lowered(_elementwise(dtype, lambda a, c: T.if_then_else(a < c, a * c, -a))))
        assert "((float)A[" in body and "((float)C[" in body


def test_16_bit_math_without_a_cuda_function_is_computed_in_float32():
    # upstream's tracker (#2565): T.sinh / T.cosh / T.nearbyint / T.fmod of half values were nvcc
    # errors (TVM prints hsinh, which CUDA does not have); T.asin and friends had no rule at all
    for dtype in ("float16", "bfloat16"):
        for op in (lambda a, c: T.sinh(a) + T.cosh(c), lambda a, c: T.fmod(a, c), lambda a, c: T.nearbyint(a),
                   lambda a, c: T.asin(a) + T.atan2(a, c) + T.log1p(c)):
            body = _body(_lowered(_elementwise(dtype, op)))
            assert "hsinh" not in body and "hfmod" not in body and "hnearbyint" not in body


def test_ordered_loads_and_stores_of_8_and_16_bit_elements():
    for dtype in ("float16", "bfloat16", "int8"):
        @T.prim_func
        def kernel(A: T.Tensor((256,), dtype), B: T.Tensor((256,), dtype)):
            with T.Kernel(1, threads=128):
                for i in T.Parallel(256):
                    A[i] = T.atomic_load(B[i])
                    T.atomic_store(B[i], A[i])

        body = _body(_lowered(kernel))
        assert "tl::atomic_load<" in body and "tl::atomic_store<" in body


def test_compile_flags_given_as_one_string():
    # upstream takes `compile_flags: str | list[str]` (#2066); a string was split into characters
    @T.prim_func
    def kernel(A: T.Tensor((1024,), "float32"), B: T.Tensor((1024,), "float32")):
        with T.Kernel(4, threads=256) as bx:
            for i in T.Parallel(256):
                B[bx * 256 + i] = T.exp(A[bx * 256 + i])

    compiled = tilelang.compile(kernel, target="cuda -arch=sm_90a", compile_flags="--use_fast_math -lineinfo")
    assert compiled.ensure_cubin()[:4] == b"\x7fELF"
    assert compiled.artifact.compile_flags[-2:] == ["--use_fast_math", "-lineinfo"]


@pytest.mark.parametrize("kind", ["sum", "absmax", "abssum"])
def test_fp8_fragment_reductions_accumulate_in_float32(kind):
    """Session 57: an fp8 reduction folds, shuffles and combines float32 partials and rounds to fp8
    once (the device library's reductions have no fp8 arithmetic; fp8 has no abs)."""
    M, N, dtype = 64, 128, "float8_e4m3fn"

    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M,), dtype)):
        with T.Kernel(1, threads=128):
            a = T.alloc_fragment((M, N), dtype)
            b = T.alloc_fragment((M,), dtype)
            T.copy(A, a)
            getattr(T, f"reduce_{kind}")(a, b, dim=1)
            T.copy(b, B)

    src = _body(_lowered(main))
    assert "warp_allreduce<tl::" in src and "float b_red[" in src
    assert "__nv_fp8_e4m3)b_red[" in src
    if kind != "sum":
        assert "fabsf(((float)a[" in src


def test_popcount_fp8_math_and_warp_reduce_of_fp8_and_bool():
    """Session 57: T.popcount (no TVM CUDA rule; upstream's 0.1.15 fails the same way) is CUDA's
    __popc / __popcll; T.exp2 of an fp8 value is computed in float32; T.warp_reduce_* of fp8 and
    bool values shuffle float32 / int32."""
    N = 128

    @T.prim_func
    def main(A: T.Tensor((N,), "int32"), L: T.Tensor((N,), "int64"), I: T.Tensor((N,), "int8"),
             F: T.Tensor((N,), "float8_e4m3fn"), B: T.Tensor((N,), "bool")):
        with T.Kernel(1, threads=128):
            tx = T.get_thread_binding()
            A[tx] = T.popcount(A[tx])
            L[tx] = T.popcount(L[tx])
            I[tx] = T.popcount(I[tx])
            F[tx] = T.warp_reduce_sum(T.exp2(F[tx]))
            B[tx] = T.warp_reduce_max(B[tx])

    src = _body(_lowered(main))
    assert "__popc(((uint)A[" in src and "__popcll(((uint64_t)L[" in src
    assert "__popc(((uint)((uchar)I[" in src
    assert "exp2f(((float)F[" in src
    assert "warp_allreduce<tl::SumOp, 1, 32>(((float)" in src
    assert "warp_allreduce<tl::MaxOp, 1, 32>(((int)B[" in src


def test_kernel_prelude_is_emitted_ahead_of_the_kernel():
    """Session 57: T.Kernel(prelude=...) (upstream: CUDA text injected before the generated kernel)
    was accepted and dropped; it now goes in as T.import_source does, after tl.h. A non-string is a
    TypeError at the launch."""
    pre = "__device__ __forceinline__ float my_twice(float x) { return 2.0f * x; }\n"

    @T.prim_func
    def main(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128, prelude=pre):
            tx = T.get_thread_binding()
            B[tx] = T.call_extern("float32", "my_twice", A[tx])

    src = _lowered(main).source
    assert src.index("my_twice(float x)") < src.index('extern "C" __global__')
    with pytest.raises(TypeError, match="prelude"):
        T.Kernel(1, prelude=3)


def _fp8_gemm_half_acc(M=256, N=256, K=256, bm=128, bn=128, bk=64):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float8_e4m3fn"), B: T.Tensor((N, K), "float8_e5m2"),
             C: T.Tensor((M, N), "float16")):
        with T.Kernel(N // bn, M // bm, threads=128) as (bx, by):
            a = T.alloc_shared((bm, bk), "float8_e4m3fn")
            b = T.alloc_shared((bn, bk), "float8_e5m2")
            c = T.alloc_fragment((bm, bn), "float16")
            T.clear(c)
            for ko in T.Pipelined(K // bk, num_stages=3):
                T.copy(A[by * bm, ko * bk], a)
                T.copy(B[bx * bn, ko * bk], b)
                T.gemm(a, b, c, transpose_B=True)
            T.copy(c, C[by * bm, bx * bn])
    return main


def test_an_fp8_gemm_accumulates_into_half_with_wgmma():
    """Session 57: fp8 operands into a float16 accumulator (wgmma's f16 form; upstream emits it) was
    TL0102; sm_90a now takes it, the device library already had it. Before sm_90 it stays TL0102."""
    src = _body(_lowered(_fp8_gemm_half_acc()))
    assert re.search(r"tl::wgmma_gemm_ss(_async)?<128, 128, 64, 1, false, true", src)
    assert "half_t c[" in src or "half c[" in src
    assert not [d for d in check(_fp8_gemm_half_acc(), "sm_90a") if d.code == "TL0102"]
    assert [d for d in check(_fp8_gemm_half_acc(), "sm_89") if d.code == "TL0102"]


def test_bfloat16_isnan_isinf_and_pow_are_computed_in_float32():
    """Session 57: TVM's builder refuses T.isnan / T.isinf / T.pow of bfloat16 (upstream's 0.1.15
    fails the same way); the value is widened to float32, which holds it exactly."""
    @T.prim_func
    def main(A: T.Tensor((128,), "bfloat16"), B: T.Tensor((128,), "bfloat16")):
        with T.Kernel(1, threads=128):
            tx = T.get_thread_binding()
            B[tx] = T.if_then_else(T.isnan(A[tx]) or T.isinf(A[tx]), A[tx], T.pow(A[tx], A[tx]))

    src = _body(_lowered(main))
    assert "((nv_bfloat16)powf(((float)A[" in src
    assert "isinf(((float)A[" in src or "__isinf" in src or "fabsf(((float)A[" in src


def test_if_then_else_of_an_and_inside_parallel():
    """Session 57 (an im2col load, tilelang_PTX's conv2d): `T.if_then_else(a and b, ...)` in T.Parallel
    was an internal error (`None in parts` compared PrimExprs with None)."""
    @T.prim_func
    def main(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, threads=128):
            for i, j in T.Parallel(64, 64):
                B[i, j] = T.if_then_else((0 < i) and (j < 5), A[i, j], T.cast(0, "float16"))

    assert "B[" in _body(_lowered(main))


def test_a_view_of_a_view_of_a_fragment_is_a_view_of_the_fragment():
    """Session 57 (jetaitest's chunk cumsum): `T.view(T.view(f, (2, 64)), (128,))` read by T.copy was an
    internal error ('fv is used before its definition'); a scan on the inner view in between too."""
    @T.prim_func
    def main(X: T.Tensor((128,), "float32"), Y: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((128,), "float32")
            f = T.alloc_fragment((128,), "float32")
            T.copy(X, s)
            T.copy(s, f)
            fv = T.view(f, (2, 64))
            T.cumsum(fv, dim=1)
            fv2 = T.view(fv, (128,))
            T.copy(fv2, s)
            T.copy(s, Y)

    assert "warp_inclusive_scan" in _body(_lowered(main))


def test_a_shared_extent_varying_inside_the_kernel_is_a_located_error():
    """Session 57 (tilelang-mace's EquiLinear): `T.alloc_shared((64 * (2 * i + 1), 64))` inside
    `for i in T.serial(4)` was an internal error; the launch cannot size it (upstream refuses it too)."""
    import pytest as _pytest

    from tilelang.diagnostics import TileLangCompileError

    @T.prim_func
    def main(A: T.Tensor((512, 64), "float16"), B: T.Tensor((512, 64), "float16")):
        with T.Kernel(1, threads=128):
            for i in T.serial(4):
                S = T.alloc_shared((64 * (2 * i + 1), 64), "float16")
                T.copy(A[0:64, 0:64], S[0:64, 0:64])
                T.copy(S[0:64, 0:64], B[i * 64:(i + 1) * 64, 0:64])

    with _pytest.raises(TileLangCompileError, match=r"TL0002.*varies with 'i' inside the kernel"):
        tilelang.lower(main, "sm_90a")


def _reduce_into_a_placed_fragment(N=16, weighted=True):
    @T.prim_func
    def main(A: T.Tensor((N, N), "float32"), x: T.Tensor((N,), "float32"), y: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((N, N), "float32")
            v = T.alloc_fragment((N,), "float32")
            prod = T.alloc_fragment((N, N), "float32")
            red = T.alloc_fragment((N,), "float32")
            T.copy(A, A_s)
            T.copy(x, v)
            for i, j in T.Parallel(N, N):
                if weighted:
                    prod[i, j] = A_s[i, j] * v[i]
                else:
                    prod[i, j] = A_s[i, j] * 2
            T.reduce_sum(prod, red, dim=0)
            for j in T.Parallel(N):
                v[j] = v[j] + red[j]
            T.copy(v, y)
    return main


def test_a_reduction_into_a_fragment_laid_out_elsewhere_converts_through_shared_memory():
    """Session 57 (jetaitest's triangular solve: y = x + A^T-weighted column sums): the column sums'
    fragment is read beside x by a later loop that fixes its layout, which the reduction over rows
    does not produce (TL0201; upstream reduces to a fully replicated result and picks). Since
    session 58 that loop waits for the reduction, whose replicated sums it reads in place; where
    the reduction's layout does not hold what the loop needs on each thread (the unweighted sums
    here), the plan of last resort writes the result through a shared workspace."""
    src = _body(_lowered(_reduce_into_a_placed_fragment()))
    assert "warp_allreduce<tl::SumOp" in src and "red_red[" in src
    assert not re.search(r"red\[v_?\d*\] = \(\(float\*\)smem\)\[", src), src
    src = _body(_lowered(_reduce_into_a_placed_fragment(weighted=False)))
    assert re.search(r"red\[v_?\d*\] = \(\(float\*\)smem\)\[", src), src
