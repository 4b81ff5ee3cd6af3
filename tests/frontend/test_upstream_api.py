"""Names and forms that upstream TileLang code uses (found by compiling upstream's examples on
our stack): T.clamp, T.gemm_v2, the cache toggles, ``from tilelang import tvm``,
tilelang.testing, tilelang.utils.tensor, tl.disable_shared_memory_reuse, and a one-element
fragment read at a constant index inside T.Parallel (upstream's online softmax)."""

import pytest
import torch

import tilelang
import tilelang.language as T
import tilelang.testing
from tilelang.jit import nvcc


def _clamp_kernel():
    @T.prim_func
    def kernel(X: T.Tensor((1024,), "float32"), Y: T.Tensor((1024,), "float32")):
        with T.Kernel(8, threads=128) as bx:
            for i in T.Parallel(128):
                Y[bx * 128 + i] = T.clamp(X[bx * 128 + i], -1.0, 2.5)

    return kernel


def test_clamp_is_min_then_max():
    src = tilelang.lower(_clamp_kernel(), "sm_80").source
    body = src[src.index('extern "C" __global__'):]
    # scalar ``max(min(x, 2.5), -1)``, or its lanes when the loop is vectorised (float4)
    assert "2.5" in body and "-1" in body
    assert "max(min(" in body or -1 < body.find("min(") < body.find("max(")


def _gemm(fn):
    @T.prim_func
    def kernel(A: T.Tensor((128, 64), "float16"), B: T.Tensor((64, 128), "float16"), C: T.Tensor((128, 128), "float32")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((128, 64), "float16")
            B_s = T.alloc_shared((64, 128), "float16")
            C_l = T.alloc_fragment((128, 128), "float32")
            T.copy(A, A_s)
            T.copy(B, B_s)
            fn(A_s, B_s, C_l, clear_accum=True, k_pack=2)
            T.copy(C_l, C)

    return kernel


def test_gemm_v2_lowers_like_gemm():
    assert tilelang.lower(_gemm(T.gemm_v2), "sm_90a").source == tilelang.lower(_gemm(T.gemm), "sm_90a").source


def test_cache_toggles_and_tvm_reexport():
    from tilelang import tvm
    from tilelang.jit import cache

    assert tvm.__name__ == "tvm" and hasattr(tvm, "te")
    try:
        tilelang.disable_cache()
        assert not tilelang.is_cache_enabled() and not cache.enabled()
        tilelang.enable_cache()
        assert tilelang.is_cache_enabled()
    finally:
        cache.set_enabled(None)


def test_testing_helpers():
    tilelang.testing.set_random_seed(7)
    a = torch.randn(8)
    tilelang.testing.set_random_seed(7)
    assert torch.equal(a, torch.randn(8))
    x = torch.zeros(1000)
    y = x.clone()
    y[0] = 1.0                                     # 0.1 % of the elements off
    tilelang.testing.torch_assert_close(x, y, max_mismatched_ratio=0.001)
    with pytest.raises(AssertionError, match="RHS"):
        tilelang.testing.torch_assert_close(x, y, max_mismatched_ratio=0.0)
    with pytest.raises(AssertionError, match="float32"):
        tilelang.testing.torch_assert_close(x, y.half())
    mark = tilelang.testing.requires_cuda_compute_version_ge(9, 0)
    assert mark.name == "skipif"
    with pytest.raises(ValueError, match="mode"):
        tilelang.testing.requires_cuda_compute_version(9, 0, "between")
    from tilelang.utils.tensor import torch_assert_close

    assert torch_assert_close is tilelang.testing.torch_assert_close


def _row_max_shift(n=1024):
    @T.prim_func
    def kernel(X: T.Tensor((256, n), "float16"), Y: T.Tensor((256, n), "float16")):
        with T.Kernel(256, threads=128) as row:
            x = T.alloc_fragment((n,), "float16")
            m = T.alloc_fragment((1,), "float16")
            T.copy(X[row, 0:n], x)
            T.reduce_max(x, m, dim=0, clear=True)
            for j in T.Parallel(n):
                x[j] = x[j] - m[0]             # every thread holds the (replicated) maximum
            T.copy(x, Y[row, 0:n])

    return kernel


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_one_element_fragment_read_at_a_constant_index_in_parallel(arch):
    art = tilelang.lower(_row_max_shift(), arch)
    assert nvcc.compile_cubin(art.source, art.arch, art.compile_flags)[:4] == b"\x7fELF"


def test_disable_shared_memory_reuse_gives_every_buffer_its_own_bytes():
    from tilelang.analysis import check
    from tilelang.analysis.report import CheckContext

    @T.prim_func
    def kernel(A: T.Tensor((128, 128), "float16"), C: T.Tensor((128, 128), "float16")):
        with T.Kernel(1, threads=128):
            X_s = T.alloc_shared((128, 128), "float16")   # 32 KiB, live in the first half
            Y_s = T.alloc_shared((256, 288), "float16")   # 144 KiB, live in the second half
            T.copy(A, X_s)
            T.copy(X_s, C)
            T.copy(A, Y_s[0:128, 0:128])
            T.copy(Y_s[0:128, 0:128], C)

    from tilelang.diagnostics import TileLangCompileError

    assert tilelang.lower(kernel, "sm_80").dynamic_smem == 144 * 1024
    # sm_80 allows 163 KiB per block: only the shared placement fits, and the checker knows
    assert not [d for d in check(kernel, "sm_80") if d.code == "TL0501"]
    off = CheckContext(pass_configs={"tl.disable_shared_memory_reuse": True})
    (diag,) = [d for d in check(kernel, "sm_80", off) if d.code == "TL0501"]
    assert "176 KiB" in diag.message
    with pytest.raises(TileLangCompileError, match="176 KiB"):
        tilelang.lower(kernel, "sm_80", {"tl.disable_shared_memory_reuse": True})
    from tilelang.transform.kernel import analyze_kernel
    from tilelang.transform.layout_inference import infer_layouts
    from tilelang.transform.lower_tile_ops import Lowerer

    info = analyze_kernel(kernel)
    lw = Lowerer(info, infer_layouts(info, "sm_80"), {"tl.disable_shared_memory_reuse": True})
    assert lw.smem_bytes == 176 * 1024 and not lw.smem_alias


def test_a_layout_annotation_on_a_per_thread_buffer_is_accepted():
    @T.prim_func
    def kernel(X: T.Tensor((128,), "float32"), Y: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as _:
            acc = T.alloc_local((1,), "float32")
            T.annotate_layout({acc: T.Fragment(acc.shape, forward_thread_fn=lambda i: i)})
            for i in T.Parallel(128):
                acc[0] = X[i] * 2.0
                Y[i] = acc[0]

    art = tilelang.lower(kernel, "sm_80")
    assert "acc" in art.source


def test_two_kernels_in_one_prim_func_are_launched_in_order():
    @T.prim_func
    def two(X: T.Tensor((128,), "float32"), Y: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as _:
            for i in T.Parallel(128):
                Y[i] = X[i]
        with T.Kernel(1, threads=128) as _:
            for i in T.Parallel(128):
                Y[i] = Y[i] * 2.0

    art = tilelang.lower(two, "sm_80")   # one kernel per block (tests/test_memory_model_kernels.py)
    assert [p.name for p in art.parts] == ["two_kernel", "two_1_kernel"]


def _masked_scores():
    @T.prim_func
    def kernel(Q: T.Tensor((64, 128), "float16"), K: T.Tensor((256, 128), "float16"), M: T.Tensor((256,), "uint8"),
               O: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128) as _:
            Q_s = T.alloc_shared((64, 128), "float16")
            K_s = T.alloc_shared((64, 128), "float16")
            acc_s = T.alloc_fragment((64, 64), "float32")
            mask_local = T.alloc_fragment((64,), "uint8")
            T.copy(Q, Q_s)
            T.copy(K[0:64, :], K_s)
            T.copy(M[0:64], mask_local)            # loaded before anything says who needs what
            T.gemm(Q_s, K_s, acc_s, transpose_B=True, clear_accum=True, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(64, 64):
                acc_s[i, j] = T.if_then_else(mask_local[j] != 0, acc_s[i, j], -T.infinity("float32"))
            T.copy(acc_s, O)

    return kernel


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_a_fragment_loaded_by_copy_takes_the_layout_its_reader_needs(arch):
    # upstream's flash decoding: the mask row is copied into a fragment, then read as mask[j] in a
    # loop over the gemm result; each thread must load the columns of acc_s it holds
    from tilelang.transform.kernel import analyze_kernel
    from tilelang.transform.layout_inference import infer_layouts

    info = analyze_kernel(_masked_scores())
    layouts = infer_layouts(info, arch)
    frags = {b.name: f for b, f in layouts.fragments.items()}
    assert frags["mask_local"].replication > 1                # a projection of acc_s's layout
    art = tilelang.lower(_masked_scores(), arch)
    assert nvcc.compile_cubin(art.source, art.arch, art.compile_flags)[:4] == b"\x7fELF"



def test_prim_func_type_through_T():
    """``def matmul(...) -> T.PrimFunc`` (upstream's T re-exports TVM's PrimFunc)."""
    assert T.PrimFunc is tilelang.tvm.tirx.PrimFunc


@pytest.mark.parametrize("name,advice", [
    ("tcgen05_mma", "sm_100 (Blackwell) and later"), ("alloc_tcgen05_smem_desc", "sm_100"),
    ("make_mma_swizzle_layout", "tilelang.cuda.intrinsics"), ("ptx_wgmma_ss", "T.gemm"),
    ("create_tma_descriptor", "T.tma_copy"), ("ptx_arrive_barrier", "T.alloc_barrier"),
    ("annotate_ws_pipeline_depth", "num_stages")])
def test_upstream_names_we_lack_say_what_to_write(name, advice):
    """A name of upstream's T this compiler does not define is still an AttributeError (hasattr
    stays false), with advice; any other missing name keeps the plain message."""
    from tilelang.language import _UPSTREAM_ONLY

    assert not hasattr(T, name)
    with pytest.raises(AttributeError) as info:
        getattr(T, name)
    message = str(info.value)
    assert message.startswith(f"module 'tilelang.language' has no attribute '{name}' (upstream's T.{name} ")
    assert advice in message
    with pytest.raises(AttributeError, match=r"no attribute 'no_such_name'$"):
        T.no_such_name  # noqa: B018
    assert not any(n in vars(T) for n in _UPSTREAM_ONLY)       # advice never shadows a real name


def test_upstream_name_we_lack_fails_at_its_line(tmp_path):
    src = tmp_path / "uses_tcgen05.py"
    src.write_text("import tilelang.language as T\n\n\n"
                   "@T.prim_func\n"
                   "def k(A: T.Tensor((128,), 'float32')):\n"
                   "    with T.Kernel(1, threads=128):\n"
                   "        T.tcgen05_before_thread_sync()\n"
                   "        A[0] = 1.0\n")
    import importlib.util

    from tilelang.frontend import ParseError

    spec = importlib.util.spec_from_file_location("uses_tcgen05", src)
    with pytest.raises(ParseError) as info:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
    assert ":7:9" in str(info.value) and "sm_100 (Blackwell)" in str(info.value)
