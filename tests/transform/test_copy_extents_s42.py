"""T.copy extents that are constant only given the values in scope, or that differ between the
two sides (TileOPs' gated delta net prefill, session 42):

* ``right = base + 64 * (i + 1); left = right - 64; T.copy(X[left:right], s)`` with ``base`` a
  ``T.alloc_var``: ``right`` and ``left`` are scalars the kernel stores, and the extent
  ``right - left`` is 64 from what was stored (``Lowerer.static``), as long as nothing stored to
  them since (a later store, or a loop storing to them, ends it);
* ``T.copy(cu_seqlens[:n - 1], frag)`` of a fixed-size fragment: the tile is the on-chip side's,
  positions past the run-time extent read as past a tensor's end (0), stores past it are skipped;
* ``T.Pipelined`` over an int64 trip count (``seq_end - seq_start`` of int64 offsets);
* compile flags naming upstream's headers (``-include tl_templates/cuda/gemm.h``).
Each kernel's CUDA is compiled with nvcc.
"""

import tilelang
import tilelang.language as T
from tilelang.jit import nvcc


def _body(func, arch="sm_90a", flags=()):
    art = tilelang.lower(func, arch)
    assert nvcc.compile_cubin(art.source, art.arch, list(art.compile_flags) + list(flags))[:4] == b"\x7fELF"
    return art.source[art.source.index('extern "C" __global__'):]


def windows(extra_store=False, stores_in_loop=False):
    @T.prim_func
    def kernel(X: T.Tensor((4096,), "float32"), Y: T.Tensor((4096,), "float32"), start: T.int32):
        with T.Kernel(1, threads=64) as bx:
            s = T.alloc_shared((128,), "float32")
            base = T.alloc_var("int32")
            base = start
            right = T.alloc_var("int32")
            left = T.alloc_var("int32")
            right = base + 64
            left = right - 64
            for i in T.serial(4):
                if stores_in_loop:
                    # the copy of the second iteration sees the stores below, not those before the loop
                    T.copy(X[left:right], s[0:64])
                    right = base + (i + 1) * 96
                    left = right - 64
                else:
                    right = base + (i + 1) * 64
                    left = right - 64
                    if extra_store:
                        right = right + 32
                    T.copy(X[left:right], s[0:64])
                T.copy(s[0:64], Y[left:left + 64])
    return kernel


def test_extent_from_the_scalars_stored_before_the_copy_is_constant():
    body = _body(windows())
    assert "(right[0] - left[0])" not in body      # no run-time extent guard: a 64-element tile
    assert "X[(((int)threadIdx.x) + left[0])]" in body


def test_a_later_store_or_a_loop_storing_ends_what_is_known():
    for kernel in (windows(extra_store=True), windows(stores_in_loop=True)):
        body = _body(kernel)
        # the extent is read at run time: positions past it are zero-filled
        assert "((int)threadIdx.x) < (right[0] - left[0])" in body


def slice_into_fragment():
    """``T.copy(A[:n - 1], f)`` of an 8-element fragment, each element doubled, stored to ``B[1:]``."""
    n = T.dynamic("n")

    @T.prim_func
    def kernel(A: T.Tensor([n], "int32"), B: T.Tensor([n], "int32")):
        with T.Kernel(1, threads=32) as bx:
            f = T.alloc_fragment((8,), "int32")
            T.copy(A[:n - 1], f)
            for i in T.Parallel(8):
                f[i] = f[i] * 2
            T.copy(f, B[1:])
    return kernel


def shorter_source():
    """``lens[bx]`` elements of X into a 64-element shared tile, the tile to ``Y[bx, :]``."""
    @T.prim_func
    def kernel(X: T.Tensor((512,), "float32"), lens: T.Tensor((8,), "int32"), Y: T.Tensor((8, 64), "float32")):
        with T.Kernel(8, threads=64) as bx:
            s = T.alloc_shared((64,), "float32")
            n = lens[bx]
            T.copy(X[bx * 64:bx * 64 + n], s)
            T.copy(s, Y[bx, :])
    return kernel


def int64_pipeline(batches=8, rows=4096):
    """Column sums of the rows ``offsets[b] .. offsets[b + 1]`` (int64) of X, 32 rows per step."""
    @T.prim_func
    def kernel(offsets: T.Tensor((batches + 1,), "int64"), X: T.Tensor((rows, 64), "float16"),
               Y: T.Tensor((batches, 64), "float32")):
        with T.Kernel(batches, threads=128) as bx:
            s = T.alloc_shared((32, 64), "float16")
            acc = T.alloc_fragment((64,), "float32")
            first = offsets[bx]
            T.clear(acc)
            for k in T.Pipelined((offsets[bx + 1] - first) // 32, num_stages=2):
                T.copy(X[first + k * 32:first + k * 32 + 32, :], s)
                T.reduce_sum(s, acc, dim=0, clear=False)
            T.copy(acc, Y[bx, :])
    return kernel


def test_slice_of_a_symbolic_length_into_a_fixed_fragment():
    body = _body(slice_into_fragment())
    load, store = body.split("#pragma unroll")[1], body.split("#pragma unroll")[3]
    # the source's n - 1 elements (past them 0), stored to B[1:] within its n - 1
    assert ") + 1) < n)" in load and "= 0;" in load
    assert ") + 1) < n)" in store and "B[" in store


def test_shared_tile_from_a_shorter_run_time_source_is_zero_filled_past_it():
    body = _body(shorter_source())
    head = body[:body.index("__syncthreads")]
    assert "if (((int)threadIdx.x) < n) {" in head and "0x0p+0f" in head


def test_pipelined_loop_over_an_int64_trip_count():
    body = _body(int64_pipeline())
    assert "cp_async" in body      # still pipelined


def test_compile_flags_may_include_upstreams_headers():
    @T.prim_func
    def kernel(A: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            A[bx * 128 + T.get_thread_binding()] = T.float32(1)

    _body(kernel, flags=["-include", "tl_templates/cuda/gemm.h", "-include", "tl_templates/cuda/common.h"])


def _read_bounds(through_scalar):
    @T.prim_func
    def kernel(X: T.Tensor((4096,), "float32"), cu: T.Tensor((9,), "int32"), Y: T.Tensor((8, 64), "float32")):
        with T.Kernel(8, threads=64) as bx:
            s = T.alloc_shared((64,), "float32")
            if through_scalar:
                first = cu[bx]              # TileOPs' prefill: an offset read once into a register
                left = first + 0
                right = left + 64
            else:
                left = cu[bx]               # two reads of memory another thread may write in between
                right = cu[bx] + 64
            T.copy(X[left:right], s)
            T.copy(s, Y[bx, :])
    return kernel


def test_values_read_from_memory_are_not_assumed_equal():
    assert "(right[0] - left[0])" not in _body(_read_bounds(True))
    assert "((int)threadIdx.x) < (right[0] - left))" in _body(_read_bounds(False))


def _mismatched(kind):
    """``T.copy`` of regions whose constant extents differ (upstream's test_tilelang_language_copy):
    global to global ``A[:, :2] -> B[:, :3]``, global to a wider shared tile ``A[:, :2] -> S[:, :3]``,
    and global to a narrower one ``A[:, :4] -> S[:, :3]``."""
    @T.prim_func
    def kernel(A: T.Tensor((128, 128), "float16"), B: T.Tensor((128, 128), "float16")):
        with T.Kernel(1, threads=128):
            if kind == "global":
                T.copy(A[:, :2], B[:, :3])
            else:
                S = T.alloc_shared((128, 4), "float16")
                if kind == "wider":
                    T.copy(A[:, :2], S[:, :3])
                else:
                    T.copy(A[:, :4], S[:, :3])
                T.copy(S, B[:, 0:4])
    return kernel


def test_mismatched_constant_extents_copy_the_more_local_sides_as_upstream():
    import re
    import warnings

    import pytest
    from tilelang.diagnostics import TileLangCompileError

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        body = _body(_mismatched("global"))
    # a tie (both global): the source's 128 x 2, as 4-byte vectors (one row a thread)
    assert "tl::copy_vec<4>((&(B[(((int)threadIdx.x) * 128)])), (&(A[(((int)threadIdx.x) * 128)])));" in body
    msgs = [str(w.message) for w in caught]
    assert any("warning[TL0601]" in m and "128x2 elements are copied (the extents of the source)" in m
               for m in msgs), msgs
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        body = _body(_mismatched("wider"))
    # shared is the more local side: its 128 x 3, three elements a row read from A
    assert "for (int it = 0; it < 3; ++it)" in body and re.search(r"% 3\)\)\] = A\[", body)
    assert any("the destination, the more local side" in str(w.message) for w in caught)
    # the alignment warning describes the tile copied (3 columns), not the source region's 2
    assert any("TL0301" in str(w.message) and "6 bytes (3 x float16)" in str(w.message) for w in caught)
    with pytest.raises(TileLangCompileError, match=r"error\[TL0601\].*128x4.*128x3"):
        tilelang.lower(_mismatched("narrower"), "sm_90a")
