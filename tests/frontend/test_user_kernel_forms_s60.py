"""Forms that upstream's 0.1.15 accepts and ours refused (session 60's probe of the language
surface): ``T.thread_binding`` spelt as TVM does inside a kernel, ``T.view(..., strides=...)``,
upstream's keyword names, ``PassConfigKey`` members, gemm operands annotated with upstream's bank
swizzles, a gemm on a shared sub-tile whose start moves with a loop, ``T.Parallel(prefer_async=)``.
Each kernel is lowered and its CUDA compiled with nvcc."""

import re

import pytest

import tilelang
import tilelang.language as T
from tilelang.diagnostics.errors import TileLangCompileError
from tilelang.jit import nvcc
from tilelang.layout import (make_full_bank_swizzled_layout, make_half_bank_swizzled_layout,
                             make_wgmma_swizzled_layout)


def _lowered(func, arch="sm_90a"):
    art = tilelang.lower(func, arch)
    assert nvcc.compile_cubin(art.source, art.arch, art.compile_flags)[:4] == b"\x7fELF"
    return art


def _bound_loop(extent, positional=True):
    @T.prim_func
    def main(X: T.Tensor((1024,), T.float32), Y: T.Tensor((1024,), T.float32)):
        with T.Kernel(1024 // extent, threads=128) as bx:
            if positional:
                for tx in T.thread_binding(extent, "threadIdx.x"):
                    Y[bx * extent + tx] = X[bx * extent + tx] * 2.0
            else:
                for tx in T.thread_binding(extent, thread="threadIdx.x"):
                    Y[bx * extent + tx] = X[bx * extent + tx] * 2.0

    return main


def test_thread_binding_loop_inside_a_kernel():
    """``for tx in T.thread_binding(n, ...)`` inside T.Kernel runs its body once with ``tx`` the
    kernel's own thread index, under ``tx < n`` where n is less than the launch extent; the
    two-positional spelling ``(n, "threadIdx.x")`` is TVM's."""
    full = _lowered(_bound_loop(128)).source
    assert "threadIdx.x) < " not in full and "for (int tx" not in full
    half = _lowered(_bound_loop(64, positional=False)).source
    assert re.search(r"if \(\(\(int\)threadIdx\.x\) < 64\)", half), half


def test_thread_binding_wider_than_the_launch_is_an_error():
    with pytest.raises(Exception, match="launches 128 along threadIdx.x, fewer than the 256"):
        tilelang.lower(_bound_loop(256), "sm_90a")


def _strided_views():
    @T.prim_func
    def main(X: T.Tensor((64, 32), T.float32), Y: T.Tensor((32, 64), T.float32), Z: T.Tensor((32, 64), T.float32)):
        with T.Kernel(1, threads=64):
            xt = T.view(X, (32, 64), strides=(1, 32))      # X's transpose, no copy
            for i, j in T.Parallel(32, 64):
                Y[i, j] = xt[i, j]
            s = T.alloc_shared((64, 32), T.float32)
            T.copy(X, s)
            st = T.view(s, (32, 64), strides=(1, 32))
            for i, j in T.Parallel(32, 64):
                Z[i, j] = st[i, j]

    return main


def test_view_with_strides_reads_the_transpose():
    """TVM 0.27 flattens a strided declaration as if row-major; ``resolve_views`` addresses the
    viewed tensor at the strided offset instead (global and shared views alike)."""
    src = _lowered(_strided_views()).source
    loads = re.findall(r"Y\[[^\]]*\] = X\[([^\]]*)\]", src)
    assert loads and "(((int)threadIdx.x) & 15) * 128" in loads[0], src     # X[j * 32 + i]
    with pytest.raises(ValueError, match="2 strides expected"):
        @T.prim_func
        def bad(X: T.Tensor((64, 32), T.float32)):
            with T.Kernel(1, threads=64):
                T.view(X, (32, 64), strides=(1,))


def _keywords():
    @T.prim_func
    def main(X: T.Tensor((128,), T.float32), Y: T.Tensor((128,), T.float32), F: T.Tensor((1,), T.int32),
             n: T.int32):
        with T.Kernel(1, threads=128):
            T.annotate_l2_hit_ratio(l2_hit_ratio_map={X: 1.0})
            T.assume(cond=n > 0)
            tx = T.get_thread_binding()
            s = T.alloc_buffer((128,), T.float32, scope="shared.dyn", annotations={})
            xt = T.StridedTensor((128,), (1,), T.float32, data=X.data)
            s[tx] = T.if_then_else(cond=xt[tx] > 0, t=xt[tx], f=0.0) * T.ceildiv(lhs=n, rhs=64)
            T.atomic_max(Y[0], s[tx], annotations={})
            T.atomic_store(F[0], src=1)
            acc = T.alloc_reducer((128,), T.float32, op="max")
            res = T.alloc_fragment((128,), T.float32)
            T.reducer_init(reducer=acc, init=0.0)
            for i in T.Parallel(128):
                T.reducer_update(acc[i], X[i])
            T.finalize_reducer(reducer=acc, dst=res)
            for i in T.Parallel(128, prefer_async=True):
                Y[i] = res[i] + T.let(T.int32(), 1, 2)

    return main


def test_upstream_keyword_names():
    _lowered(_keywords())
    for key in ("TL_ENABLE_FP32X2_REDUCTION", "TL_ENABLE_AUTO_SCHEDULE", "TL_ENABLE_AUTO_WARP_SPECIALIZATION"):
        assert getattr(tilelang.PassConfigKey, key).value.startswith("tl.")


def _annotated_gemm(block_k, maker):
    @T.prim_func
    def main(A: T.Tensor((256, 256), T.float16), B: T.Tensor((256, 256), T.float16), C: T.Tensor((256, 256), T.float32)):
        with T.Kernel(2, 2, threads=256) as (bx, by):
            As = T.alloc_shared((128, block_k), T.float16)
            Bs = T.alloc_shared((128, block_k), T.float16)
            Cl = T.alloc_fragment((128, 128), T.float32)
            if maker is not None:
                T.annotate_layout({As: maker(As), Bs: maker(Bs)})
            T.clear(Cl)
            for k in T.Pipelined(256 // block_k, num_stages=2):
                T.copy(A[by * 128, k * block_k], As)
                T.copy(B[bx * 128, k * block_k], Bs)
                T.gemm(As, Bs, Cl, transpose_B=True)
            T.copy(Cl, C[by * 128, bx * 128])

    return main


@pytest.mark.parametrize("block_k,maker,arch", [
    (64, make_full_bank_swizzled_layout, "sm_90a"), (32, make_half_bank_swizzled_layout, "sm_90a"),
    (128, make_wgmma_swizzled_layout, "sm_90a"), (64, make_wgmma_swizzled_layout, "sm_80")])
def test_gemm_operands_annotated_with_a_bank_swizzle(block_k, maker, arch):
    """Upstream's bank swizzles spell the compiler's own operand layout (a wgmma operand's slabs
    for the 128-column tile): the kernel is the one without the annotation."""
    assert _lowered(_annotated_gemm(block_k, maker), arch).source == _lowered(_annotated_gemm(block_k, None), arch).source


def test_a_bank_swizzle_the_gemm_cannot_read_is_located():
    with pytest.raises(TileLangCompileError, match=r"TL0201.*its T.gemm reads it with the row-major"):
        tilelang.lower(_annotated_gemm(128, make_full_bank_swizzled_layout), "sm_80")


def _subtile_gemm(step):
    @T.prim_func
    def main(A: T.Tensor((128, 64), T.float16), B: T.Tensor((64, 128), T.float16), C: T.Tensor((128, 128), T.float32)):
        with T.Kernel(1, threads=128):
            As = T.alloc_shared((128, 64), T.float16)
            Bs = T.alloc_shared((64, 128), T.float16)
            Cl = T.alloc_fragment((64, 128), T.float32)
            T.copy(A, As)
            T.copy(B, Bs)
            for h in T.serial(2):
                T.gemm(As[h * step:h * step + 64, :], Bs, Cl, clear_accum=True)
                T.copy(Cl, C[h * 64, 0])

    return main


def test_gemm_on_a_subtile_whose_start_moves_with_a_loop():
    src = _lowered(_subtile_gemm(64)).source
    assert re.search(r"gemm_ss<[^>]*>\(\(&\(\(\(half\*\)smem\)\[\(\(h \* 4096\)", src), src
    with pytest.raises(TileLangCompileError, match=r"TL0002.*starting at row h \* 60.*multiples of 8"):
        tilelang.lower(_subtile_gemm(60), "sm_90a")


def test_a_bank_swizzled_copy_tile_keeps_its_annotation():
    """A tile only copies use (no gemm) keeps the annotated layout as written, even where it is a
    wgmma operand's slabs that the plain swizzle is not (128 fp16 columns)."""
    @T.prim_func
    def main(A: T.Tensor((256, 128), T.float16), B: T.Tensor((256, 128), T.float16)):
        with T.Kernel(2, threads=128) as bx:
            s = T.alloc_shared((128, 128), T.float16)
            T.annotate_layout({s: make_full_bank_swizzled_layout(s)})
            T.copy(A[bx * 128, 0], s)
            T.copy(s, B[bx * 128, 0])

    _lowered(main)
