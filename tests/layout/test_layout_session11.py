"""Layouts, session 11: upstream's mma swizzle form in the CuTe algebra, fragments read by scalar
code (replicated), user loop layouts (T.Parallel(loop_layout=...)) checked against fragment
owners, the fragment-loop vector rule, tl::AllReduce for block-wide reductions, the barrier at
the end of a loop whose one compound statement races with its next iteration, and grouped
compilation."""

import re

import pytest
from tvm import tirx

import tilelang
import tilelang.language as T
from tilelang.cuda.intrinsics import make_mma_swizzle_layout
from tilelang.diagnostics.errors import TileLangCompileError
from tilelang.layout import cute, make_swizzled_layout


def _swizzle(mode):
    sw = mode.swizzle
    return (sw.b_bits, sw.m_base, sw.s_shift)


def _kernel_body(src: str) -> str:
    return src[src.rindex("__global__"):]


# ----- make_mma_swizzle_layout ---------------------------------------------------------------
@pytest.mark.parametrize("dtype,cols,bits", [("float16", 32, 2), ("float16", 128, 3), ("float16", 192, 3),
                                             ("float32", 64, 3), ("int8", 128, 3)])
def test_mma_swizzle_layout_decodes_as_upstreams_bank_swizzle(dtype, cols, bits):
    buf = tirx.decl_buffer((16, cols), dtype, name="A", scope="shared")
    layout = make_mma_swizzle_layout(buf)
    mode = cute.ComposedLayout.from_tilelang(layout, buf)
    assert mode is not None and _swizzle(mode) == (bits, 4, 3)
    # annotated on a buffer, it still asks for the compiler's own mma operand swizzle
    assert layout.kind == "swizzle"


@pytest.mark.parametrize("dtype,cols", [("float16", 32), ("float16", 64), ("float32", 32), ("int8", 128)])
def test_mma_swizzle_layout_is_the_compilers_layout_for_rows_up_to_128_bytes(dtype, cols):
    buf = tirx.decl_buffer((16, cols), dtype, name="A", scope="shared")
    ours, theirs = make_swizzled_layout(buf), make_mma_swizzle_layout(buf)
    width = theirs.get_output_shape()[-1]
    for i in range(16):
        for j in range(cols):
            tile, row, col = (int(x) for x in theirs(i, j))
            assert tile == 0
            assert int(ours(i, j)[0]) == row * width + col


def test_mma_swizzle_layout_smooth_and_narrow_rows_are_row_major():
    buf = tirx.decl_buffer((16, 16), "float16", name="A", scope="shared")   # 32-byte rows
    assert make_mma_swizzle_layout(buf).kind == "row_major"
    buf = tirx.decl_buffer((16, 64), "float16", name="A", scope="shared")
    assert make_mma_swizzle_layout(buf, is_smooth=True).kind == "row_major"


# ----- fragments read by scalar code ----------------------------------------------------------
def _blocksparse_copy(M=1024, N=1024, block_M=128, block_N=128):
    N_S = N // block_N

    @T.prim_func
    def main(A: T.Tensor((M, N), T.float16), B: T.Tensor((M, N), T.float16),
             BlockMask: T.Tensor((M // block_M, N_S), T.int32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M)) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_N), T.float16)
            block_mask_f = T.alloc_fragment((N_S,), T.int32)
            T.copy(BlockMask[by, :], block_mask_f)
            for i in T.Pipelined(N_S):
                a = block_mask_f[i]
                if a >= 0:
                    T.copy(A[a, 0], A_shared)
                    T.copy(A_shared, B[by * block_M:(by + 1) * block_M, i * block_N:(i + 1) * block_N])

    return main


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_fragment_read_by_a_let_is_replicated(arch):
    src = _kernel_body(tilelang.lower(_blocksparse_copy(), arch).source)
    # every thread holds the whole mask and reads element i itself
    assert "int block_mask_f[8];" in src
    assert re.search(r"a = block_mask_f\[i\];", src), src


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_loop_of_one_compound_statement_syncs_before_the_next_iteration(arch):
    src = _kernel_body(tilelang.lower(_blocksparse_copy(), arch).source)
    loop = src[src.index("for (int i = 0; i < 8; ++i)"):]
    back = re.search(r"\n    }\n    __syncthreads\(\);\n  }\n", loop)
    if arch == "sm_90a":
        # the next iteration's copy into A_shared must wait for this iteration's TMA store out of it
        assert back, loop
    else:
        # threads copy the tile out element for element as they copied it in (the branch's
        # per-thread elements: thread_sync.compound_elements): no thread overwrites another's
        assert not back and "__syncthreads" not in loop, loop


def test_scalar_written_fragment_is_replicated():
    @T.prim_func
    def main(out: T.Tensor((4,), T.float32)):
        with T.Kernel(1, threads=128):
            f = T.alloc_fragment((4,), T.float32)
            for k in T.serial(4):
                f[k] = T.float32(k)
            for i in T.Parallel(4):
                out[i] = f[i]

    src = _kernel_body(tilelang.lower(main, "sm_80").source)
    assert "float f[4];" in src


# ----- the vector of a loop over fragments ----------------------------------------------------
def test_fragment_loop_spreads_over_every_thread_before_vectorising():
    @T.prim_func
    def main(out: T.Tensor((1,), T.float32)):
        with T.Kernel(1, threads=128):
            acc = T.alloc_fragment((128,), T.float32)
            total = T.alloc_fragment((1,), T.float32)
            for k in T.Parallel(128):
                acc[k] = T.float32(1.0)
            T.reduce_sum(acc, total)
            if T.get_thread_binding() == 0:
                out[0] = total[0]

    src = _kernel_body(tilelang.lower(main, "sm_80").source)
    assert "float acc;" in src            # one element per thread, no replicas
    assert "tl::AllReduce<tl::SumOp, 128, 1>::run(" in src


# ----- T.Parallel(loop_layout=...) ------------------------------------------------------------
def _owner_kernel(loop_fn, replicate):
    loop_layout = T.Fragment((8, 4), forward_fn=loop_fn, replicate=replicate)
    buffer_layout = T.Fragment((8, 4), forward_fn=lambda i, j, rep: (i * 4 + j + rep * 32, 0), replicate=2)

    @T.prim_func
    def main(out: T.Tensor((8, 4), T.float32)):
        with T.Kernel(1, threads=64):
            frag = T.alloc_fragment((8, 4), T.float32)
            T.annotate_layout({frag: buffer_layout})
            for i, j in T.Parallel(8, 4, loop_layout=loop_layout):
                frag[i, j] = T.float32(1.0)
            T.copy(frag, out)

    return main


def test_loop_layout_writing_from_non_owner_threads_is_rejected():
    bad = _owner_kernel(lambda i, j, rep: (i * 4 + rep % 4 + (rep // 4) * 32, j), 8)
    with pytest.raises(TileLangCompileError, match=r"TL0201.*Layout infer conflict between fragment 'frag'") as err:
        tilelang.lower(bad, "sm_80")
    assert "loop_layout" in str(err.value)


def test_loop_layout_writing_from_the_owners_is_accepted():
    good = _owner_kernel(lambda i, j, rep: (i * 4 + j + rep * 32, 0), 2)
    tilelang.lower(good, "sm_80")


def test_loop_layout_places_the_iterations():
    @T.prim_func
    def main(A: T.Tensor((128, 32), T.float32), B: T.Tensor((128, 32), T.float32)):
        with T.Kernel(1, threads=128):
            for i, j in T.Parallel(128, 32, loop_layout=T.Fragment((128, 32), forward_fn=lambda i, j: (i, j))):
                B[i, j] = A[i, j]

    src = _kernel_body(tilelang.lower(main, "sm_80").source)
    # thread i runs row i, its 32 registers as eight 16-byte vectors
    assert "*(float4*)(B + ((((int)threadIdx.x) * 32) + (i * 4))) = *(float4*)(A + ((((int)threadIdx.x) * 32) + (i * 4)));" in src


def test_loop_layout_of_another_shape_is_rejected():
    @T.prim_func
    def main(A: T.Tensor((128, 32), T.float32)):
        with T.Kernel(1, threads=128):
            for i, j in T.Parallel(128, 32, loop_layout=T.Fragment((128, 16), forward_fn=lambda i, j: (i, j))):
                A[i, j] = 0.0

    with pytest.raises(TileLangCompileError, match=r"loop_layout of shape \[128, 16\]"):
        tilelang.lower(main, "sm_80")


def test_loop_layout_must_be_a_fragment():
    with pytest.raises(TypeError, match="must be a T.Fragment"):
        T.Parallel(4, loop_layout=object())


# ----- grouped compilation --------------------------------------------------------------------
def test_grouped_compile_keeps_order_and_isolates_failures():
    from tilelang.autotuner.grouped_compile import compile_grouped_unit_tvm_ffi
    from tilelang.autotuner.param import CompileArgs

    def elaborate(size):
        if size < 0:
            raise ValueError("bad size")

        @T.prim_func
        def kernel(A: T.Tensor((size,), T.float32), B: T.Tensor((size,), T.float32)):
            with T.Kernel(1, threads=32):
                for i in T.serial(size):
                    B[i] = A[i] + 1.0

        return kernel

    args = CompileArgs(out_idx=[1], execution_backend="tvm_ffi", target="sm_80")
    results = compile_grouped_unit_tvm_ffi([(0, {"size": 17}), (1, {"size": -1}), (2, {"size": 23})], args, elaborate)
    assert [r[0] for r in results] == [0, 1, 2]
    (_, _, k0, e0), (_, _, k1, e1), (_, _, k2, e2) = results
    assert e0 is None and e2 is None and k1 is None and isinstance(e1, ValueError)
    assert k0.out_idx == [1] and "17" in str(k0) and "23" in str(k2)


# ----- an mma.sync operand that is a column sub-tile of its swizzled buffer --------------------
def _gemm_on_column_subtile(col0):
    @T.prim_func
    def main(A: T.Tensor((128, 64), T.float16), B: T.Tensor((64, 128), T.float16), C: T.Tensor((128, 128), T.float16)):
        with T.Kernel(4, 4, threads=128) as (bx, by):
            A_shared = T.alloc_shared((32, 64), T.float16)
            B_shared = T.alloc_shared((32, 64), T.float16)
            C_local = T.alloc_fragment((32, 32), T.float32)
            T.clear(C_local)
            for ko in T.Pipelined(2, num_stages=0):
                for i, k in T.Parallel(32, 32):
                    A_shared[i, k + col0] = A[by * 32 + i, ko * 32 + k]
                for i, k in T.Parallel(32, 32):
                    B_shared[i, k] = B[ko * 32 + i, bx * 32 + k]
                T.gemm(A_shared[:, col0:col0 + 32], B_shared[0:32, 0:32], C_local)
            T.copy(C_local, C[by * 32, bx * 32])

    return main


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_gemm_on_a_column_subtile_inside_a_swizzle_period(arch):
    # A_shared rows are 128 bytes (one 8-chunk XOR period): columns 32.. start at chunk 4, so the
    # gemm addresses from the rows' start with a 4-chunk offset
    src = _kernel_body(tilelang.lower(_gemm_on_column_subtile(32), arch).source)
    assert "tl::gemm_ss<32, 32, 32, 2, 2, false, false, false, 64, 64, 4, 0>((&(((half*)smem)[0]))" in src


def test_gemm_on_an_aligned_column_subtile_keeps_the_plain_call():
    src = _kernel_body(tilelang.lower(_gemm_on_column_subtile(0), "sm_80").source)
    assert "tl::gemm_ss<32, 32, 32, 2, 2, false, false, false, 64, 64>(" in src
