"""Front-end and lowering pieces the deepseek_v32 examples need, checked on CPU (IR, CUDA source,
layouts): ``~`` over lowered accesses, ``T.dynamic("a, b")``, ``T.cp_async_barrier_noinc``,
fragments read at a shifted row under a guard, atomics on an indirectly indexed global element
inside T.Parallel, and reductions / scans over ``T.reshape`` / ``T.view`` of fragments and shared
buffers."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from tvm import tirx

import tilelang
import tilelang.language as T
from tilelang.jit import nvcc
from tilelang.tir_utils import ExprRewriter
from tilelang.transform.kernel import FRAGMENT_SCOPE, analyze_kernel, buffer_accesses, parallel_nest, scope_of
from tilelang.transform.layout_inference import _nest_variables, _serves, body_guard, infer_layouts


def _src(func, arch="sm_90a"):
    return tilelang.lower(func, arch).source


def _body(source):
    return source[source.index('extern "C" __global__'):]


def _compiles(source, arch="sm_90a"):
    if shutil.which("nvcc") or nvcc.find_cuda_tool("nvcc"):
        assert nvcc.compile_cubin(source, arch, [])[:4] == b"\x7fELF"


# ----- ~x rewrites its operand --------------------------------------------------------------------
def test_expr_rewriter_visits_bitwise_not_operand():
    x, y = tirx.Var("x", "int32"), tirx.Var("y", "int32")

    class Sub(ExprRewriter):
        def visit_var(self, var):
            return y if var.same_as(x) else var

    out = Sub().visit(tirx.BitwiseNot(x + 1))
    assert isinstance(out, tirx.BitwiseNot) and "y" in str(out) and "x" not in str(out)
    same = tirx.BitwiseNot(y)
    assert Sub().visit(same) is same


def test_bitwise_not_of_a_shared_element_is_lowered():
    @T.prim_func
    def k(A: T.Tensor((128,), T.float32), I: T.Tensor((128,), T.int32), B: T.Tensor((128,), T.uint32)):
        with T.Kernel(1, threads=128):
            tx = T.get_thread_binding()
            idx = T.alloc_shared((2, 64), T.int32)
            idx[tx // 64, tx % 64] = I[tx]
            T.sync_threads()
            B[tx] = ~T.reinterpret(A[idx[tx // 64, tx % 64]], T.uint32) & T.uint32(0xFFFF)

    source = _src(k)
    line = next(ln for ln in _body(source).splitlines() if "B[" in ln and "=" in ln)
    assert "~" in line      # (before: TL0003, the shared buffer inside ~ was never lowered)
    _compiles(source)


# ----- T.dynamic with several names ---------------------------------------------------------------
def test_dynamic_with_several_names_gives_a_tuple():
    a, b, c = T.dynamic("batch, seq_len, seq_len_kv")
    assert [v.name for v in (a, b, c)] == ["batch", "seq_len", "seq_len_kv"]
    m, n = T.dynamic("m n", "int64")
    assert (m.name, n.name, str(m.ty.dtype)) == ("m", "n", "int64")
    one = T.dynamic("x")
    assert isinstance(one, tirx.Var) and one.name == "x"


def test_dynamic_tuple_binds_tensor_shapes():
    @tilelang.jit
    def f(A, B):
        b, s = T.dynamic("b, s")
        A: T.Tensor((b, s), T.float32)
        B: T.Tensor((b, s), T.float32)
        with T.Kernel(b, threads=128) as bx:
            for i in T.Parallel(128):
                if i < s:
                    B[bx, i] = A[bx, i]

    import torch
    x = torch.zeros(2, 100)
    src = f.get_kernel_source(x, x)
    assert "int b" in src or "int s" in src


# ----- T.cp_async_barrier_noinc -------------------------------------------------------------------
def test_cp_async_barrier_noinc_lowers_to_the_device_call():
    @T.prim_func
    def k(A: T.Tensor((128, 8), T.float16), B: T.Tensor((128, 8), T.float16)):
        with T.Kernel(1, threads=128):
            tx = T.get_thread_binding()
            S = T.alloc_shared((128, 8), T.float16)
            bar = T.alloc_barrier(arrive_count=[128])
            T.ptx_cp_async(T.access_ptr(S[tx, 0], "w", 8), T.access_ptr(A[tx, 0], "r", 8), 8)
            T.cp_async_barrier_noinc(bar[0])
            T.barrier_wait(bar[0], 0)
            for j in T.serial(8):
                B[tx, j] = S[tx, j]

    source = _src(k)
    assert "tl::mbarrier_cp_async_arrive_noinc(" in _body(source)
    _compiles(source)


# ----- a fragment read at a shifted row under a guard (sparse_mla_bwd's split store) ---------------
def _split_store():
    @T.prim_func
    def k(A: T.Tensor((32, 64), T.bfloat16), B: T.Tensor((64, 64), T.bfloat16), C: T.Tensor((2, 16, 64), T.float32)):
        with T.Kernel(1, threads=256):
            a = T.alloc_shared((32, 64), T.bfloat16)
            b = T.alloc_shared((64, 64), T.bfloat16)
            acc = T.alloc_fragment((32, 64), T.float32)
            half = T.alloc_shared((16, 64), T.float32)
            T.copy(A, a)
            T.copy(B, b)
            T.gemm(a, b, acc, policy=T.GemmWarpPolicy.FullCol, clear_accum=True)
            for s in range(2):
                for i, j in T.Parallel(32, 64):
                    if i < 16:
                        half[i, j] = acc[i + s * 16, j]
                T.copy(half, C[s, :, :])
    return k


def test_guarded_shifted_fragment_read_runs_on_the_holding_threads():
    k = _split_store()
    info = analyze_kernel(k)
    out = infer_layouts(info, "sm_80")
    checked = 0
    for nest, extra in _nest_variables(info).items():
        loop_vars, extents, body = parallel_nest(nest)
        for buf, idx, write in buffer_accesses(body):
            if scope_of(buf) != FRAGMENT_SCOPE:
                continue
            ok = _serves(out.loops[loop_vars[0]], out.fragments[buf], idx, loop_vars,
                         [int(e) for e in extents], write, extra, body_guard(body))
            assert ok is True
            checked += 1
    assert checked == 1
    source = _src(k, "sm_80")
    assert "acc[" in _body(source)
    _compiles(source, "sm_80")


def test_body_guard_joins_nested_ifs_and_ignores_else():
    i = tirx.Var("i", "int32")
    leaf = tirx.Evaluate(tirx.IntImm("int32", 0))
    inner = tirx.IfThenElse(tirx.LT(i, 8), leaf, None)
    g = body_guard(tirx.IfThenElse(tirx.GE(i, 2), inner, None))
    assert "2 <= i" in str(g) or "i >= 2" in str(g)
    assert "i < 8" in str(g)
    assert body_guard(tirx.IfThenElse(tirx.LT(i, 8), leaf, leaf)) is None
    assert body_guard(leaf) is None


# ----- an atomic on an indirectly indexed global element inside T.Parallel --------------------------
def test_atomic_addx4_on_an_indirect_element_is_guarded_as_a_statement():
    @T.prim_func
    def k(Idx: T.Tensor((16,), T.int32), D: T.Tensor((64, 64), T.float32)):
        with T.Kernel(1, threads=128):
            src = T.alloc_shared((16, 64), T.float32)
            for i, j in T.Parallel(16, 64):
                src[i, j] = 1.0
            for i, j in T.Parallel(16, 16):
                T.atomic_addx4(D[Idx[i], j * 4], src[i, j * 4])

    import warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        body = _body(_src(k))
    assert not [w for w in caught if "TL0403" in str(w.message)]   # src is read through its address
    line = next(ln for ln in body.splitlines() if "tl::atomic_addx4" in ln)
    assert "if_then_else" not in line and "?" not in line
    guard = body[:body.index("tl::atomic_addx4")].rsplit("if (", 1)[1]
    assert "Idx[" in guard and "< 64" in guard


# ----- reductions and scans over views -----------------------------------------------------------
def _reduce_after_reshape(N, M, dtype):
    @T.prim_func
    def main(A: T.Tensor((N,), dtype), B: T.Tensor((N // M,), dtype)):
        with T.Kernel(1, threads=32):
            A_shared = T.alloc_shared((N,), dtype)
            A_local = T.alloc_fragment((N,), dtype)
            B_local = T.alloc_fragment((N // M,), dtype)
            T.copy(A, A_shared)
            T.copy(A_shared, A_local)
            T.reduce_max(T.reshape(A_local, [N // M, M]), B_local, dim=1)
            T.copy(B_local, B)
    return main


def _simulate_reduce_max(N, M):
    """Run the staged reduction's thread mapping on numpy: each output row's maximum."""
    info = analyze_kernel(_reduce_after_reshape(N, M, T.float32))
    out = infer_layouts(info, "sm_80")
    staged = next(b for b in out.fragments if b.name.endswith("_staged"))
    a = next(b for b in out.fragments if b.name == "A_local")
    return out.fragments[staged], out.fragments[a]


@pytest.mark.parametrize("N,M,dtype", [(1024, 32, T.float32), (2048, 64, T.float16)])
def test_reduce_over_a_fragment_reshape(N, M, dtype):
    source = _src(_reduce_after_reshape(N, M, dtype), "sm_80")
    body = _body(source)
    assert "A_local_reshape_staged" in body or "_staged" in body
    assert "tl::warp_allreduce<tl::MaxOp" in body
    _compiles(source, "sm_80")


def test_staged_view_holds_the_same_elements_per_thread():
    staged, a = _simulate_reduce_max(1024, 32)
    # every thread holds, at the same register, view element (i, j) == A_local element i * 32 + j
    so, ao = staged.owners(), a.owners()
    assert so.shape == ao.shape and np.array_equal(so, ao)


def test_cumsum_over_a_view_of_shared_memory():
    @T.prim_func
    def k(x: T.Tensor((4, 128), T.float32)):
        with T.Kernel(4, threads=128) as pid:
            smem = T.alloc_shared((128,), T.float32)
            T.copy(x[pid, :], smem)
            T.cumsum(T.view(smem, (1, 128)), dim=1)
            T.copy(smem, x[pid, :])

    body = _body(_src(k, "sm_80"))
    assert "tl::warp_inclusive_scan" in body    # one row of 128: a warp scans it (tl.enable_warp_scan)
    # the scan runs on the staged copy and the result is written back before the final store
    assert body.index("tl::warp_inclusive_scan") < body.rindex("x[")


def test_reduce_sum_over_a_3d_reshape_of_a_gemm_accumulator():
    @T.prim_func
    def k(A: T.Tensor((64, 32), T.float16), B: T.Tensor((64, 32), T.float16), L: T.Tensor((64, 4), T.float32)):
        with T.Kernel(1, threads=128):
            a = T.alloc_shared((64, 32), T.float16)
            b = T.alloc_shared((64, 32), T.float16)
            s = T.alloc_fragment((64, 64), T.float32)
            s3 = T.reshape(s, (64, 4, 16))
            out = T.alloc_fragment((64, 4), T.float32)
            T.copy(A, a)
            T.copy(B, b)
            T.gemm(a, b, s, transpose_B=True, clear_accum=True)
            for i, q, h in T.Parallel(64, 4, 16):
                s3[i, q, h] = T.max(s3[i, q, h], 0)
            T.reduce_sum(s3, out, dim=-1)
            T.copy(out, L)

    source = _src(k, "sm_80")
    assert "tl::warp_allreduce<tl::SumOp" in _body(source)
    _compiles(source, "sm_80")
