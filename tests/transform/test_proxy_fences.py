"""``fence.proxy.async`` only before the barriers that publish ordinary shared-memory writes to a
buffer the async proxy reads (a wgmma operand, a TMA store's source, or one sharing its bytes):
thread_sync.needs_fence / async_read_buffers. A barrier around a reduction's workspace, or after a
gemm whose operands nothing rewrote, goes without one. CPU only (the generated CUDA)."""

import re

import tilelang
import tilelang.language as T


def _lines_before_barriers(src):
    """For every ``__syncthreads();`` line, whether the statement before it is the proxy fence."""
    lines = [ln.strip() for ln in src.splitlines()]
    return [lines[i - 1] == "tl::fence_proxy_async();" for i, ln in enumerate(lines) if ln == "__syncthreads();"]


def scaled_gemm_then_colmax():
    @T.prim_func
    def main(A: T.Tensor((64, 64), T.float16), B: T.Tensor((64, 64), T.float16), M: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((64, 64), T.float16)
            B_s = T.alloc_shared((64, 64), T.float16)
            acc = T.alloc_fragment((64, 64), T.float32)
            m = T.alloc_fragment((64,), T.float32)
            T.copy(A, A_s)
            T.copy(B, B_s)
            for i, j in T.Parallel(64, 64):     # ordinary stores to a wgmma operand
                A_s[i, j] = A_s[i, j] * T.float16(2)
            T.gemm(A_s, B_s, acc, clear_accum=True)
            T.reduce_max(acc, m, dim=0)         # across warps, through a workspace
            T.copy(m, M)

    return main


def test_the_barrier_before_a_wgmma_reading_rewritten_tiles_keeps_its_fence():
    src = tilelang.lower(scaled_gemm_then_colmax(), "sm_90a").source
    assert re.search(r"tl::fence_proxy_async\(\);\s+__syncthreads\(\);\s+tl::wgmma_gemm_ss", src), src


def test_a_reduction_workspace_barrier_goes_without_a_fence():
    src = tilelang.lower(scaled_gemm_then_colmax(), "sm_90a").source
    after = src[src.index("tl::wgmma_gemm_ss"):]
    fences = _lines_before_barriers(after)
    assert fences and not any(fences), after


def test_needs_fence_follows_the_async_readers():
    from types import SimpleNamespace

    from tilelang.transform import thread_sync
    from tilelang.transform.kernel import analyze_kernel

    info = analyze_kernel(scaled_gemm_then_colmax())
    bufs = {}

    def collect(b):
        bufs[b.name] = b

    from tilelang.tir_utils import walk_stmts
    from tvm import tirx
    walk_stmts(info.body, lambda s: collect(s.buffer) if isinstance(s, tirx.AllocBuffer) else None)
    a_s, b_s = bufs["A_s"], bufs["B_s"]
    lw = SimpleNamespace(info=info, layouts=SimpleNamespace(wgmma=True, shared={a_s: None, b_s: None}),
                         smem_alias={})
    assert thread_sync.async_read_buffers(lw) == {a_s, b_s}
    assert thread_sync.needs_fence(lw, None)            # unknown writes: fence
    assert thread_sync.needs_fence(lw, {a_s})
    assert not thread_sync.needs_fence(lw, set())
    other = tirx.decl_buffer((4,), "float32", "w", scope="shared.dyn")
    assert thread_sync.needs_fence(lw, {other})          # a buffer the plan does not know: fence
    lw.layouts.shared[other] = None
    lw._async_readers = None
    assert not thread_sync.needs_fence(lw, {other})
    lw.smem_alias = {other: {a_s}}                       # sharing bytes with a wgmma operand
    lw._async_readers = None
    assert thread_sync.needs_fence(lw, {other})
    lw.layouts.wgmma = False                             # no wgmma in the kernel: never
    assert not thread_sync.needs_fence(lw, {a_s})


def test_a_buffer_passed_by_address_counts_as_read_by_the_async_proxy():
    """A user's call that takes a shared tile by address (``T.access_ptr``: a hand-written wgmma
    or TMA store) may read it through the async proxy: writes to it keep their fence."""
    from types import SimpleNamespace

    from tvm import tirx

    from tilelang.transform import thread_sync

    s = tirx.decl_buffer((64,), "float16", "s", scope="shared.dyn")
    local = tirx.decl_buffer((8,), "float16", "l", scope="local")
    body = tirx.SeqStmt([tirx.Evaluate(tirx.call_extern("int32", "f", s.access_ptr("r"))),
                         tirx.Evaluate(tirx.call_extern("int32", "g", local.access_ptr("w")))])
    lw = SimpleNamespace(info=SimpleNamespace(body=body), layouts=SimpleNamespace(wgmma=True, shared={s: None}),
                         smem_alias={})
    assert thread_sync.async_read_buffers(lw) == {s}
    assert thread_sync.needs_fence(lw, {s})


def scaled_rows_gemm_then_store():
    """gdn's scaled_dot_kkt in small: a row scale staged through shared memory before a loop of
    wgmma over K tiles that read it, and the product stored through a shared tile with TMA that
    takes the scale's bytes (their lifetimes are disjoint)."""
    @T.prim_func
    def main(A: T.Tensor((64, 128), T.bfloat16), s: T.Tensor((64,), T.bfloat16), C: T.Tensor((64, 64), T.bfloat16)):
        with T.Kernel(1, threads=128) as bx:
            s_s = T.alloc_shared((64,), T.bfloat16)
            A_s = T.alloc_shared((64, 64), T.bfloat16)
            P = T.alloc_fragment((64, 64), T.bfloat16)
            acc = T.alloc_fragment((64, 64), T.float32)
            C_s = T.alloc_shared((64, 64), T.bfloat16)
            T.clear(acc)
            T.copy(s, s_s)
            for k in T.serial(2):
                T.copy(A[0, k * 64], A_s)
                for i, j in T.Parallel(64, 64):
                    P[i, j] = A_s[i, j] * s_s[i]
                T.gemm(P, A_s, acc, transpose_B=True)
            T.copy(acc, C_s)
            T.copy(C_s, C)

    return main


def test_exact_store_fences_drop_the_fence_for_bytes_only_a_store_source_shares():
    """``tl.enable_exact_store_fences`` (opt-in): the row scale shares bytes with the TMA store's
    source only, whose own generic writes get a fenced barrier before the store; so the barrier
    after the scale's writes goes without a fence, while the one before the wgmma (A_s) and the
    one before the store keep theirs. By default every buffer sharing bytes with an async-read
    one is fenced."""
    plain = tilelang.lower(scaled_rows_gemm_then_store(), "sm_90a").source
    exact = tilelang.lower(scaled_rows_gemm_then_store(), "sm_90a",
                           pass_configs={"tl.enable_exact_store_fences": True}).source
    def before_loop(src):      # the statements between the scale's copy and the K loop
        head = src[:src.index("for (int k = 0;")]
        return [ln.strip() for ln in head[head.rindex("tl::copy_vec"):].splitlines()[1:]
                if ln.strip() and not ln.strip().startswith("int ")]

    assert "tl::tma_store_2d" in plain
    assert before_loop(plain) == ["}", "tl::fence_proxy_async();", "__syncthreads();"], before_loop(plain)
    assert before_loop(exact) == ["}", "__syncthreads();"], before_loop(exact)
    assert exact.count("tl::fence_proxy_async") == plain.count("tl::fence_proxy_async") - 1
    loop = exact[exact.index("for (int k = 0;"):]
    assert re.search(r"tl::fence_proxy_async\(\);\s+__syncthreads\(\);", loop[:loop.index("tl::wgmma")])
    store = exact.index("tl::tma_store_2d")
    assert exact.rindex("tl::fence_proxy_async", 0, store) > exact.rindex("for (int w = 0;", 0, store)
