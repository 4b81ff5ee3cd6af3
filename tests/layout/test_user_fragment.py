"""User fragment layouts: ``T.Fragment`` through ``T.annotate_layout``.

Construction (upstream's signature), validation (located TL0201/TL0203 naming the buffer), layout
inference adopting the annotation, and kernels whose generated code follows the annotated
thread/register mapping (checked by evaluating the lowered IR's index expressions on the CPU, and
by compiling the CUDA with nvcc for sm_90a and sm_80)."""

import numpy as np
import pytest
from tvm import tirx

import tilelang
import tilelang.language as T
import tilelang.layout
from tilelang.diagnostics import TileLangCompileError
from tilelang.layout import UserLayoutError, build_user_fragment
from tilelang.layout.fragment import evaluate_index_expr
from tilelang.transform.kernel import analyze_kernel
from tilelang.transform.layout_inference import infer_layouts

try:
    from tilelang.jit import nvcc

    nvcc.find_nvcc()
    HAVE_NVCC = True
except Exception:  # noqa: BLE001
    HAVE_NVCC = False

needs_nvcc = pytest.mark.skipif(not HAVE_NVCC, reason="nvcc not found")


# 64 x 64 over 128 threads: a warp per row group of 4, two 32-column halves per thread.
def row_thread(i, j):
    return j % 32 + 32 * (i % 4)


def row_index(i, j):
    return i // 4 * 2 + j // 32


def row_layout(i, j):
    return row_thread(i, j), row_index(i, j)


def resolve(frag, threads=128):
    return build_user_fragment(frag.encode(), threads, "x")


def owners_from(thread_fn, index_fn, shape, threads, replicate=1):
    """``owners[tid, reg]`` (flat element) straight from the lambdas, for comparison."""
    table = {}
    for flat in range(int(np.prod(shape))):
        idx = np.unravel_index(flat, shape)
        for rep in range(replicate):
            args = [int(c) for c in idx] + ([rep] if replicate > 1 else [])
            table[(thread_fn(*args), index_fn(*[int(c) for c in idx]))] = flat
    return table


# ----- construction ------------------------------------------------------------------------------
def test_forward_fn_and_split_functions_agree_with_the_lambdas():
    a = resolve(T.Fragment((64, 64), forward_fn=row_layout))
    b = resolve(T.Fragment((64, 64), forward_thread_fn=row_thread, forward_index_fn=row_index))
    assert a.same_as(b)
    assert (a.num_threads, a.local_size, a.replication, a.shape) == (128, 32, 1, (64, 64))
    expect = owners_from(row_thread, row_index, (64, 64), 128)
    owners = a.owners()
    assert all(owners[t, r] == flat for (t, r), flat in expect.items())
    # index(tid, reg) and local_of(i, j) are the closed-form inverse and forward maps.
    from tilelang.tir_utils import eval_int

    tid, reg = tirx.Var("tid", "int32"), tirx.Var("reg", "int32")
    index = a.index(tid, reg)
    for t, r in [(0, 0), (5, 1), (37, 30), (127, 31)]:
        i, j = (eval_int(e, {"tid": t, "reg": r}) for e in index)
        assert (row_thread(i, j), row_index(i, j)) == (t, r)
        assert eval_int(a.local_of([tirx.IntImm("int32", i), tirx.IntImm("int32", j)])) == r


def test_upstream_names_and_types():
    assert T.Fragment is tilelang.layout.Fragment
    f = T.Fragment((64, 64), forward_fn=row_layout)
    assert isinstance(f, tilelang.layout.Layout)
    g = tilelang.layout.Fragment((64, 64), row_layout)  # positional, as upstream allows
    assert resolve(g).same_as(resolve(f))
    assert "j % 32 + 32 * (i % 4)" in f.describe()
    # The compiler's own axis form is still reachable under the same name.
    axis = tilelang.layout.Fragment((8,), 8, (tilelang.layout.Axis("t", "thread", 8, 1, 0, 1),), "x")
    assert axis.num_threads == 8 and axis.local_size == 1


def test_register_index_inferred_row_major_when_omitted():
    f = resolve(T.Fragment((64, 64), forward_thread_fn=row_thread))
    assert f.same_as(resolve(T.Fragment((64, 64), forward_fn=row_layout)))


def test_multi_dimensional_register_index_is_flattened_row_major():
    f = resolve(T.Fragment((64, 64), forward_thread_fn=row_thread, forward_index_fn=lambda i, j: [i // 4, j // 32]))
    assert f.same_as(resolve(T.Fragment((64, 64), forward_fn=row_layout)))
    g = resolve(T.Fragment((64, 64), forward_fn=lambda i, j: (row_thread(i, j), i // 4, j // 32)))
    assert g.same_as(f)


def test_replicate_with_explicit_rep_argument():
    # rep as the lowest thread digit: threads 2k and 2k+1 hold the same elements.
    f = resolve(T.Fragment((32, 64), forward_thread_fn=lambda i, j, rep: rep + 2 * (j % 32) + 64 * (i % 2),
                           replicate=2))
    assert (f.replication, f.local_size) == (2, 32)
    owners = f.owners()
    assert np.array_equal(owners[0], owners[1]) and not np.array_equal(owners[0], owners[2])
    assert f.holds(1, 0) and f.holds(3, 1)


def test_replicate_without_rep_argument_puts_replicas_outermost():
    f = resolve(T.Fragment((32, 64), forward_fn=lambda i, j: (j % 32 + 32 * (i % 2), i // 2 * 2 + j // 32),
                           replicate=2))
    owners = f.owners()
    assert f.replication == 2 and np.array_equal(owners[:64], owners[64:])


def test_fewer_threads_than_the_block_replicate_over_the_rest():
    f = resolve(T.Fragment((64, 64), forward_thread_fn=lambda i, j: j % 32), threads=128)
    assert (f.num_threads, f.local_size, f.replication) == (128, 128, 4)


def test_mma_accumulator_written_as_lambdas_matches_gemm():
    """A user layout equal to the one T.gemm needs is accepted (same_as, not object identity)."""
    WM = WN = 32
    NI = WN // 8

    def acc(i, j):
        thread = (j % 8) // 2 + 4 * (i % 8) + 32 * (i // WM) + 64 * (j // WN)
        reg = j % 2 + 2 * ((i % 16) // 8) + 4 * ((j % WN) // 8) + 4 * NI * ((i % WM) // 16)
        return thread, reg

    @T.prim_func
    def kernel(A: T.Tensor((64, 64), "float16"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((64, 64), "float16")
            C_l = T.alloc_fragment((64, 64), "float32")
            T.annotate_layout({C_l: T.Fragment((64, 64), forward_fn=acc)})
            T.copy(A, A_s)
            T.clear(C_l)
            T.gemm(A_s, A_s, C_l)
            T.copy(C_l, C)

    layouts = infer_layouts(analyze_kernel(kernel))
    (plan,) = layouts.gemms.values()
    assert (plan.warp_m, plan.warp_n) == (2, 2)
    (origin,) = [o for b, o in layouts.origin.items() if b.name == "C_l"]
    assert origin.startswith("T.annotate_layout")


@pytest.mark.parametrize("make, match", [
    (lambda: T.Fragment((64, 64)), "forward_fn"),
    (lambda: T.Fragment((64, 64), forward_fn=row_layout, forward_thread_fn=row_thread), "not both"),
    (lambda: T.Fragment((64, 64), forward_thread_fn=lambda i: i), "2 index argument"),
    (lambda: T.Fragment((64, 64), forward_fn=row_thread), r"\(thread, register index\)"),
    (lambda: T.Fragment((64, 64), forward_fn=row_layout, replicate=0), "replicate"),
    (lambda: T.Fragment((T.dynamic("M"), 64), forward_fn=row_layout), "constant"),
    (lambda: T.Fragment((64, 64), forward_thread_fn=lambda i, j: tirx.Cast("float32", i)), "integer expression"),
])
def test_construction_errors(make, match):
    with pytest.raises((TypeError, ValueError), match=match):
        make()


# ----- validation ----------------------------------------------------------------------------------
@pytest.mark.parametrize("frag, code, match", [
    (T.Fragment((64, 64), forward_thread_fn=lambda i, j: j % 32 + 200, forward_index_fn=lambda i, j: i),
     "TL0201", "to thread 231, but the kernel runs 128 threads"),
    (T.Fragment((64, 64), forward_thread_fn=lambda i, j: j % 32 - 1, forward_index_fn=lambda i, j: i),
     "TL0201", "to thread -1"),
    (T.Fragment((64, 64), forward_thread_fn=lambda i, j: j % 32 + 32 * (i % 3), forward_index_fn=lambda i, j: i),
     "TL0201", "does not divide the kernel's 128 threads"),
    (T.Fragment((64, 64), forward_thread_fn=lambda i, j: j % 32, forward_index_fn=lambda i, j: i),
     "TL0203", "in the same register 0 of thread 0"),
    (T.Fragment((64, 64), forward_thread_fn=lambda i, j, rep: j % 32 + 32 * (i % 2),
                forward_index_fn=lambda i, j: i // 2 * 2 + j // 32, replicate=2),
     "TL0203", "exactly replicate=2 distinct threads"),
    (T.Fragment((64, 64), forward_thread_fn=lambda i, j: j % 32, forward_index_fn=lambda i, j: i + 65 * (j // 32)),
     "TL0203", "leaves register 64 unused"),
    (T.Fragment((64, 64), forward_thread_fn=lambda i, j: j % 32 + 32 * (i % 4), forward_index_fn=lambda i, j: i - 1),
     "TL0203", "register index -1"),
    (T.Fragment((4, 32), forward_thread_fn=lambda i, j: T.if_then_else(i == 0, j, j % 2 + 30),
                forward_index_fn=lambda i, j: T.if_then_else(i == 0, 0, 1 + (i - 1) * 16 + j // 2)),
     "TL0203", "thread 0 holds 1 element"),
    (T.Fragment((64, 64), forward_fn=lambda i, j, rep: (j % 32 + 32 * (i % 2) + 64 * rep,
                                                          i // 2 * 2 + j // 32 + rep), replicate=2),
     "TL0203", "different register indices"),
    (T.Fragment((64, 64), forward_thread_fn=lambda i, j: (j + i) % 32 + 32 * (i % 4),
                forward_index_fn=lambda i, j: i // 4 * 2 + j // 32),
     "TL0203", "not a digit"),
    (T.Fragment((64, 64), forward_thread_fn=lambda i, j: tirx.call_extern("int32", "f", i),
                forward_index_fn=lambda i, j: j),
     "TL0201", "cannot be computed at compile time"),
])
def test_validation_errors(frag, code, match):
    with pytest.raises(UserLayoutError, match=match) as info:
        resolve(frag)
    assert info.value.code == code


def test_xor_thread_map_that_is_a_digit_map_is_accepted():
    """XOR of disjoint bit fields is addition: still a digit map, whatever the spelling."""
    f = resolve(T.Fragment((64, 64), forward_thread_fn=lambda i, j: (j % 32) ^ (32 * (i % 4)),
                           forward_index_fn=row_index))
    assert f.same_as(resolve(T.Fragment((64, 64), forward_fn=row_layout)))


# ----- kernels -------------------------------------------------------------------------------------
def elementwise_reduce(M=64, N=64, threads=128, layout=None):
    layout = layout or T.Fragment((M, N), forward_fn=row_layout)

    @T.prim_func
    def kernel(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32"), S: T.Tensor((M,), "float32")):
        with T.Kernel(1, threads=threads):
            x = T.alloc_fragment((M, N), "float32")
            s = T.alloc_fragment((M,), "float32")
            T.annotate_layout({x: layout})
            T.copy(A, x)
            for i, j in T.Parallel(M, N):
                x[i, j] = x[i, j] * 2.0 + 1.0
            T.reduce_sum(x, s, dim=1)
            T.copy(x, B)
            T.copy(s, S)

    return kernel


def replicated_layout(i, j, rep):
    return j % 32 + 32 * (i % 2) + 64 * rep, i // 2 * 2 + j // 32


REPLICATED = dict(layout=T.Fragment((64, 64), forward_fn=replicated_layout, replicate=2))


def _lowered(func, arch="sm_90a"):
    from tilelang.engine.lower import LowerState
    from tilelang.engine.pipeline import PASSES

    st = LowerState(func, arch, "main")
    for name, run in PASSES:
        if name == "emit_cuda":
            break
        run(st)
    return st


def _stores(stmt, loops=(), conds=()):
    """Every BufferStore under ``stmt`` with its enclosing loops and if-conditions."""
    kind = type(stmt).__name__
    if kind == "SeqStmt":
        for s in stmt.seq:
            yield from _stores(s, loops, conds)
    elif kind == "For":
        yield from _stores(stmt.body, loops + ((stmt.loop_var, int(stmt.extent.value)),), conds)
    elif kind == "IfThenElse":
        yield from _stores(stmt.then_case, loops, conds + (stmt.condition,))
        if stmt.else_case is not None:
            yield from _stores(stmt.else_case, loops, conds + (tirx.Not(stmt.condition),))
    elif kind == "BufferStore":
        yield stmt, loops, conds
    else:
        body = getattr(stmt, "body", None)
        if body is not None:
            yield from _stores(body, loops, conds)


def _emulate(st, store_filter):
    """For each store selected by ``store_filter``: evaluate, for every thread and loop iteration,
    the store's condition, its buffer indices and the indices of the value it loads."""
    tid = st.info.thread_vars["threadIdx.x"]
    T_ = st.info.num_threads
    out = []
    for store, loops, conds in _stores(st.lowered.body):
        if not store_filter(store):
            continue
        grids = np.indices((T_,) + tuple(e for _, e in loops))
        env = [(tid, grids[0])] + [(v, grids[k + 1]) for k, (v, _) in enumerate(loops)]
        active = np.ones(grids[0].shape, dtype=bool)
        for c in conds:
            active &= np.broadcast_to(evaluate_index_expr(c, env), active.shape).astype(bool)
        dst = [np.broadcast_to(evaluate_index_expr(i, env), active.shape) for i in store.indices]
        src = [np.broadcast_to(evaluate_index_expr(i, env), active.shape) for i in store.value.indices]
        out.append((grids[0], active, dst, src))
    return out


def test_kernel_adopts_annotation_and_derives_the_reduction():
    layouts = infer_layouts(analyze_kernel(elementwise_reduce()))
    frags = {b.name: f for b, f in layouts.fragments.items()}
    origin = {b.name: o for b, o in layouts.origin.items()}
    assert frags["x"].same_as(resolve(T.Fragment((64, 64), forward_fn=row_layout)))
    assert origin["x"].startswith("T.annotate_layout")
    assert (frags["s"].local_size, frags["s"].replication) == (16, 32)
    (loop,) = layouts.loops.values()
    assert loop.same_as(frags["x"])


@pytest.mark.parametrize("kw", [{}, REPLICATED], ids=["plain", "replicated"])
def test_generated_code_follows_the_annotated_mapping(kw):
    """The global->fragment copy loads element (i, j) into register index(i, j) of thread
    thread(i, j) (every replica), and the fragment->global copy writes each element exactly once."""
    layout = kw.get("layout") or T.Fragment((64, 64), forward_fn=row_layout)
    st = _lowered(elementwise_reduce(**kw))
    frag = st.layouts.fragments[[b for b in st.layouts.fragments if b.name == "x"][0]]
    expect = resolve(layout)
    assert frag.same_as(expect)
    (load,) = _emulate(st, lambda s: s.buffer.name == "x" and type(s.value).__name__ == "TensorLoad"
                       and s.value.source.name == "A")
    tids, active, (reg,), (i, j) = load
    assert active.all()
    seen = np.zeros((64, 64), dtype=int)
    for t, r, ii, jj in zip(tids.ravel(), reg.ravel(), i.ravel(), j.ravel()):
        assert expect.owners()[t, r] == ii * 64 + jj
        seen[ii, jj] += 1
    assert (seen == expect.replication).all()
    # Cross-check against the user's function itself: (thread, register) of some replica.
    maps = [row_layout] if not kw else [lambda i, j, rep=rep: replicated_layout(i, j, rep) for rep in range(2)]
    assert all(any(m(int(ii), int(jj)) == (int(t), int(r)) for m in maps)
               for t, r, ii, jj in zip(tids.ravel(), reg.ravel(), i.ravel(), j.ravel()))
    (store,) = _emulate(st, lambda s: s.buffer.name == "B")
    tids, active, (i, j), (reg,) = store
    written = np.zeros((64, 64), dtype=int)
    np.add.at(written, (i[active], j[active]), 1)
    assert (written == 1).all()
    assert all(expect.owners()[t, r] == ii * 64 + jj
               for t, r, ii, jj in zip(tids[active], reg[active], i[active], j[active]))


@needs_nvcc
@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
@pytest.mark.parametrize("kw", [{}, REPLICATED], ids=["plain", "replicated"])
def test_kernel_compiles_with_nvcc(arch, kw):
    art = tilelang.lower(elementwise_reduce(**kw), arch)
    assert "tl::warp_allreduce" in art.source
    cubin = nvcc.compile_cubin(art.source, arch, art.compile_flags)
    assert cubin[:4] == b"\x7fELF"


# ----- located errors through lowering ---------------------------------------------------------------
def _lower_error(func):
    with pytest.raises(TileLangCompileError) as info:
        tilelang.lower(func, "sm_80")
    return info.value.diagnostics[0]


def test_shape_mismatch_is_located_and_names_the_buffer():
    diag = _lower_error(elementwise_reduce(layout=T.Fragment((64, 32), forward_fn=row_layout)))
    assert diag.code == "TL0201"
    assert "'x'" in diag.message and "[64, 32]" in diag.message
    assert diag.span is not None and diag.span.line == elementwise_reduce.__code__.co_firstlineno + 8


def test_invalid_layout_is_located_and_names_the_buffer():
    bad = T.Fragment((64, 64), forward_thread_fn=lambda i, j: j % 32, forward_index_fn=lambda i, j: i)
    diag = _lower_error(elementwise_reduce(layout=bad))
    assert diag.code == "TL0203"
    assert "T.Fragment for 'x'" in diag.message
    assert diag.span.line == elementwise_reduce.__code__.co_firstlineno + 8


def test_too_many_threads_for_the_block():
    diag = _lower_error(elementwise_reduce(threads=64))
    assert diag.code == "TL0201" and "'x'" in diag.message and "64 threads" in diag.message


def test_conflict_with_gemm_is_tl0201():
    @T.prim_func
    def bad(A: T.Tensor((64, 64), "float16"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((64, 64), "float16")
            C_l = T.alloc_fragment((64, 64), "float32")
            T.annotate_layout({C_l: T.Fragment((64, 64), forward_fn=row_layout)})
            T.copy(A, A_s)
            T.clear(C_l)
            T.gemm(A_s, A_s, C_l)
            T.copy(C_l, C)

    diag = _lower_error(bad)
    assert diag.code == "TL0201"
    assert "C_l" in diag.message and "T.annotate_layout" in diag.message


def test_fragment_layout_on_shared_and_shared_layout_on_fragment_are_refused():
    @T.prim_func
    def on_shared(A: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((64, 64), "float32")
            T.annotate_layout({s: T.Fragment((64, 64), forward_fn=row_layout)})
            T.copy(A, s)

    @T.prim_func
    def on_fragment(A: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            x = T.alloc_fragment((64, 64), "float32")
            T.annotate_layout({x: T.Layout((64, 64), lambda i, j: [j, i])})
            T.copy(A, x)

    diag = _lower_error(on_shared)
    assert diag.code == "TL0201" and "'s'" in diag.message and "T.alloc_fragment" in diag.message
    diag = _lower_error(on_fragment)
    assert diag.code == "TL0201" and "'x'" in diag.message and "T.Fragment" in diag.message


def test_hover_summary_describes_the_annotated_layout():
    from tilelang.analysis.summary import fragment_summary

    layouts = infer_layouts(analyze_kernel(elementwise_reduce()))
    ((buf, frag),) = [(b, f) for b, f in layouts.fragments.items() if b.name == "x"]
    summary = fragment_summary(frag, 4, layouts.origin[buf])
    assert summary["origin"].startswith("T.annotate_layout")
    assert "tid/1%32 -> dim 1" in summary["describe"]
    assert summary["table"][0][:2] == [[0, 0], [0, 32]]   # thread 0: registers 0, 1
