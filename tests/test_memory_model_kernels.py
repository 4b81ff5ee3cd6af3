"""Several ``with T.Kernel`` blocks in one prim_func, ``T.alloc_global`` workspaces, host-level
statements before the launch, and ``T.copy`` between parts of fragments (CPU: IR, artifact and
generated CUDA; launching needs a GPU)."""

import re
import pytest

import tilelang
import tilelang.language as T
from tilelang.artifact import KernelArtifact
from tilelang.diagnostics import TileLangCompileError
from tilelang.jit.kernel import JITKernel


def _split_and_combine(n=128):
    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        W = T.alloc_global((n,), "float32")
        T.assume(n > 0)
        with T.Kernel(1, threads=128):
            for i in T.Parallel(n):
                W[i] = A[i] * 2
        with T.Kernel(2, threads=64) as bx:
            for i in T.Parallel(64):
                B[bx * 64 + i] = W[bx * 64 + i] + 1

    return main


def test_two_kernels_and_a_workspace():
    art = tilelang.lower(_split_and_combine(), target="sm_90a", out_idx=[1])
    assert [p.name for p in art.params] == ["A", "B"]
    assert art.out_idx == [1]
    assert art.workspaces == [{"name": "W", "dtype": "float32", "shape": [128]}]
    assert [p.name for p in art.parts] == ["main_kernel", "main_1_kernel"]
    first, second = art.parts
    assert [p.name for p in first.params] == ["A", "B", "W"]
    assert first.kernel_args == ["A", "W"] and first.block == [128, 1, 1]
    assert second.kernel_args == ["B", "W"] and second.grid[0] == "2" and second.block == [64, 1, 1]
    assert "tl::assume" in first.source and "tl::assume" in second.source
    assert art.source.count('extern "C" __global__ void') == 4   # declaration + definition each
    art.check()


def test_parts_round_trip_json():
    art = tilelang.lower(_split_and_combine(), target="sm_90a", out_idx=[1])
    back = KernelArtifact.from_json(art.to_json())
    assert [p.name for p in back.parts] == [p.name for p in art.parts]
    assert back.workspaces == art.workspaces
    JITKernel(back)   # checks it


def test_jit_kernel_builds_every_part(monkeypatch):
    art = tilelang.lower(_split_and_combine(), target="sm_90a", out_idx=[1])
    seen = []
    import sys

    monkeypatch.setattr(sys.modules["tilelang.jit.kernel"].nvcc, "compile_cubin", lambda src, *a, **k: seen.append(src) or b"cubin")
    kernel = JITKernel(art)
    kernel.ensure_cubin()
    assert len(seen) == 2 and all(p.cubin == b"cubin" for p in art.parts)


def test_several_kernels_are_stored_in_the_disk_cache_once_built(monkeypatch, tmp_path):
    """A multi-kernel function's cubins are built on first launch; the disk cache then holds the
    whole artifact, so a later compile (another process) neither lowers nor runs nvcc again."""
    import sys

    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("TILELANG_DISABLE_CACHE", raising=False)
    built = []
    monkeypatch.setattr(sys.modules["tilelang.jit.kernel"].nvcc, "compile_cubin",
                        lambda src, *a, **k: built.append(src) or f"cubin{len(built)}".encode())
    kernel = tilelang.compile(_split_and_combine(), out_idx=[1], target="sm_90a")
    assert built == [] and not any(tmp_path.rglob("artifact.json"))   # nothing built, nothing stored
    kernel.ensure_cubin()
    assert len(built) == 2
    entry = next(tmp_path.rglob("artifact.json")).parent
    assert sorted(f.name for f in entry.iterdir()) == ["artifact.json", "kernel.cu", "part0.cubin", "part1.cubin"]

    again = tilelang.compile(_split_and_combine(), out_idx=[1], target="sm_90a")
    assert [p.cubin for p in again.artifact.parts] == [b"cubin1", b"cubin2"]   # from the entry
    again.ensure_cubin()
    assert len(built) == 2
    (entry / "part1.cubin").write_bytes(b"damaged")            # a damaged part is a miss, not an error
    third = tilelang.compile(_split_and_combine(), out_idx=[1], target="sm_90a")
    assert all(p.cubin is None for p in third.artifact.parts)


def test_single_kernel_is_unchanged():
    @T.prim_func
    def one(A: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(128):
                A[i] = A[i] + 1

    art = tilelang.lower(one, target="sm_90a")
    assert art.parts == [] and art.workspaces == []


def test_assume_before_the_kernel():
    stride = T.dynamic("stride")

    @T.prim_func
    def main(dst: T.StridedTensor((1, 256), (stride, 1), "uint8"),
             src: T.StridedTensor((1, 256), (stride, 1), "uint8")):
        T.assume(stride % 2 == 0)
        with T.Kernel(1):
            for t, f in T.Parallel(4, 256):
                if t < 1:
                    dst[t, f] = src[t, f]

    art = tilelang.lower(main, target="sm_90a")
    assert not art.parts and "tl::assume" in art.source


def test_shared_buffer_outside_a_kernel_is_located():
    @T.prim_func
    def bad(A: T.Tensor((128,), "float32")):
        S = T.alloc_shared((128,), "float32")
        with T.Kernel(1, threads=128):
            for i in T.Parallel(128):
                A[i] = S[i]

    with pytest.raises(TileLangCompileError, match="allocated outside"):
        tilelang.lower(bad, target="sm_90a")


def test_alloc_global_rejects_other_scopes():
    with pytest.raises(ValueError, match="scope 'global'"):
        T.alloc_global((4,), "float32", scope="shared")


def test_copy_between_parts_of_fragments_is_a_parallel_loop():
    @T.prim_func
    def rows(A: T.Tensor((4, 128), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            tile = T.alloc_fragment((4, 128), "float32")
            row = T.alloc_fragment((128,), "float32")
            acc = T.alloc_fragment((128,), "float32")
            T.copy(A, tile)
            T.clear(acc)
            for k in T.serial(4):
                T.copy(tile[k, :], row)
                for i in T.Parallel(128):
                    acc[i] += row[i]
            T.copy(acc, B)

    src = tilelang.lower(rows, target="sm_90a").source
    assert re.search(r"\bB\[|\(B \+", src) and "tl::copy" not in src


def _body(art):
    return art.source[art.source.find('extern "C" __global__ void __launch'):]


def test_out_of_bounds_global_copy_reads_zero():
    @T.prim_func
    def pad(A: T.Tensor((70, 75), "float32"), B: T.Tensor((96, 96), "float32")):
        with T.Kernel(3, 3, threads=128) as (bx, by):
            T.copy(A[by * 32:(by + 1) * 32, bx * 32:(bx + 1) * 32], B[by * 32:(by + 1) * 32, bx * 32:(bx + 1) * 32])

    src = _body(tilelang.lower(pad, target="sm_90a"))
    assert "} else {" in src and "0x0p+0f" in src   # in B, outside A: B gets 0


def test_annotated_safe_value_in_copy_and_parallel():
    @T.prim_func
    def shifted(A: T.Tensor((256, 256), "float16"), B: T.Tensor((256, 256), "float16")):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            S = T.alloc_shared((128, 128), "float16")
            T.annotate_safe_value({A: 10})
            for i, j in T.Parallel(128, 128):
                S[i, j] = A[by * 128 + i - 10, bx * 128 + j]
            for i, j in T.Parallel(128, 128):
                B[by * 128 + i, bx * 128 + j] = S[i, j]

    src = _body(tilelang.lower(shifted, target="sm_90a"))
    assert "10 <= " in src and "1.000000e+01" in src
    assert "tl.safe_value" not in src


def test_element_copy_inside_parallel_is_a_store():
    @T.prim_func
    def elem(A: T.Tensor((70, 75), "float32"), B: T.Tensor((96, 96), "float32")):
        with T.Kernel(1, threads=128):
            T.annotate_safe_value({A: -99})
            for i, j in T.Parallel(96, 96):
                T.copy(A[i, j], B[i, j])

    src = _body(tilelang.lower(elem, target="sm_90a"))
    assert "-9.900000e+01" in src and "< 70" in src and "< 75" in src


def test_safe_values_are_scoped_by_sblock_as_upstream_writes_them():
    """Upstream's test_tilelang_copy_oob_safe_value_lexical_scope: T.sblock scopes (no iterators)
    are plain scopes, and the innermost T.annotate_safe_value of a tensor gives its out-of-bounds
    reads there: the inner copy pads with -99, the outer one with -1."""
    @T.prim_func
    def scoped(A: T.Tensor((60, 60), "int32"), Out: T.Tensor((64, 64), "int32")):
        with T.Kernel(1, threads=128):
            inner = T.alloc_shared((64, 64), "int32")
            outer = T.alloc_shared((64, 64), "int32")
            with T.sblock("outer"):
                T.reads()
                T.writes()
                T.annotate_safe_value({A: -1})
                with T.sblock("inner"):
                    T.reads()
                    T.writes()
                    T.annotate_safe_value({A: -99})
                    T.copy(A[0:64, 0:64], inner)
                T.copy(A[0:64, 0:64], outer)
                for i, j in T.Parallel(64, 64):
                    Out[i, j] = outer[i, j] + inner[i, j]

    src = _body(tilelang.lower(scoped, target="sm_90a"))
    assert "tl.safe_value" not in src and "SBlock" not in src
    assert -1 < src.index("= -99;") < src.index("= -1;")


def test_tile_atomic_from_shared_and_global():
    @T.prim_func
    def acc(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((64, 64), "float32")
            T.copy(A, S)
            T.atomic_add(B, S)
            T.atomic_add(B[0:32, :], A[32:64, :])

    src = _body(tilelang.lower(acc, target="sm_90a"))
    # float32 rows of 64: one 4-wide packed atomic per thread and step (red.global.add.v4.f32)
    assert src.count("tl::atomic_addx4(") == 2 and "tl::atomic_add(" not in src
    assert "smem)[((it_1 * 512) + (((int)threadIdx.x) * 4))]" in src and "* 4)) + 2048)]" in src


def test_annotate_layout_on_a_global_tensor_keeps_its_addressing():
    @T.prim_func
    def k(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            T.annotate_layout({A: T.Layout((64, 64), lambda i, j: [j, i])})
            T.copy(A, B)

    assert re.search(r"\bA\[|\(A \+", tilelang.lower(k, target="sm_90a").source)


def test_view_size_mismatch_is_an_assertion_error():
    with pytest.raises(AssertionError, match="same number of bits"):   # upstream's type, at the build
        @T.prim_func
        def k(A: T.Tensor((1024,), "float32"), B: T.Tensor((32, 33), "float32")):
            with T.Kernel(1):
                T.copy(T.view(A, [32, 33]), B)


CUDA_COPY = """
extern "C" __global__ void external_copy(float* A, float* B, int n) {
    int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n) { B[i] = A[i]; }
}
"""


def _source_kernel(entry):
    N = T.dynamic("N")

    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        T.CUDASourceCodeKernel(T.ceildiv(N, 128), threads=128, source_code_or_path=CUDA_COPY, entry_name=entry)

    return main


def test_cuda_source_kernel(tmp_path):
    art = tilelang.lower(_source_kernel("external_copy"), target="sm_90a")
    assert art.name == "external_copy" and "B[i] = A[i];" in art.source
    assert art.kernel_args == ["A", "B", "N"] and art.kernel_arg_types == ["ptr", "ptr", "int32"]
    assert art.block == [128, 1, 1] and "N" in art.grid[0]
    with pytest.raises(TileLangCompileError, match="Available entries: external_copy"):
        tilelang.lower(_source_kernel("main_kernel"), target="sm_90a")


def test_none_for_a_tensor_the_kernel_never_reads():
    @T.prim_func
    def k(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32"), Bias: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(128):
                B[i] = A[i]

    art = tilelang.lower(k, target="sm_90a")
    assert "Bias" not in art.kernel_args
    torch = pytest.importorskip("torch")
    from tilelang.jit.adapter_args import ArgPlan

    calls = []
    plan = ArgPlan(art, launch=lambda *a: calls.append(a), device_type="cpu", stream=lambda d: 0)
    plan.entry(torch.ones(128), torch.zeros(128), None)   # upstream's optional Bias: a null pointer
    assert len(calls) == 1


def test_reshape_of_shared_and_fragment_buffers():
    @T.prim_func
    def k(A: T.Tensor((32, 32), "float16"), B: T.Tensor((1024,), "float16"), C: T.Tensor((1024,), "float16")):
        with T.Kernel(1, threads=32):
            A_s = T.alloc_shared((32, 32), "float16")
            A_f = T.alloc_fragment((32, 32), "float16")
            T.copy(A, A_s)
            T.copy(A_s, A_f)
            T.copy(T.reshape(A_s, [1024]), B)
            flat = T.reshape(A_f, [1024])
            for i in T.Parallel(1024):
                C[i] = flat[i] + 1

    src = _body(tilelang.lower(k, target="sm_90a"))
    # the flat view reads A_f's registers in order (8 halves at a time: a vectorized T.Parallel)
    assert re.search(r"\bB\[|\(B \+", src) and "*(uint4*)(A_f + (i * 8))" in src


def test_reduce_of_a_fragment_view_runs_on_a_staged_copy():
    @T.prim_func
    def k(A: T.Tensor((1024,), "float32"), B: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32):
            A_f = T.alloc_fragment((1024,), "float32")
            B_f = T.alloc_fragment((32,), "float32")
            T.copy(A, A_f)
            T.reduce_max(T.reshape(A_f, [32, 32]), B_f, dim=1)
            T.copy(B_f, B)

    src = tilelang.lower(k, target="sm_90a").source     # (tests/test_examples_v32_compile.py)
    assert "_staged" in src and "tl::warp_allreduce<tl::MaxOp" in src


def test_parts_launch_in_order_with_outputs_and_workspaces(monkeypatch):
    """The composite call on CPU tensors: each part's argument plan in test mode, launches recorded."""
    torch = pytest.importorskip("torch")
    from tilelang.jit.adapter_args import ArgPlan

    launches = []

    def plan(self):
        if self._plan is None:
            name = self.artifact.name
            self._plan = ArgPlan(self.artifact, stream=lambda d: 0, device_type="cpu",
                                 launch=lambda *a: launches.append((name, a[-1])))
            self._entry = self._plan.entry
        return self._plan

    monkeypatch.setattr(JITKernel, "_build_plan", plan)
    monkeypatch.setattr(JITKernel, "ensure_cubin", lambda self: b"")
    art = tilelang.lower(_split_and_combine(), target="sm_90a", out_idx=[1])
    kernel = JITKernel(art)
    a = torch.ones(128)
    b = kernel(a)
    assert b.shape == (128,) and [n for n, _ in launches] == ["main_kernel", "main_1_kernel"]
    (_, first), (_, second) = launches
    assert first[0] == a.data_ptr() and second[0] == b.data_ptr() and first[1] == second[1]  # W shared
    launches.clear()
    c = torch.zeros(128)
    assert kernel(a, c) is c and [n for n, _ in launches] == ["main_kernel", "main_1_kernel"]
