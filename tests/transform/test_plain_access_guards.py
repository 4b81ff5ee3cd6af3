"""Plain (non-T.Parallel) element accesses of global tensors that may fall outside the tensor are
guarded as upstream's safe-memory pass guards them (``Lowerer.global_guard``): a store is
skipped, a load reads 0, a call taking an element's address runs only where it is inside; a
store's own loads of the same element are not guarded twice; a vector index stays the user's own
(the checker's TL0602 reports it)."""

import re

import pytest

import tilelang
import tilelang.language as T
from tilelang.diagnostics import TileLangCompileError

SM90 = "cuda -arch=sm_90a"


def body(func, **configs):
    src = tilelang.compile(func, target=SM90, pass_configs=configs).get_kernel_source()
    return src[src.index("{", src.rindex("__global__ void")):]


@T.prim_func
def overhang(A: T.Tensor((1000,), T.float32), B: T.Tensor((1000,), T.float32),
             C: T.Tensor((1000,), T.float32)):
    with T.Kernel(1, threads=1024) as bx:
        tx = T.get_thread_binding(0)
        idx = bx * 1024 + tx
        C[idx] = A[idx] + B[idx]


@T.prim_func
def shifted(A: T.Tensor((1000,), T.float32), C: T.Tensor((1000,), T.float32)):
    with T.Kernel(8, threads=128) as bx:
        tx = T.get_thread_binding(0)
        for k in T.serial(4):
            C[bx * 128 + tx] += A[bx * 128 + tx + k]


@T.prim_func
def row_tail(Logits: T.Tensor((64, 8), T.float32), Ends: T.Tensor((64,), T.int32)):
    with T.Kernel(64, threads=128) as bx:
        tx = T.get_thread_binding(0)
        end = Ends[bx]
        for k in T.serial(4):
            idx = k * 128 + tx
            if idx >= end:
                Logits[bx, idx] = -T.infinity(T.float32)


def test_an_overhanging_statement_is_guarded_once():
    b = body(overhang)
    assert re.search(r"if \(\(\(int\)threadIdx.x\) < 1000\) \{\s*C\[", b)
    assert "condval" not in b       # A[idx], B[idx] are read only where the store's guard holds


def test_a_load_past_the_store_element_reads_zero():
    b = body(shifted)
    assert "< 1000" in b and "condval = 0x0p+0f" in b


def test_a_thread_loop_past_a_row_end_skips_the_store():
    b = body(row_tail)
    assert re.search(r"if \(\(\(k \* 128\) \+ \(\(int\)threadIdx.x\)\) < 8\) \{\s*Logits\[", b)


@T.prim_func
def atomics(A: T.Tensor((1000,), T.float32), C: T.Tensor((1000,), T.float32)):
    with T.Kernel(1, threads=1024) as bx:
        tx = T.get_thread_binding(0)
        T.atomic_add(C[tx], A[tx])


def test_a_call_taking_an_element_address_runs_only_inside():
    b = body(atomics)
    assert re.search(r"if \(\(\(int\)threadIdx.x\) < 1000\) \{\s*tl::atomic_add\(\(&\(C\[", b)


@T.prim_func
def gathered(KV: T.Tensor((256, 64), T.float16), Idx: T.Tensor((64,), T.int32), O: T.Tensor((64, 64), T.float16)):
    with T.Kernel(1, threads=64) as bx:
        tx = T.get_thread_binding(0)
        rows = T.alloc_shared((64, 64), T.float16)
        row = Idx[tx]
        for u in T.serial(8):
            T.ptx_cp_async(T.access_ptr(rows[tx, u * 8], "w", 8), T.access_ptr(KV[row, u * 8], "r", 8), 8)
        T.ptx_commit_group()
        T.ptx_wait_group(0)
        for u in T.serial(64):
            O[tx, u] = rows[tx, u]


@T.prim_func
def gathered_masked(KV: T.Tensor((256, 64), T.float16), Idx: T.Tensor((64,), T.int32),
                    O: T.Tensor((64, 64), T.float16)):
    with T.Kernel(1, threads=64) as bx:
        tx = T.get_thread_binding(0)
        rows = T.alloc_shared((64, 64), T.float16)
        row = Idx[tx]
        for u in T.serial(8):
            T.ptx_cp_async(T.access_ptr(rows[tx, u * 8], "w", 8), T.access_ptr(KV[row, u * 8], "r", 8), 8, row != 7)
        T.ptx_commit_group()
        T.ptx_wait_group(0)
        for u in T.serial(64):
            O[tx, u] = rows[tx, u]


def test_a_user_cp_async_from_a_gathered_row_copies_zeros_outside():
    b = body(gathered)
    assert re.search(r"tl::cp_async_gs_conditional<16>\(.*\(0 <= row\) && \(row < 256\)\)\);", b)
    # the user's own predicate is kept beside the bounds
    b = body(gathered_masked)
    assert re.search(r"tl::cp_async_gs_conditional<16>\(.*row < 256\).*\(row != 7\)\)\);", b)


def test_the_key_turns_the_guards_off():
    # the checker then refuses the kernel (nothing guards it), as without the pass upstream
    with pytest.raises(TileLangCompileError, match="TL0602"):
        body(overhang, **{"tl.disable_safe_memory_access": True})
    b = body(overhang, **{"tl.disable_safe_memory_access": True, "tl.disable_out_of_bound_warning": True})
    assert "< 1000" not in b


def _replicated_rows(rep=2):
    n = T.dynamic("n")

    @T.prim_func
    def kernel(Idx: T.Tensor((n, 64), T.int32), Out: T.Tensor((n * rep, 64), T.int32)):
        with T.Kernel(n * rep, threads=64) as bx:
            tx = T.get_thread_binding(0)
            Out[bx, tx] = Idx[bx // rep, tx] + 1

    return kernel


def test_a_floor_divided_block_index_is_proven_inside_its_grid():
    """deepseek_v32's sparse_mla_fwd_pipelined: ``Indices[.., bx // REPLICATE_H, ..]`` on a grid of
    ``seq_len * REPLICATE_H`` blocks needs no guard (the guard kept ptxas from batching the index
    loads ahead of the producer's barriers: 14 % slower on the H200)."""
    b = body(_replicated_rows())
    assert "condval" not in b and " < n" not in b


def _amp_guarded(logical=False, N=4096, inp=1024):
    @T.prim_func
    def kernel(Source: T.Tensor((N,), T.uint8), B: T.Tensor((128,), T.uint32)):
        with T.Kernel(1, threads=128):
            t = T.get_thread_binding(0)
            raw = T.alloc_var(T.int32, init=t * 64 - 100)
            if logical:
                if (raw >= 0) and (raw <= N - inp - 4):
                    B[t] = T.call_extern(T.uint32, "__ldg", T.address_of(Source[inp + raw]))
            else:
                if (raw >= 0) & (raw <= N - inp - 4):
                    B[t] = T.call_extern(T.uint32, "__ldg", T.address_of(Source[inp + raw]))

    return kernel


def test_a_guard_written_with_amp_is_known_inside_its_branch():
    """dlss5's NR kernels guard an address taken in a store's value as ``if (raw >= 0) & (raw <=
    n - 4):`` (the checker reported it unguarded, TL0602, refusing the kernel); ``&`` of two
    conditions is a conjunction for the analyzer, as ``and`` is. The code keeps the user's ``&``."""
    amp, logical = body(_amp_guarded()), body(_amp_guarded(logical=True))
    assert "if ((0 <= raw) & (raw <= 3068)) {" in amp and "if ((0 <= raw) && (raw <= 3068)) {" in logical
    for b in (amp, logical):      # the address is inside where the guard holds: no guard of ours
        assert "__ldg(&(Source[(raw + 1024)]))" in b and "< 4096" not in b


def _view_at(offset_by_param):
    @T.prim_func
    def kernel(X: T.Tensor((1024,), T.int32), Y: T.Tensor((256,), T.int32), off: T.int32):
        with T.Kernel(1, threads=128):
            tx = T.get_thread_binding(0)
            V = T.make_tensor(T.address_of(X[off if offset_by_param else tx * 16]), (256,), T.int32)
            s = T.alloc_shared((256,), T.int32)
            T.copy(V, s)
            T.copy(s, Y)

    return kernel


def test_a_view_at_an_address_offset_by_a_scalar_parameter_compiles():
    """Session 57 (upstream #2526's second form): `T.make_tensor(T.address_of(X[off]), ...)` with
    `off` a scalar parameter is a base address the caller chooses, as unknown as loaded data:
    not TL0602 (it refused the kernel); an offset the checker can bound past the end still is."""
    assert "X + off" in body(_view_at(True)) or "X[off]" in body(_view_at(True))
    with pytest.raises(TileLangCompileError, match="TL0602"):
        body(_view_at(False))
