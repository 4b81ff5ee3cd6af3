"""Names of upstream's ``T`` added for issue 17: buffer views (``T.reshape``/``T.view``), ``T.attr``,
``T.let``, ``T.align_up``, ``T.thread_binding`` with ``T.match_buffer``, and the kernel-level
``T.annotate_pass_configs``/``T.annotate_compile_flags``. Each kernel lowers, its indexing is
checked in the generated CUDA, and it compiles with nvcc where nvcc is installed."""

import pytest
from tvm import tirx

import tilelang
import tilelang.language as T
from tilelang.frontend.errors import ParseError
from tilelang.diagnostics import TileLangCompileError
from tilelang.jit import nvcc
from tilelang.transform import PassConfigKey

try:
    nvcc.find_nvcc()
    HAVE_NVCC = True
except Exception:  # noqa: BLE001
    HAVE_NVCC = False

N, M = 1024, 32


def _body(art) -> str:
    return art.source[art.source.index('extern "C" __global__'):]


def _compiles(art) -> None:
    if HAVE_NVCC:
        assert nvcc.compile_cubin(art.source, art.arch, art.compile_flags)[:4] == b"\x7fELF"


def test_reshape_of_a_global_tensor_reads_the_same_storage():
    @T.prim_func
    def main(A: T.Tensor((N,), T.float32), B: T.Tensor((N // M, M), T.float32)):
        with T.Kernel(1) as _:
            A_r = T.reshape(A, [N // M, M])
            for i, j in T.Parallel(N // M, M):
                B[i, j] = A_r[i, j] * 2.0

    art = tilelang.lower(main, "sm_90a")
    body = _body(art)
    # the view's accesses land on A, flattened (scalar ``A[...]`` or a ``float4`` load of ``A + ...``)
    assert ("A[" in body or "(float4*)(A + " in body) and "A_r" not in body
    _compiles(art)


def test_view_with_a_new_dtype_reinterprets_the_storage():
    @T.prim_func
    def main(A: T.Tensor((N,), T.float32), B: T.Tensor((N // M, 2 * M), T.float16)):
        with T.Kernel(1) as _:
            T.copy(T.view(A, [N // M, 2 * M], dtype=T.float16), B)

    art = tilelang.lower(main, "sm_90a")
    assert "((half*)A)[" in _body(art)
    _compiles(art)


def test_view_checks_the_size_and_needs_a_kernel():
    A = tirx.decl_buffer((16, 32), "float16", name="A")
    with pytest.raises(AssertionError, match="not the same number of bits"):   # upstream's error type
        T.view(A, (16, 33))
    with pytest.raises(AssertionError, match="not the same number of bits"):
        T.reshape(A, (16, 16))
    with pytest.raises(RuntimeError, match="inside a kernel"):
        T.view(A, (16, 16), dtype=T.float32)


def test_dtype_view_of_a_fragment_is_a_located_error():
    # float32 -> float16 changes the width (same-width views of fragments work:
    # tests/frontend/test_user_kernel_forms.py; reshapes of shared and fragment buffers:
    # tests/test_memory_model_kernels.py; dtype views of shared buffers: tests/test_views_dtype.py)
    @T.prim_func
    def main(A: T.Tensor((N,), T.float32), B: T.Tensor((N // M, 2 * M), T.float16)):
        with T.Kernel(1) as _:
            A_f = T.alloc_fragment((N,), T.float32)
            T.copy(A, A_f)
            T.copy(T.view(A_f, [N // M, 2 * M], dtype=T.float16), B)

    with pytest.raises(TileLangCompileError, match="only to one of the same width") as err:
        tilelang.lower(main, "sm_90a")
    assert err.value.diagnostics[0].span.line > 0


def test_let_attr_and_align_up():
    @T.prim_func
    def main(A: T.Tensor((64,), T.float32), B: T.Tensor((64,), T.float32)):
        with T.Kernel(2, threads=32) as bx:
            off = T.int32()
            T.let(off, bx * 32)
            tx = T.get_thread_binding()
            with T.attr(0, "pragma_note", 1):
                B[off + tx] = A[off + tx] + T.cast(T.align_up(tx, 8), T.float32)

    assert "T.attr" in main.script()
    art = tilelang.lower(main, "sm_90a")
    body = _body(art)
    # off is bound to bx * 32 (the simplifier inlines it); the bounds check knows it, so no guard
    assert "A[((((int)blockIdx.x) * 32) + ((int)threadIdx.x))]" in body
    assert "+ 7) >> 3) * 8" in body                                        # align_up(tx, 8)
    _compiles(art)


def test_align_up_folds_constants():
    assert int(T.align_up(tirx.IntImm("int32", 33), 32)) == 64
    assert int(T.align_up(tirx.IntImm("int32", 64), 32)) == 64


def test_thread_binding_and_match_buffer_form_a_kernel():
    @T.prim_func
    def main(A_ptr: T.handle):
        A = T.match_buffer(A_ptr, (16, 16), dtype=T.float32, align=16)
        for bx in T.thread_binding(4, thread="blockIdx.x"):
            for tx in T.thread_binding(16, thread="threadIdx.x"):
                if bx < 16:
                    A[bx, tx] = 1.0

    art = tilelang.lower(main, "sm_90a")
    assert [str(g) for g in art.grid] == ["4", "1", "1"] and str(art.block[0]) == "16"
    assert "A[((((int)blockIdx.x) * 16) + ((int)threadIdx.x))] = " in _body(art)
    _compiles(art)


def test_thread_binding_rejects_what_is_not_a_launch_axis():
    with pytest.raises(ValueError, match="blockIdx.x/y/z or threadIdx"):
        T.thread_binding(4, thread="vthread")
    with pytest.raises(ValueError, match="starts at 0"):
        T.thread_binding(1, 4, thread="threadIdx.x")


def _annotated(configs=None, flags=None):
    @T.prim_func
    def main(A: T.Tensor((32,), T.float32)):
        if configs is not None:
            T.annotate_pass_configs(configs)
        if flags is not None:
            T.annotate_compile_flags(flags)
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding()
            A[tx] = T.exp(A[tx])

    return main


def test_annotate_pass_configs_reach_the_compiler_and_the_caller_wins():
    func = _annotated(configs={PassConfigKey.TL_ENABLE_FAST_MATH: True})
    assert dict(func.attrs["tilelang_pass_configs"]) == {"tl.enable_fast_math": True}
    assert "--use_fast_math" in tilelang.lower(func, "sm_90a").compile_flags
    overridden = tilelang.lower(func, "sm_90a", pass_configs={PassConfigKey.TL_ENABLE_FAST_MATH: False})
    assert "--use_fast_math" not in overridden.compile_flags
    assert "--use_fast_math" not in tilelang.lower(_annotated(), "sm_90a").compile_flags


def test_annotate_compile_flags_are_added_to_the_callers():
    func = _annotated(flags=["-lineinfo"])
    assert list(func.attrs["tilelang_compile_flags"]) == ["-lineinfo"]
    art = tilelang.lower(func, "sm_90a")
    assert art.compile_flags[-1] == "-lineinfo"
    _compiles(art)
    both = _annotated(configs={"tl.enable_fast_math": True}, flags="--use_fast_math")
    assert tilelang.lower(both, "sm_90a").compile_flags.count("--use_fast_math") == 1
    with pytest.raises(ParseError, match="string or a list of strings"):
        _annotated(flags=[1])


def test_annotate_min_blocks_per_sm_sets_the_launch_bounds():
    @T.prim_func
    def main(A: T.Tensor((128, 128), T.float32), C: T.Tensor((128, 128), T.float32)):
        with T.Kernel(128, threads=128) as bx:
            T.annotate_min_blocks_per_sm(2)
            for i in T.serial(128):
                C[bx, i] = A[bx, i] * 2.0

    art = tilelang.lower(main, "sm_90a")
    assert art.source.count("__launch_bounds__(128, 2)") == 2      # declaration and definition
    _compiles(art)
    # without the annotation: the plain bound (this one-block kernel is a single wave, which
    # engine/lower gives (T, 1) unless tl.disable_single_wave_launch_bound)
    assert "__launch_bounds__(32, 1)" in tilelang.lower(_annotated(), "sm_90a").source
    plain = tilelang.lower(_annotated(), "sm_90a", pass_configs={"tl.disable_single_wave_launch_bound": True})
    assert "__launch_bounds__(32)" in plain.source
    with pytest.raises(ValueError, match="positive int"):
        T.annotate_min_blocks_per_sm(0)


def test_kernel_attributes_in_an_eager_style_prim_func():
    @T.prim_func
    def kernel(A):
        A: T.Tensor[[64, 64], T.float32]
        T.annotate_pass_configs({PassConfigKey.TL_ENABLE_FAST_MATH: True})
        T.annotate_compile_flags(["-lineinfo"])
        B = T.empty([64, 64], T.float32)
        with T.Kernel(1):
            for i in T.serial(64):
                for j in T.serial(64):
                    B[i, j] = A[i, j] * 2.0
        return B

    assert list(kernel.attrs["tilelang_out_idx"]) == [-1]
    art = tilelang.lower(kernel, "sm_90a")
    assert art.compile_flags == ["--use_fast_math", "-lineinfo"] and art.out_idx == [1]
