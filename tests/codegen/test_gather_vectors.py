"""16-byte vectors for gathered rows (a T.Parallel over memory that reads ``KV[Indices[i], d]``):
the loop's vector width counts only the accesses along its innermost variable (the int32 row
index does not narrow bf16 rows to 4 lanes), the row index is part of the access's address, and
the bounds guard the lowering adds around the gathered load (``c ? KV[...] : 0``) is one test per
vector where its condition is the same in every lane (layout_inference._widest_vector_element,
vectorize_parallel._data_loads / _uniform). The same for a store under a guard that is the same
in a vector's lanes (a varlen epilogue's row bound). GPU: tests/gpu/test_gather_vectors_gpu.py."""

import re
import shutil

import pytest

import tilelang
import tilelang.language as T

NVCC = shutil.which("nvcc")


def gather(rows=32, dim=512, threads=256, dtype=T.bfloat16, safe=True, lane_index=False):
    """Gather ``rows`` rows of KV through Idx into shared memory, then a gemm reads them."""

    @T.prim_func
    def k(KV: T.Tensor((8192, 576), dtype), Idx: T.Tensor((64,), T.int32), Q: T.Tensor((64, dim), dtype),
          O: T.Tensor((64, rows), T.float32)):
        with T.Kernel(1, threads=threads) as bx:
            KV_s = T.alloc_shared((rows, dim), dtype)
            Q_s = T.alloc_shared((64, dim), dtype)
            acc = T.alloc_fragment((64, rows), T.float32)
            T.copy(Q, Q_s)
            for i_i in T.serial(2):
                for bi, d in T.Parallel(rows, dim):
                    if lane_index:      # a row index that changes along d: lanes of different rows
                        KV_s[bi, d] = KV[Idx[(i_i * rows + bi + d) % 64], d]
                    else:
                        KV_s[bi, d] = KV[Idx[i_i * rows + bi], d]
                T.gemm(Q_s, KV_s, acc, transpose_B=True, clear_accum=True)
            T.copy(acc, O)

    return k


def _loop(src):
    i = src.index("for (int i_i")
    return src[i:src.index("wgmma_gemm_ss", i)]


@pytest.mark.parametrize("safe", [True, False], ids=["guarded", "unguarded"])
def test_gathered_rows_move_in_16_byte_vectors(safe):
    art = tilelang.lower(gather(), "sm_90a", pass_configs={"tl.disable_safe_memory_access": not safe})
    body = _loop(art.source)
    # 32 x 512 bf16 over 256 threads: 8 vectors of 8 elements each
    assert "for (int bi = 0; bi < 8; ++bi)" in body
    assert re.search(r"\*\(uint4\*\)\(KV \+ \(\(Idx\[", body)
    assert "*(uint4*)(((nv_bfloat16*)smem)" in body
    if safe:    # one bounds test per vector, a zero vector outside
        assert "uint4 condval;" in body and body.count("< 8192") == 1 and "make_uint4(" in body


def test_lane_dependent_row_index_stays_scalar():
    body = _loop(tilelang.lower(gather(lane_index=True), "sm_90a").source)
    assert "uint4" not in body.split("tl::fence_proxy_async")[0]


def test_the_loop_layout_counts_only_accesses_along_the_inner_variable():
    from tilelang.transform.layout_inference import _widest_vector_element
    from tilelang.transform.kernel import analyze_kernel, parallel_nest
    from tilelang.tir_utils import walk_stmts
    from tilelang.transform.kernel import is_parallel_nest

    info = analyze_kernel(gather())
    nests = []
    walk_stmts(info.body, lambda s: nests.append(s) if is_parallel_nest(s) else None)
    loop_vars, _, body = parallel_nest(nests[0])
    assert _widest_vector_element(body, loop_vars[-1]) == 2      # the bf16 rows
    assert _widest_vector_element(body) == 4                     # every access: the int32 index too


@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")
def test_gather_kernel_passes_ptxas():
    from tilelang.jit.nvcc import ptxas_info

    art = tilelang.lower(gather(), "sm_90a")
    for info in ptxas_info(art.source, "sm_90a").values():
        assert info.spill_stores == 0, info


def row_guarded_store(rows=128, dim=128, threads=256, lane_guard=False):
    """A varlen-style epilogue: tile rows past the sequence's end are not written
    (``if bx * rows + i < seqlen: O[start + bx * rows + i, d] = O_s[i, d]``)."""

    @T.prim_func
    def k(X: T.Tensor((4096, dim), T.float16), Lens: T.Tensor((1,), T.int32), O: T.Tensor((4096, dim), T.float16)):
        with T.Kernel(4096 // rows, threads=threads) as bx:
            O_s = T.alloc_shared((rows, dim), T.float16)
            T.copy(X[bx * rows:(bx + 1) * rows, :], O_s)
            seqlen = Lens[0]
            for i, d in T.Parallel(rows, dim):
                if lane_guard:      # a bound that changes along d: each lane tests its own element
                    if bx * rows + i + d < seqlen:
                        O[bx * rows + i, d] = O_s[i, d]
                elif bx * rows + i < seqlen:
                    O[bx * rows + i, d] = O_s[i, d]

    return k


def _epilogue(src):
    return src[src.rindex("for (int"):]


def test_a_row_guard_is_tested_once_per_vector():
    body = _epilogue(tilelang.lower(row_guarded_store(), "sm_90a").source)
    # 128 x 128 fp16 over 256 threads: 8 rows a thread, one 16-byte vector and one row test each
    assert "for (int i = 0; i < 8; ++i)" in body
    assert "*(uint4*)(O + " in body and "*(uint4*)(((half*)smem)" in body
    assert body.count("< Lens[0]") + body.count("< seqlen") == 1


def test_a_guard_that_differs_between_lanes_stays_scalar():
    body = _epilogue(tilelang.lower(row_guarded_store(lane_guard=True), "sm_90a").source)
    assert "uint4" not in body


def test_row_guarded_vectors_in_the_lowered_loop():
    """The guard that depends on the loop variable sits inside the per-vector loop, evaluated at the
    vector's first lane; a guard that does not is hoisted around the loop."""
    from tvm import arith, tirx

    from tilelang.tir_utils import uses_vars
    from tilelang.transform.vectorize_parallel import vectorize_register_loop

    v, c = tirx.Var("v", "int32"), tirx.Var("c", "int32")
    buf = tirx.decl_buffer((64 * 8,), "float16", "A", scope="shared")
    out = tirx.decl_buffer((4096,), "float16", "B")
    store = tirx.BufferStore(out, tirx.BufferLoad(buf, [v]), [v])
    body = tirx.IfThenElse(c > 0, tirx.IfThenElse(tirx.FloorDiv(v, 8) < c, store, None), None)
    loop = vectorize_register_loop(body, v, 64, arith.Analyzer(), "i")
    assert isinstance(loop, tirx.IfThenElse) and loop.condition.same_as(body.condition)
    outer = loop.then_case
    assert isinstance(outer, tirx.For) and int(outer.extent) == 8
    inner_if = outer.body
    assert isinstance(inner_if, tirx.IfThenElse) and isinstance(inner_if.then_case, tirx.For)
    assert inner_if.then_case.kind == tirx.ForKind.VECTORIZED and int(inner_if.then_case.extent) == 8
    assert not uses_vars(inner_if.condition, [v]) and uses_vars(inner_if.condition, [outer.loop_var])


def test_guards_inside_a_row_guard_keep_their_place():
    """A guard nested inside one that depends on the loop variable is not hoisted above it (the
    outer one may be what makes it safe to evaluate): both stay around the vector, in order."""
    from tvm import arith, tirx

    from tilelang.transform.vectorize_parallel import vectorize_register_loop

    v, c, d = tirx.Var("v", "int32"), tirx.Var("c", "int32"), tirx.Var("d", "int32")
    buf = tirx.decl_buffer((64 * 8,), "float16", "A", scope="shared")
    out = tirx.decl_buffer((4096,), "float16", "B")
    store = tirx.BufferStore(out, tirx.BufferLoad(buf, [v]), [v])
    inner_guard = tirx.IfThenElse(d > 0, store, None)
    body = tirx.IfThenElse(tirx.FloorDiv(v, 8) < c, inner_guard, None)
    loop = vectorize_register_loop(body, v, 64, arith.Analyzer(), "i")
    assert isinstance(loop, tirx.For)
    first = loop.body
    assert isinstance(first, tirx.IfThenElse) and "c" in str(first.condition)
    second = first.then_case
    assert isinstance(second, tirx.IfThenElse) and second.condition.same_as(inner_guard.condition)
    assert isinstance(second.then_case, tirx.For) and second.then_case.kind == tirx.ForKind.VECTORIZED


def scatter_add(rows=16, dim=512, threads=256):
    """dKV[Idx[bi], d*4 .. d*4+3] += S[bi, d*4 ..] (sparse MLA backward's ``T.atomic_addx4`` loop)."""

    @T.prim_func
    def k(S_in: T.Tensor((rows, dim), T.float32), Idx: T.Tensor((rows,), T.int32), dKV: T.Tensor((8192, dim), T.float32)):
        with T.Kernel(1, threads=threads) as bx:
            S = T.alloc_shared((rows, dim), T.float32)
            T.copy(S_in, S)
            for bi, d in T.Parallel(rows, dim // 4):
                T.atomic_addx4(dKV[Idx[bi], d * 4], S[bi, d * 4])

    return k


def test_four_wide_atomics_go_to_consecutive_threads():
    # each iteration already moves 16 bytes: consecutive d on consecutive threads (a warp's
    # atomics cover 512 contiguous bytes of a row), not four consecutive d per thread
    src = tilelang.lower(scatter_add(), "sm_90a").source
    body = src[src.index("atomic_addx4("):]
    assert "(((int)threadIdx.x) & 127) * 4)" in body.split(";")[0]
    assert "threadIdx.x) & 31) * 16)" not in src


def test_the_loop_layout_counts_an_atomic_x4_as_four_elements():
    from tilelang.tir_utils import walk_stmts
    from tilelang.transform.kernel import analyze_kernel, is_parallel_nest, parallel_nest
    from tilelang.transform.layout_inference import _widest_vector_element

    info = analyze_kernel(scatter_add())
    nests = []
    walk_stmts(info.body, lambda s: nests.append(s) if is_parallel_nest(s) else None)
    loop_vars, _, body = parallel_nest(nests[-1])
    assert _widest_vector_element(body, loop_vars[-1]) == 16
