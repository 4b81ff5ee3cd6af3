"""Front end: TileLang kernels parse into PrimFuncs whose tile ops keep the user's spans."""

import pytest
from tvm import tirx

import tilelang
import tilelang.language as T
from tilelang.frontend import ParseError
from tilelang.tir_utils import walk_stmts
from tilelang.transform.kernel import analyze_kernel, op_name, tile_calls


def seed_gemm(M=256, N=256, K=256, bm=128, bn=128, bk=32):
    @T.prim_func
    def kernel(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_shared = T.alloc_shared((bm, bk), "float16")
            B_shared = T.alloc_shared((bk, bn), "float16")
            C_local = T.alloc_fragment((bm, bn), "float32")
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=3):
                T.copy(A[by * bm, k * bk], A_shared)
                T.copy(B[k * bk, bx * bn], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * bm, bx * bn])

    return kernel


def test_seed_gemm_ops_in_order_with_spans():
    f = seed_gemm()
    calls = tile_calls(analyze_kernel(f).body)
    assert [op_name(c) for c in calls] == ["fill", "copy", "copy", "gemm", "copy"]
    gemm = calls[3]
    assert gemm.span.source_name.name.endswith("test_parse.py")
    line = seed_gemm.__code__.co_firstlineno + 11
    assert gemm.span.line == line
    assert gemm.span.column == 17  # 1-based column of `T.gemm`
    assert gemm.span.end_column == 17 + len("T.gemm(A_shared, B_shared, C_local)")


def test_kernel_launch_and_scopes():
    info = analyze_kernel(seed_gemm())
    assert info.num_threads == 128
    assert sorted(info.block_vars) == ["blockIdx.x", "blockIdx.y"]
    scopes = sorted(info.buffers.values())
    assert scopes == ["local.fragment", "shared.dyn", "shared.dyn"]


def test_pipelined_annotation_and_parallel_nest():
    @T.prim_func
    def k(X: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=(32, 4)) as bx:
            f = T.alloc_fragment((64, 64), T.float32)
            for i, j, in T.Parallel(64, 64):
                f[i, j] = X[i, j] * 2.0
            for s in T.Pipelined(4, num_stages=2):
                T.copy(f, X)

    loops = []
    walk_stmts(k.body, lambda s: loops.append(s) if isinstance(s, tirx.For) else None)
    assert [int(l.kind) for l in loops[:2]] == [1, 1]  # two parallel loops from one T.Parallel
    assert int(loops[0].annotations["tl.parallel"]) == 2
    assert int(loops[2].annotations["tl.num_stages"]) == 2
    assert analyze_kernel(k).threads == [32, 4]


@pytest.mark.parametrize("dtype", ["float16", T.float16, "half"])
def test_dtype_spellings(dtype):
    @T.prim_func
    def k(A: T.Tensor((8,), dtype)):
        with T.Kernel(1, threads=32):
            s = T.alloc_shared((8,), dtype)
            T.copy(A, s)

    assert str(k.params[0].dtype) == "float16"


def test_symbolic_shape():
    M = T.dynamic("M")

    @T.prim_func
    def k(A: T.Tensor((M, 16), "float16"), B: T.Tensor((M, 16), "float16")):
        with T.Kernel(T.ceildiv(M, 64), threads=128) as bx:
            s = T.alloc_shared((64, 16), "float16")
            T.copy(A[bx * 64, 0], s)
            T.copy(s, B[bx * 64, 0])

    art = tilelang.lower(k, "sm_90a")
    assert art.symbols == {"M": [0, 0]}
    assert art.grid[0] == "((M + 63) // 64)" or "M" in art.grid[0]
    assert "M" in art.kernel_args


def test_parse_error_is_located():
    with pytest.raises(ParseError) as info:
        @T.prim_func
        def k(A: T.Tensor((8,), "float16")):
            with T.Kernel(1, threads=32):
                T.copy(A, undefined_buffer)  # noqa: F821

    err = info.value
    assert "undefined_buffer" in err.message
    assert err.span.line == test_parse_error_is_located.__code__.co_firstlineno + 5
    assert err.to_diagnostic().code == "TL0001"


def test_kernel_thread_count_checked():
    with pytest.raises(ParseError) as info:
        @T.prim_func
        def k(A: T.Tensor((8,), "float16")):
            with T.Kernel(1, threads=2048):
                pass

    assert "1024" in info.value.message


_TEXT_KERNEL = '''
import tilelang.language as T

@T.prim_func
def main(A: T.Tensor((128,), T.float32), B: T.Tensor((128,), T.float32)):
    with T.Kernel(1, threads=128) as bx:
        for i in T.Parallel(128):
            B[i] = A[i] * 2
'''


def test_a_kernel_without_source_text_says_why():
    """Code from stdin, ``python -c`` or exec() of a string keeps no source for inspect: the error
    names the kernel, where it came from and what to do, instead of inspect's bare OSError."""
    import pytest

    ns = {}
    with pytest.raises(OSError) as info:
        exec(compile(_TEXT_KERNEL, "<typed-in>", "exec"), ns)
    text = str(info.value)
    assert "'main'" in text and "<typed-in>" in text and "source text" in text and ".py file" in text
    assert isinstance(info.value.__cause__, OSError)


def test_exec_with_the_text_in_linecache_parses():
    import linecache

    name = "<kernel-text-test>"
    linecache.cache[name] = (len(_TEXT_KERNEL), None, _TEXT_KERNEL.splitlines(True), name)
    try:
        ns = {}
        exec(compile(_TEXT_KERNEL, name, "exec"), ns)
        assert "B[" in tilelang.lower(ns["main"], "sm_90a").source
    finally:
        linecache.cache.pop(name, None)
