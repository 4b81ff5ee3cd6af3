"""Raw pointers in kernels (CPU): T.ptr parameters, T.make_tensor, pointer tables, the "pointer"
ParamSpec and its argument binding, T.access_ptr and T.ptx_cp_async."""

from __future__ import annotations

import re

import pytest

import tilelang
import tilelang.language as T
from tilelang.artifact import ArtifactError, KernelArtifact
from tilelang.ir import get_buffer_span, span_to_location
from tilelang.jit import nvcc

torch = pytest.importorskip("torch")


def _matmul_ptr(block_M=64, block_N=64, block_K=32):
    @T.prim_func
    def main(a_ptr: T.ptr, b_ptr: T.ptr, c_ptr: T.ptr, m: T.int32, n: T.int32, k: T.int32):
        A = T.make_tensor(a_ptr, (m, k), T.float16)
        B = T.make_tensor(b_ptr, (k, n), T.float16)
        C = T.make_tensor(c_ptr, (m, n), T.float32)
        with T.Kernel(T.ceildiv(n, block_N), T.ceildiv(m, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), T.float16)
            B_shared = T.alloc_shared((block_N, block_K), T.float16)
            C_local = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(k, block_K), num_stages=2):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                T.copy(B[bx * block_N, ko * block_K], B_shared)
                T.gemm(A_shared, B_shared, C_local, transpose_B=True)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


def _table_copy(G=2, N=64, make=T.make_tensor):
    @T.prim_func
    def main(src_ptrs: T.Tensor([G], T.ptr), out: T.Tensor([G, N], T.float16)):
        with T.Kernel(G, threads=1) as bx:
            Src = make(src_ptrs[bx], (N,), T.float16)
            for i in T.serial(N):
                out[bx, i] = Src[i]

    return main


def _plan(art):
    from tilelang.jit.adapter_args import ArgPlan

    calls = []
    plan = ArgPlan(art, launch=lambda *a: calls.append(a), device_type="cpu", stream=lambda d: 0)
    return plan, calls


# ---------------------------------------------------------------- front end
def test_ptr_param_becomes_the_made_tensor():
    f = _matmul_ptr()
    A = f.params[0]
    assert f.buffer_map[A].same_as(A) and str(A.dtype) == "float16"
    from tilelang.language.pointer import pointer_param_indices
    assert pointer_param_indices(f) == [0, 1, 2]


def test_ptr_as_dtype_is_an_int64_table():
    f = _table_copy(4, 8)
    table = f.buffer_map[f.params[0]]
    assert str(table.dtype) == "int64" and [int(d) for d in table.shape] == [4]


def test_make_tensor_span_is_its_line():
    @T.prim_func
    def main(A_ptr: T.ptr):
        A = T.make_tensor(A_ptr, (16,), T.float32)  # marker: make_tensor
        with T.Kernel(1, threads=1):
            T.evaluate(A[0])

    (buf,) = main.buffer_map.values()
    path, line = span_to_location(get_buffer_span(buf))
    assert path == __file__
    with open(__file__) as f:
        assert "# marker: make_tensor" in f.read().splitlines()[line - 1]


def test_make_tensor_of_a_pointer_parameter_inside_the_kernel():
    """Session 57 (upstream #2526): inside T.Kernel the view is bound where it stands, over the raw
    address parameter (refused before); `a_ptr` is printed bare and still maps to its parameter."""
    @T.prim_func
    def inside(a_ptr: T.ptr, b: T.ptr):
        with T.Kernel(1, threads=32):
            A = T.make_tensor(a_ptr, (4,), T.float32)
            B = T.make_tensor(b, (4,), T.float32)
            tx = T.get_thread_binding()
            if tx < 4:
                B[tx] = A[tx] * 2

    art = tilelang.lower(inside, target="sm_90a")
    assert [(p.name, p.kind) for p in art.params] == [("a_ptr", "pointer"), ("b", "pointer")]
    assert art.kernel_args == ["a_ptr", "b"]
    assert re.search(r"inside_kernel\(void\* __restrict__ a, void\* __restrict__ b\)", art.source)
    assert nvcc.compile_cubin(art.source, art.arch, art.compile_flags)[:4] == b"\x7fELF"


def test_make_tensor_errors():
    with pytest.raises(Exception, match="64-bit integer"):
        @T.prim_func
        def narrow(t: T.Tensor((4,), T.int32), B: T.Tensor((4,), T.float32)):
            with T.Kernel(1, threads=1):
                A = T.make_tensor(t[0], (4,), T.float32)
                B[0] = A[0]

    with pytest.raises(RuntimeError, match="being built"):
        T.make_tensor(T.ptr(), (4,), T.float32)


# ---------------------------------------------------------------- lowering and artifact
def test_pointer_params_in_the_artifact():
    art = tilelang.lower(_matmul_ptr(), target="sm_90a")
    kinds = [(p.name, p.kind, p.dtype) for p in art.params]
    assert kinds[:3] == [("A", "pointer", "float16"), ("B", "pointer", "float16"), ("C", "pointer", "float32")]
    assert art.symbols == {"m": [3, -1], "n": [4, -1], "k": [5, -1]}   # never read from a pointer
    assert re.search(r"half\* __restrict__ A(_ptr)?\b", art.source)
    back = KernelArtifact.from_json(art.to_json()).check()
    assert back.params == art.params


def test_untyped_pointer_param():
    @T.prim_func
    def raw(a: T.ptr, B: T.Tensor((4,), T.float32)):
        with T.Kernel(1, threads=32):
            T.import_source("__device__ void tl_test_use(void* p) {}")
            T.call_extern("void", "tl_test_use", a)
            B[0] = T.float32(1)

    art = tilelang.lower(raw, target="sm_90a")
    assert (art.params[0].kind, art.params[0].dtype, art.params[0].shape) == ("pointer", "handle", [])
    assert "void* __restrict__ a" in art.source


def test_artifact_rejects_bad_pointers():
    art = tilelang.lower(_matmul_ptr(), target="sm_90a")
    data = art.to_dict()
    data["out_idx"] = [2]
    with pytest.raises(ArtifactError, match="pointer parameter 'C'"):
        KernelArtifact.from_dict(data).check()
    data = art.to_dict()
    data["params"][0]["shape"] = ["q", "k"]
    with pytest.raises(ArtifactError, match="no scalar parameter or tensor shape gives"):
        KernelArtifact.from_dict(data).check()


@pytest.mark.parametrize("make", [T.make_tensor, T.make_tensor_from_addr], ids=["make_tensor", "from_addr"])
def test_pointer_table_cuda(make):
    art = tilelang.lower(_table_copy(make=make), target="sm_90a")
    assert [p.kind for p in art.params] == ["tensor", "tensor"]
    assert re.search(r"\(half\*\)src_ptrs(_ptr)?\[\(\(int\)blockIdx.x\)\]", art.source)


def test_make_tensor_from_addr_is_global_only():
    with pytest.raises(ValueError, match="only global tensors"):
        T.make_tensor_from_addr(T.int64(0), (4,), T.float32, storage_scope="shared")


# ---------------------------------------------------------------- argument binding
def test_pointer_accepts_addresses_and_tensors():
    art = tilelang.lower(_matmul_ptr(), target="sm_90a")
    plan, calls = _plan(art)
    a, b, c = torch.zeros(128, 64, dtype=torch.float16), torch.zeros(64, 128, dtype=torch.float16), \
        torch.zeros(128, 128)
    plan.entry(a.data_ptr(), b.data_ptr(), c.data_ptr(), 128, 128, 64)
    plan.entry(a, b, c, 128, 128, 64)
    assert calls[0][-1] == calls[1][-1]
    values = calls[0][-1]
    assert values[:3] == (a.data_ptr(), b.data_ptr(), c.data_ptr())
    assert calls[0][1:3] == (2, 2)   # grid from the scalars n, m


@pytest.mark.parametrize("bad, error, pattern", [
    ("x", TypeError, "raw pointer.*pass a device address"),
    (-16, ValueError, "not a 64-bit unsigned value"),
    (2**64, ValueError, "not a 64-bit unsigned value"),
    (18, ValueError, "not 16-byte aligned"),
    (torch.zeros(4, dtype=torch.float32), TypeError, "must have dtype float16"),
    (True, TypeError, "raw pointer"),
])
def test_pointer_argument_errors(bad, error, pattern):
    art = tilelang.lower(_matmul_ptr(), target="sm_90a")
    plan, calls = _plan(art)
    c = torch.zeros(4)
    with pytest.raises(error, match=pattern):
        plan.entry(bad, 0, c, 128, 128, 64)
    assert not calls


def test_kernel_description_names_pointers():
    from tilelang.jit.kernel import JITKernel

    art = tilelang.lower(_matmul_ptr(), target="sm_90a")
    text = JITKernel(art).launch_description()
    assert "#0 A: raw pointer to float16[m, k]" in text


# ---------------------------------------------------------------- eager kernels
def test_eager_ptr_kernel():
    @tilelang.jit
    def copy_ptr(A: T.ptr, B: T.ptr, N: int, dtype: T.dtype):
        A = T.make_tensor(A, (N,), dtype)
        B = T.make_tensor(B, (N,), dtype)
        with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:
            for i in T.Parallel(128):
                B[bx * 128 + i] = A[bx * 128 + i]

    kernels = copy_ptr.par_compile([{"A": T.ptr(), "B": T.ptr(), "N": 1024, "dtype": T.float16}])
    art = kernels[0].artifact
    assert [(p.name, p.kind, p.dtype, p.shape) for p in art.params] == [
        ("A", "pointer", "float16", [1024]), ("B", "pointer", "float16", [1024])]


# ---------------------------------------------------------------- access_ptr and cp.async
def test_access_ptr_call_form():
    from tvm import ir, tirx

    buf = tirx.decl_buffer((8, 8), "float16", name="A")
    p = T.access_ptr(tirx.BufferLoad(buf, [tirx.IntImm("int32", 2), tirx.IntImm("int32", 3)]), "rw", 4, 5)
    assert p.op.same_as(ir.Op.get("tl.access_ptr"))
    assert [int(p.args[1]), int(p.args[2])] == [20, 3]
    assert int(T.access_ptr(buf, "r").args[1]) == 64
    with pytest.raises(ValueError, match="access_type"):
        T.access_ptr(buf, "x")


def test_access_ptr_lowers_to_an_address():
    @T.prim_func
    def k(A: T.Tensor((128,), T.float32), B: T.Tensor((128,), T.float32)):
        with T.Kernel(1, threads=128) as _:
            tx = T.get_thread_binding()
            T.import_source("__device__ void tl_test_cp(const float *a, float *b) { b[0] = a[0]; }")
            T.call_extern("void", "tl_test_cp", T.access_ptr(A[tx], "r"), T.access_ptr(B[tx], "w", 1))

    src = tilelang.lower(k, target="sm_90a").source
    assert re.search(r"tl_test_cp\(\(&\(A(_ptr)?\[\(\(int\)threadIdx.x\)\]\)\), "
                     r"\(&\(B(_ptr)?\[\(\(int\)threadIdx.x\)\]\)\)\)", src)


@pytest.mark.parametrize("dtype, lanes, nbytes", [("float16", 4, 8), ("int4", 32, 16), ("float32", 4, 16)])
def test_vectorized_cp_async_is_one_copy(dtype, lanes, nbytes):
    @T.prim_func
    def main(A: T.Tensor((128,), dtype), B: T.Tensor((128,), dtype)):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((128,), dtype)
            for i in T.vectorized(lanes):
                T.ptx_cp_async(T.access_ptr(S[i], "w", 1), T.access_ptr(A[i], "r", 1), 1)
            T.ptx_commit_group()
            T.ptx_wait_group(0)
            B[0] = S[0]

    src = tilelang.lower(main, target="sm_90a", out_idx=[1]).source
    assert src.count(f"cp_async_gs<{nbytes}>") == 1
    assert "tl::cp_async_commit()" in src and "tl::cp_async_wait<0>()" in src


def test_cp_async_rejects_odd_sizes():
    @T.prim_func
    def main(A: T.Tensor((64,), T.uint8), B: T.Tensor((64,), T.uint8)):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((64,), T.uint8)
            T.ptx_cp_async(T.access_ptr(S[0], "w", 3), T.access_ptr(A[0], "r", 3), 3)
            B[0] = S[0]

    with pytest.raises(Exception, match="4, 8 or 16 bytes"):
        tilelang.lower(main, target="sm_90a")


def test_kernels_without_pointer_ops_are_untouched():
    from tilelang.transform.pointer_ops import lower_pointer_ops

    f = _table_copy()
    assert lower_pointer_ops(f) is f


def test_checker_takes_pointer_kernels():
    from tilelang import analysis

    for f in (_matmul_ptr(), _table_copy()):
        for arch in ("sm_90a", "sm_80"):
            assert [d for d in analysis.check(f, arch) if d.severity.value == "error"] == []
        kernel, _ = analysis.analyze(f)
        assert kernel is not None


# ---------------------------------------------------------------- T.async_copy (cp.async, no wait)
def test_async_copy_commits_without_waiting():
    @T.prim_func
    def main(A: T.Tensor((130, 32), T.float16), B: T.Tensor((130, 32), T.float16)):
        with T.Kernel(T.ceildiv(130, 128)) as pid_m:
            S = T.alloc_shared((128, 32), T.float16)
            T.async_copy(A[pid_m * 128:(pid_m + 1) * 128, 0:32], S)
            T.ptx_wait_group(0)
            B[0, 0] = S[0, 0]

    src = tilelang.lower(main, target="sm_90a", out_idx=[1]).source
    assert "tl::cp_async_gs_conditional<16>" in src and "tl::cp_async_commit()" in src
    assert src.count("tl::cp_async_wait<0>") == 1   # the user's own wait only


def test_async_copy_rejects_other_directions():
    import tvm

    @T.prim_func
    def main(A: T.Tensor((64,), T.float16), B: T.Tensor((64,), T.float16)):
        with T.Kernel(1, threads=32):
            S0 = T.alloc_shared((64,), T.float16)
            S1 = T.alloc_shared((64,), T.float16)
            T.copy(A, S0)
            T.async_copy(S0, S1)
            T.copy(S1, B)

    with pytest.raises(tvm.error.InternalError, match=r"T\.async_copy only supports global->shared"):
        tilelang.lower(main, target="sm_90a")


def test_handle_typed_extern_call_as_a_statement_calls_a_void_function():
    """``T.call_extern("handle", f, T.access_ptr(...), ...)`` as a statement (upstream's bitnet
    decode example calls its void decoder so): printed as ``f(...);``, not as 0.27's pointer cast
    ``(void*)f(...)``, which nvcc refuses for a void function."""
    from tilelang.jit import nvcc

    src = "__device__ void twice(signed char* a, signed char* b) { b[0] = a[0] * 2; }"

    @T.prim_func
    def k(A: T.Tensor((128,), "int8"), B: T.Tensor((128,), "int8")):
        with T.Kernel(1, threads=128):
            a = T.alloc_local((4,), "int8")
            b = T.alloc_local((4,), "int8")
            T.import_source(src)
            a[0] = A[T.get_thread_binding()]
            T.call_extern("handle", "twice", T.access_ptr(a, "r"), T.access_ptr(b, "w"))
            B[T.get_thread_binding()] = b[0]

    art = tilelang.lower(k, "sm_90a")
    assert re.search(r"\n\s+twice\(\(&\(a\w*\[0\]\)\), \(&\(b\w*\[0\]\)\)\);", art.source)
    assert nvcc.compile_cubin(art.source, art.arch, art.compile_flags)[:4] == b"\x7fELF"
