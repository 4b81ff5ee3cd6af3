"""Upstream's tile-op call signatures: reduce ``batch``/``nan_propagate``/``annotations``,
reductions in blocks smaller than a warp, ``T.Kernel`` without grid extents, and ``T.copy``'s
``prefer_instruction``/``annotations``. Kernels are lowered for sm_90a and built with nvcc."""

import pytest

import tilelang
import tilelang.language as T
from tilelang.jit import nvcc

try:
    nvcc.find_nvcc()
    HAVE_NVCC = True
except Exception:  # noqa: BLE001
    HAVE_NVCC = False


def _reduce_kernel(fn, dtype="float16", threads=32, length=64, **kw):
    @T.prim_func
    def kernel(a: T.Tensor((length,), dtype), out: T.Tensor((1,), dtype)):
        with T.Kernel(1, threads=threads):
            frag = T.alloc_fragment((length,), dtype)
            res = T.alloc_fragment((1,), dtype)
            T.copy(a, frag)
            fn(frag, res, **kw)
            T.copy(res, out)

    return kernel


def _build(func):
    art = tilelang.lower(func, "sm_90a")
    if HAVE_NVCC:
        assert nvcc.compile_cubin(art.source, "sm_90a", art.compile_flags)[:4] == b"\x7fELF"
    return art.source


@pytest.mark.parametrize("fn, dtype, intrin, functor", [
    (T.reduce_max, "float16", "__hmax_nan", "tl::MaxOpNan"),
    (T.reduce_min, "bfloat16", "__hmin_nan", "tl::MinOpNan"),
    (T.reduce_absmax, "float16", "__hmax_nan", "tl::MaxOpNan"),
])
def test_nan_propagate_uses_the_nan_intrinsics(fn, dtype, intrin, functor):
    src = _build(_reduce_kernel(fn, dtype, nan_propagate=True))
    assert intrin in src and f"warp_allreduce<{functor}," in src
    plain = _build(_reduce_kernel(fn, dtype))
    assert "_nan" not in plain and "OpNan" not in plain


def test_nan_propagate_in_annotations_and_on_clear_false():
    @T.prim_func
    def kernel(a: T.Tensor((64,), "float16"), out: T.Tensor((1,), "float16")):
        with T.Kernel(1, threads=32):
            frag = T.alloc_fragment((64,), "float16")
            res = T.alloc_fragment((1,), "float16")
            T.copy(a, frag)
            T.fill(res, -1)
            T.reduce_max(frag, res, clear=False, annotations={"nan_propagate": True})
            T.copy(res, out)

    src = _build(kernel)
    # the write-back merge with the old value propagates NaN too
    assert "max(" not in src.replace("__hmax_nan(", "").split("extern \"C\"")[-1]


def test_nan_propagate_is_a_no_op_for_float32_as_upstream():
    a = tilelang.lower(_reduce_kernel(T.reduce_max, "float32", nan_propagate=True), "sm_90a").source
    b = tilelang.lower(_reduce_kernel(T.reduce_max, "float32"), "sm_90a").source
    assert a == b


def test_batch_is_accepted_and_checked():
    plain = tilelang.lower(_reduce_kernel(T.reduce_sum, "float32"), "sm_90a").source
    assert tilelang.lower(_reduce_kernel(T.reduce_sum, "float32", batch=1, annotations={}), "sm_90a").source == plain
    with pytest.raises(ValueError, match="batch must be >= 1"):
        tilelang.lower(_reduce_kernel(T.reduce_sum, "float32", batch=0), "sm_90a")
    # one output element per thread: batch 2 is more than there is
    with pytest.raises(Exception, match="exceeds total output elements"):
        tilelang.lower(_reduce_kernel(T.reduce_sum, "float32", batch=2), "sm_90a")


def test_batch_must_divide_the_outputs_per_thread():
    @T.prim_func
    def kernel(a: T.Tensor((64, 32), "float32"), out: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=32):
            frag = T.alloc_fragment((64, 32), "float32")
            res = T.alloc_fragment((64,), "float32")
            T.copy(a, frag)
            T.reduce_sum(frag, res, dim=1, batch=3)
            T.copy(res, out)

    with pytest.raises(Exception, match="must evenly divide"):
        tilelang.lower(kernel, "sm_90a")


@pytest.mark.parametrize("threads, mask", [(4, "0xfu"), (8, "0xffu"), (16, "0xffffu")])
def test_sub_warp_block_shuffles_over_its_live_lanes(threads, mask):
    src = _build(_reduce_kernel(T.reduce_sum, "float32", threads=threads, length=16))
    shuffles = [ln for ln in src.splitlines() if "warp_allreduce<tl::SumOp" in ln]
    assert shuffles and all(f", {mask}>" in ln for ln in shuffles)


def test_single_thread_reduction_needs_no_shuffle():
    src = _build(_reduce_kernel(T.reduce_max, "float32", threads=1, length=16))
    assert "warp_allreduce" not in src


def test_partial_last_warp_is_still_rejected():
    with pytest.raises(Exception, match="TL0503"):
        tilelang.lower(_reduce_kernel(T.reduce_sum, "float32", threads=48, length=48), "sm_90a")


def test_kernel_without_grid_extents_is_one_block():
    seen = []

    @T.prim_func
    def kernel(a: T.Tensor((64,), "float32")):
        with T.Kernel(threads=64) as bindings:
            seen.append(bindings)
            tx = T.get_thread_binding()
            a[tx] = a[tx] + 1.0

    _build(kernel)
    art = tilelang.lower(kernel, "sm_90a")
    assert seen[0] == ()
    assert [int(g) for g in art.grid] == [1, 1, 1] and list(art.block) == [64, 1, 1]


def _copy_kernel(**kw):
    @T.prim_func
    def kernel(a: T.Tensor((64, 64), "float16"), b: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((64, 64), "float16")
            T.copy(a, s, **kw)
            T.copy(s, b)

    return kernel


def test_copy_prefer_instruction_maps_onto_disable_tma():
    def lower(**kw):
        return tilelang.lower(_copy_kernel(**kw), "sm_90a").source

    default, no_tma = lower(), lower(disable_tma=True)
    tma = lower(prefer_instruction="tma")     # honoured: the TMA unit loads the tile (lower_copy)
    assert "tl::tma_load_bulk(" in tma and "tma_load" not in default
    assert lower(annotations={"prefer_instruction": "tma", "test.copy": "sync"}) == tma
    assert lower(prefer_instruction="sync") == no_tma
    assert lower(annotations={"disable_tma": True}) == no_tma
    with pytest.raises(Exception, match="prefer_instruction must be one of"):
        lower(prefer_instruction="ldsm")


@pytest.mark.parametrize("src_scope, dst_scope, dtype, fn, clear", [
    ("shared", "shared", "float32", T.reduce_sum, True),
    ("shared", "fragment", "bfloat16", T.reduce_max, True),
    ("fragment", "shared", "float16", T.reduce_absmax, False),
    ("shared", "fragment", "float32", T.reduce_min, False),
])
def test_reductions_with_a_shared_operand_fold_rows_per_thread(src_scope, dst_scope, dtype, fn, clear):
    alloc = {"shared": T.alloc_shared, "fragment": T.alloc_fragment}

    @T.prim_func
    def kernel(a: T.Tensor((64, 32), dtype), out: T.Tensor((64,), dtype)):
        with T.Kernel(1, threads=32):
            s = alloc[src_scope]((64, 32), dtype)
            d = alloc[dst_scope]((64,), dtype)
            T.copy(a, s)
            if not clear:
                T.copy(out, d)
            fn(s, d, dim=1, clear=clear)
            T.copy(d, out)

    src = _build(kernel)
    assert "warp_allreduce" not in src  # each thread folds two whole rows
    assert "for (int r0 = 0; r0 < 2; ++r0)" in src.replace("r0 = 0; r0 < 2; r0++", "r0 = 0; r0 < 2; ++r0")
