"""Layouts derived from the access (upstream's semantics): fragments indexed inside T.Parallel by
expressions other than the loop variables, loops shorter or longer than the fragment they index,
broadcast and replicated fragments, and tile ops over a range of threads.

Each layout test checks the thread -> element mapping itself: for every T.Parallel nest, every
iteration runs on threads that hold each fragment element it touches (every value of an inner
or enclosing serial loop included), and a written fragment is written on every thread that
holds the element. Source checks cover the lowering (guards, partial fills)."""

from __future__ import annotations

import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang.diagnostics import TileLangCompileError
from tilelang.transform.kernel import FRAGMENT_SCOPE, analyze_kernel, buffer_accesses, parallel_nest, scope_of
from tilelang.transform.layout_inference import _nest_variables, _serves, infer_layouts


def _layouts(func, arch="sm_80"):
    info = analyze_kernel(func)
    return info, infer_layouts(info, arch)


def _check_every_nest(func, arch="sm_80"):
    """Every fragment access of every T.Parallel nest is served by the nest's loop layout."""
    info, out = _layouts(func, arch)
    extra = _nest_variables(info)
    checked = 0
    for nest, variables in extra.items():
        loop_vars, extents, body = parallel_nest(nest)
        loop = out.loops[loop_vars[0]]
        ext = [int(e) for e in extents]
        for buf, idx, write in buffer_accesses(body):
            if scope_of(buf) != FRAGMENT_SCOPE:
                continue
            plain_broadcast = all(any(v.same_as(i) for v in loop_vars) for i in idx) and len(idx) < len(loop_vars)
            ok = _serves(loop, out.fragments[buf], idx, loop_vars, ext, write and not plain_broadcast, variables)
            assert ok, f"{buf.name}[{idx}] is not served by the loop layout of the nest over {ext}"
            checked += 1
    assert checked
    return out


def _source(func, **kw):
    src = tilelang.compile(func, **kw).get_kernel_source()
    return src[src.index('extern "C" __global__'):]


def test_read_through_a_division_runs_on_the_holding_threads():
    @T.prim_func
    def k(A: T.Tensor((16, 14), "int32"), B: T.Tensor((16, 448), "int32")):
        with T.Kernel(1, threads=128):
            a = T.alloc_fragment((16, 14), "int32")
            T.copy(A, a)
            for i, j in T.Parallel(16, 448):
                B[i, j] += a[i, j // 32]

    out = _check_every_nest(k)
    # the copy into a waits for the loop, which places it: each thread holds what it reads
    assert "T.Parallel" in out.origin[next(b for b in out.fragments if b.name == "a")]


def test_an_outer_sum_of_two_copied_vectors_places_them_from_the_loop():
    """amaranthine09's outer vector addition: ``c[i, j] = a[i] + b[j]`` of two fragments filled by
    T.copy (a TL0201 before: each copy gave its vector a layout of its own first). The copies wait
    for the loop, which takes the layout of the tile it writes and places both vectors."""
    @T.prim_func
    def k(A: T.Tensor((512,), "float16"), B: T.Tensor((1024,), "float16"), C: T.Tensor((512, 1024), "float16")):
        with T.Kernel(8, 8, threads=128) as (bx, by):
            a = T.alloc_fragment((64,), "float16")
            b = T.alloc_fragment((128,), "float16")
            c = T.alloc_fragment((64, 128), "float16")
            T.copy(A[by * 64:(by + 1) * 64], a)
            T.copy(B[bx * 128:(bx + 1) * 128], b)
            for i, j in T.Parallel(64, 128):
                c[i, j] = a[i] + b[j]
            T.copy(c, C[by * 64:(by + 1) * 64, bx * 128:(bx + 1) * 128])

    out = _check_every_nest(k)
    for name in ("a", "b"):
        assert "T.Parallel" in out.origin[next(f for f in out.fragments if f.name == name)]
    src = _source(k, target="cuda -arch=sm_90a")
    # each thread loads the rows and the 8 columns of its part of c (b as one 16-byte vector)
    assert "c[v] = (a[(v >> 3)] + b[(v & 7)]);" in src and "*(uint4*)(b + 0) = *(uint4*)(B + " in src


def test_transposed_write_places_the_fragment_transposed():
    @T.prim_func
    def k(A: T.Tensor((64, 32), "float32"), B: T.Tensor((32, 64), "float32")):
        with T.Kernel(1, threads=128):
            a = T.alloc_fragment((64, 32), "float32")
            b = T.alloc_fragment((32, 64), "float32")
            T.copy(A, a)
            for i, j in T.Parallel(64, 32):
                b[j, i] = a[i, j]
            T.copy(b, B)

    out = _check_every_nest(k)
    bufs = {b.name: f for b, f in out.fragments.items()}
    assert bufs["b"].replication == 1 and bufs["b"].local_size == 16


def test_shorter_loop_runs_over_the_fragment_layout_with_a_guard():
    @T.prim_func
    def k(S: T.Tensor((8,), "bfloat16"), D: T.Tensor((4, 64), "bfloat16")):
        with T.Kernel(1, threads=128):
            s_sh = T.alloc_shared((8,), "bfloat16")
            s = T.alloc_fragment((8,), "float32")
            d = T.alloc_shared((4, 64), "bfloat16")
            T.copy(S, s_sh)
            T.copy(s_sh, s)
            for kk in T.serial(64):
                for i in T.Parallel(4):
                    d[i, kk] = s[i]
            T.copy(d, D)

    _check_every_nest(k)
    src = _source(k)
    assert "threadIdx.x) == 0" in src     # s is replicated: one replica writes d


def test_inner_serial_loop_index_gets_a_layout_holding_the_whole_range():
    hc, hb = 4, 256

    @T.prim_func
    def k(a: T.Tensor((hc, hc), "float32"), b: T.Tensor((hc, hb), "float32"), x: T.Tensor((hc, hb), "float32")):
        with T.Kernel(1, threads=128):
            a_l = T.alloc_fragment((hc, hc), "float32")
            b_l = T.alloc_fragment((hc, hb), "float32")
            x_l = T.alloc_fragment((hc, hb), "float32")
            T.copy(a, a_l)
            T.copy(b, b_l)
            for o, h in T.Parallel(hc, hb):
                x_l[o, h] = 0
                for c in T.serial(hc):
                    x_l[o, h] += a_l[c, o] * b_l[c, h]
            T.copy(x_l, x)

    out = _check_every_nest(k)
    bufs = {b.name: f for b, f in out.fragments.items()}
    assert bufs["a_l"].replication > 1            # a is read by every thread of its columns


def test_enclosing_serial_loop_index():
    @T.prim_func
    def k(L: T.Tensor((4, 128), "float32"), O: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            lse = T.alloc_fragment((4, 128), "float32")
            acc = T.alloc_fragment((128,), "float32")
            T.copy(L, lse)
            T.clear(acc)
            for r in T.serial(4):
                for j in T.Parallel(128):
                    acc[j] += lse[r, j]
            T.copy(acc, O)

    _check_every_nest(k)


def test_broadcast_read_of_a_reduction_result_in_another_loop_shape():
    @T.prim_func
    def k(Q: T.Tensor((64, 32), "float16"), K: T.Tensor((64, 32), "float16"), S: T.Tensor((64, 3), "float32")):
        with T.Kernel(1, threads=128):
            qs = T.alloc_shared((64, 32), "float16")
            ks = T.alloc_shared((64, 32), "float16")
            ss = T.alloc_shared((64, 3), "float32")
            acc = T.alloc_fragment((64, 64), "float32")
            m = T.alloc_fragment((64,), "float32")
            T.copy(Q, qs)
            T.copy(K, ks)
            T.gemm(qs, ks, acc, transpose_B=True, clear_accum=True)
            T.reduce_max(acc, m, dim=1)
            for h, c in T.Parallel(64, 3):
                ss[h, c] = ss[h, c] - m[h]
            T.copy(ss, S)

    _check_every_nest(k)


def test_loop_past_a_small_fragment_takes_the_loop_layout():
    @T.prim_func
    def k(S: T.Tensor((4,), "float32"), O: T.Tensor((64,), "float32")):
        with T.Kernel(4, threads=128) as bx:
            s = T.alloc_fragment([1], "float32")
            o = T.alloc_fragment([64], "float32")
            for i in T.Parallel(64):
                s[i] = S[bx]
            for i in T.Parallel(64):
                o[i] = s[i] * 2
            T.copy(o, O)

    _, out = _layouts(k)
    bufs = {b.name: f for b, f in out.fragments.items()}
    assert bufs["s"].same_as(bufs["o"])


def test_unit_dimension_fragment_copy():
    @T.prim_func
    def k(O: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32):
            t1 = T.alloc_fragment([1, 32], "float16")
            t2 = T.alloc_fragment([32], "float32")
            t4 = T.alloc_fragment([32], "float32")
            T.fill(t1, 1)
            T.reduce_max(t1, t4, dim=0)
            T.copy(t1[0, :], t2)
            for i in T.Parallel(32):
                O[i] = t2[i] - t4[i]

    _check_every_nest(k)


def test_serial_walk_over_a_distributed_fragment_is_refused():
    @T.prim_func
    def k(Q: T.Tensor((64, 64), "float16"), K: T.Tensor((64, 64), "float16"), O: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128):
            qs = T.alloc_shared((64, 64), "float16")
            ks = T.alloc_shared((64, 64), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            s = T.alloc_fragment((64,), "float32")
            T.copy(Q, qs)
            T.copy(K, ks)
            T.gemm(qs, ks, acc, transpose_B=True, clear_accum=True)
            T.fill(s, 0.0)
            for i in T.Parallel(64):
                for j in T.serial(64):
                    s[i] += acc[i, j]
            T.copy(s, O)

    with pytest.raises(TileLangCompileError, match="thread-distributed fragment") as info:
        tilelang.compile(k)
    assert "T.reduce_sum" in str(info.value)


def test_partial_fill_of_a_fragment():
    @T.prim_func
    def k(C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            c = T.alloc_fragment((64, 64), "float32")
            T.fill(c, 1)
            T.clear(c[:64, :16])
            T.copy(c, C)

    src = _source(k)
    assert "(((int)threadIdx.x) & 15) < 4" in src     # columns 0..15 live on threads t % 16 < 4


def test_parallel_over_a_dynamic_extent_is_guarded():
    @T.prim_func
    def k(A: T.Tensor((512,), "float32"), B: T.Tensor((512,), "float32"), n: T.int32):
        with T.Kernel(1, threads=256):
            for i in T.Parallel(T.min(n, 512)):
                B[i] = A[i] - 1.0

    src = _source(k)
    assert "< n)" in src


def test_parallel_over_an_unbounded_run_time_extent_takes_chunks_of_the_block():
    """tilelang-debugger's ``T.Parallel(n)`` over a symbolic ``n`` with no bound, memory only (TL0603
    before): the block's 32 threads take 32 iterations at a time, each guarded by ``n``; a loop over
    a fragment still needs a constant extent."""
    n = T.symbolic("n")

    @T.prim_func
    def k(x: T.Tensor((n,), "int32"), y: T.Tensor((n,), "int32")):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(n):
                y[i] = x[i] + 3

    src = _source(k, target="cuda -arch=sm_90a")
    assert "for (int i_chunk = 0; i_chunk < ((n + 31) >> 5); ++i_chunk) {" in src
    assert "if (((i_chunk * 32) + ((int)threadIdx.x)) < n) {" in src

    @T.prim_func
    def frag(x: T.Tensor((n,), "int32")):
        with T.Kernel(1, threads=32):
            f = T.alloc_fragment((32,), "int32")
            for i in T.Parallel(n):
                f[i] = x[i]

    with pytest.raises(TileLangCompileError, match="TL0603|T.Parallel"):
        tilelang.compile(frag, target="cuda -arch=sm_90a")


def test_fragment_work_under_one_thread_keeps_the_fragment_whole_in_it():
    """HiLS sparse attention's ``if tx == 0:`` counting valid lengths in a small fragment with a
    T.Parallel (TL0002 before: tile ops spread over the whole block): the branch is a region of one
    thread, every fragment element lies in it. A gemm needs warps: there it stays refused."""
    @T.prim_func
    def k(A: T.Tensor((4, 16), "int32"), B: T.Tensor((4,), "int32")):
        with T.Kernel(1, threads=128):
            out = T.alloc_shared((4,), "int32")
            if T.get_thread_binding() == 0:
                lens = T.alloc_fragment((4,), "int32")
                for q in T.Parallel(4):
                    lens[q] = 0
                    for j in T.serial(16):
                        if A[q, j] >= 0:
                            lens[q] = lens[q] + 1
                for q in T.serial(4):
                    out[q] = lens[q]
            T.sync_threads()
            if T.get_thread_binding() < 4:
                B[T.get_thread_binding()] = out[T.get_thread_binding()]

    src = _source(k, target="cuda -arch=sm_90a")
    assert "int lens[4];" in src and "for (int v = 0; v < 4; ++v) {" in src
    assert "if (0 <= A[((v * 16) + j)]) {" in src       # each of the 4 rows in the one thread

    @T.prim_func
    def g(A: T.Tensor((64, 64), "float16"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            if T.get_thread_binding() == 0:
                a = T.alloc_shared((64, 64), "float16")
                c = T.alloc_fragment((64, 64), "float32")
                T.copy(A, a)
                T.gemm(a, a, c, clear_accum=True)
                T.copy(c, C)

    with pytest.raises(TileLangCompileError, match="TL0002.*T.gemm inside an `if` on the thread index"):
        _source(g, target="cuda -arch=sm_90a")


def test_tile_ops_under_a_thread_range_use_those_threads():
    @T.prim_func
    def k(A: T.Tensor((128, 128), "float16"), B: T.Tensor((128, 128), "float16")):
        with T.Kernel(1, threads=256):
            s = T.alloc_shared((128, 128), "float16")
            tx = T.get_thread_binding(0)
            if tx >= 128 and tx < 256:
                T.copy(A, s)
            T.copy(s, B)

    src = _source(k, pass_configs={"tl.disable_warp_specialized": True})
    assert "(128 <= ((int)threadIdx.x))" in src
    assert "- 1024)" in src                 # the selected threads count from 128


def test_while_loop_lowers():
    @T.prim_func
    def k(A: T.Tensor((1,), "int32")):
        with T.Kernel(1, threads=32):
            i = T.alloc_var(T.int32, 0)
            s = T.alloc_var(T.int32, 0)
            while i < 10:
                s += i
                i += 1
            A[0] = s

    assert "while (" in _source(k)


def test_layouts_follow_the_access_for_every_nest_checked_numerically():
    # the generic check itself: a default loop layout that does not serve an access is caught
    from tilelang.layout import default_fragment
    from tvm import tirx

    i, j = tirx.Var("i", "int32"), tirx.Var("j", "int32")
    frag = default_fragment([16, 14], 128, 2)
    loop = default_fragment([16, 448], 128, 4)
    assert not _serves(loop, frag, [i, tirx.floordiv(j, 32)], [i, j], [16, 448], False)
    assert np.all(loop.owners() >= 0)
