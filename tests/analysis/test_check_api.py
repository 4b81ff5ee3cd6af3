"""``tilelang.analysis.check`` as a library and inside the JIT: never raises on user mistakes,
one TL0003 for its own bugs, errors stop the compile at the user's line, warnings warn."""

from __future__ import annotations

import warnings

import pytest

import tilelang
import tilelang.language as T
from tilelang import targets
from tilelang.analysis import CheckContext, check
from tilelang.diagnostics import TileLangCompileError


def matmul(M, N, K, b_rows=32, clear=True, block=64):
    @T.prim_func
    def kernel(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block, 32), "float16")
            B_shared = T.alloc_shared((b_rows, block), "float16")
            C_local = T.alloc_fragment((block, block), "float32")
            if clear:
                T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, 32), num_stages=2):
                T.copy(A[by * block, k * 32], A_shared)
                T.copy(B[k * 32, bx * block], B_shared[0:32, 0:block])
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block, bx * block])

    return kernel


def test_a_correct_kernel_has_no_diagnostics():
    assert check(matmul(256, 256, 256), "sm_90a") == []


def test_operand_spans_need_the_source_text():
    func = matmul(256, 256, 256, b_rows=64)
    without = check(func, "sm_90a")
    with_source = check(func, "sm_90a", CheckContext(read_source=lambda f: open(f).read()))
    assert [d.code for d in without] == [d.code for d in with_source] == ["TL0101"]
    assert without[0].span.line == with_source[0].span.line
    assert with_source[0].span.end_column - with_source[0].span.column == len("B_shared")
    assert without[0].span.file == __file__


def test_an_internal_bug_is_one_tl0003(monkeypatch):
    from tilelang.analysis import checker

    def broken(k, rep):
        raise RuntimeError("boom")

    monkeypatch.setattr(checker, "CHECKS", (("gemm", broken), ("shapes", broken)) + checker.CHECKS[2:])
    found = check(matmul(256, 256, 256), "sm_90a")
    internal = [d for d in found if d.code == "TL0003"]
    assert len(internal) == 1
    assert "boom" in internal[0].message
    assert any("also failed" in n.message for n in internal[0].notes)


def test_jit_raises_at_the_users_line_without_compiler_frames():
    func = matmul(256, 256, 256, b_rows=64)
    with pytest.raises(TileLangCompileError) as info:
        tilelang.lower(func, target="sm_90a")
    text = str(info.value)
    assert "error[TL0101]" in text
    assert f"{__file__}:" in text
    assert "T.gemm(A_shared, B_shared, C_local)" in text
    assert "tilelang/analysis" not in text


def test_jit_warns_and_still_compiles():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        artifact = tilelang.lower(matmul(256, 256, 256, clear=False), target="sm_90a")
    assert artifact.source
    assert any("TL0401" in str(w.message) for w in caught)


def test_the_pipeline_checks_first():
    from tilelang.engine.pipeline import PASSES

    assert PASSES[0][0] == "check"


@pytest.mark.parametrize("arch, limit", [("sm_90a", 232448), ("sm_80", 166912), ("sm_86", 101376),
                                         ("sm_89", 101376), ("sm_100", 232448)])
def test_shared_memory_limits(arch, limit):
    assert targets.smem_per_block(arch) == limit


@pytest.mark.parametrize("a, b, c, arch, ok", [
    ("float16", "float16", "float32", "sm_80", True), ("float16", "float16", "float16", "sm_80", True),
    ("bfloat16", "bfloat16", "float32", "sm_80", True), ("bfloat16", "bfloat16", "float16", "sm_90a", False),
    ("int8", "int8", "int32", "sm_80", True), ("int8", "int8", "float32", "sm_80", False),
    ("float8_e4m3fn", "float8_e5m2", "float32", "sm_90a", True), ("float8_e4m3fn", "float8_e4m3fn", "float32", "sm_80", False),
    ("float8_e4m3fn", "float8_e4m3fn", "float32", "sm_89", True), ("float32", "float32", "float32", "sm_80", True),
    ("float16", "bfloat16", "float32", "sm_90a", False),
])
def test_tensor_core_dtype_table(a, b, c, arch, ok):
    assert (targets.mma_problem(a, b, c, arch) is None) == ok


def test_bad_target_spelling_is_rejected():
    with pytest.raises(ValueError):
        targets.parse_arch("hopper")


def _near_budget(pad_floats):
    @T.prim_func
    def kernel(A: T.Tensor((1024, 1024), "float16"), B: T.Tensor((1024, 1024), "float16"),
               C: T.Tensor((1024, 1024), "float16")):
        with T.Kernel(4, 8, threads=256) as (bx, by):
            X_s = T.alloc_shared((pad_floats,), "float32")
            A_s = T.alloc_shared((128, 64), "float16")
            B_s = T.alloc_shared((64, 256), "float16")
            C_l = T.alloc_fragment((128, 256), "float32")
            T.clear(C_l)
            X_s[0] = C_l[0, 0]   # live across the loop: it cannot share bytes with A_s / B_s
            for k in T.Pipelined(16, num_stages=4):
                T.copy(A[by * 128, k * 64], A_s)
                T.copy(B[k * 64, bx * 256], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(X_s[0:1], C[0, 0:1])
            T.copy(C_l, C[by * 128, bx * 256])

    return kernel


def test_smem_budget_counts_the_sm90a_carve_out():
    # 192 KiB of A/B stages plus a 35712-byte buffer: 227 KiB - 736 B as buffers, but on sm_90a the
    # wgmma tiles start at a 1024-byte boundary and the mbarrier ring adds 64 bytes: over by 64.
    diags = [d for d in check(_near_budget(35 * 256 - 32), "sm_90a") if d.code == "TL0501"]
    assert len(diags) == 1 and "232512 bytes" in diags[0].message
    assert "1024-byte boundaries" in diags[0].notes[-1].message
    (sm80,) = [d for d in check(_near_budget(35 * 256 - 32), "sm_80") if d.code == "TL0501"]  # 163 KiB budget
    assert "1024-byte" not in sm80.notes[-1].message                                        # the buffer count
    assert not [d for d in check(_near_budget(34 * 256), "sm_90a") if d.code == "TL0501"]


def test_addresses_given_to_an_extern_call_are_neither_uninitialised_reads_nor_unused():
    @T.prim_func
    def kernel(A: T.Tensor((16,), "float16"), B: T.Tensor((16,), "float16")):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((16,), "float16")
            L = T.alloc_local((8,), "float16")
            T.copy(A, S)
            T.call_extern("void", "tl::copy_vec<16>", T.address_of(L[0]), T.address_of(S[0]))   # writes L
            for i in T.serial(8):
                B[i] = L[i]

    codes = [d.code for d in check(kernel, "sm_90a")]
    assert "TL0401" not in codes and "TL0403" not in codes


def test_the_same_kernel_text_in_two_files_is_located_in_each_file(tmp_path):
    """Code objects compare equal across files when their text and lines are (CPython leaves the
    file name out of ``==``): the frontend's per-code cache must still give each file's kernel its
    own spans, or an editor's unsaved copy of a file reports its errors in the file on disk."""
    import importlib.util

    text = (
        "import tilelang.language as T\n"
        "def make():\n"
        "    @T.prim_func\n"
        "    def kernel(A: T.Tensor((256, 256), 'float16'), B: T.Tensor((256, 256), 'float16')):\n"
        "        with T.Kernel(4, threads=128) as bx:\n"
        "            S = T.alloc_shared((64, 64), 'float16')\n"
        "            F = T.alloc_fragment((64, 64), 'float32')\n"
        "            T.copy(A[bx * 64, 0], S)\n"
        "            T.gemm(S, S, F)\n"
        "            T.copy(F, B[bx * 64, 0])\n"
        "    return kernel\n"
    )
    files = []
    for name in ("first", "second"):
        path = tmp_path / f"{name}.py"
        path.write_text(text)
        spec = importlib.util.spec_from_file_location(f"same_text_{name}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        files.append((str(path), module.make()))
    assert files[0][1].body is not None
    for path, func in files:
        diags = check(func, "sm_90a")
        assert diags and all(d.span.file == path for d in diags if d.span is not None), \
            [(d.code, d.span and d.span.file) for d in diags]
