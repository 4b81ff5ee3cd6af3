"""Which instruction a lone global->shared T.copy (outside a pipelined loop's producers) becomes:
plain 16-byte loads and stores while the registers they stage stay within
``lower_copy.COPY_STAGING_BUDGET`` (the copy's bytes per thread, plus the kernel's fragment
registers when the copy sits in a loop), cp.async committed and waited for on the spot beyond it
(issue 20: one-stage 128x128 attention and NSA were slower with plain K / V copies). A loop of
one iteration counts as no loop."""

import re

import tilelang
import tilelang.language as T
from tilelang.transform import lower_copy

SM90 = "cuda -arch=sm_90a"


def source(func, target=SM90, **configs):
    return tilelang.compile(func, target=target, pass_configs=configs).get_kernel_source()


def attention_like(block_N, num_stages, threads=128, dim=128, block_M=128, S_LEN=1024):
    """A one-stage loop of S = Q K^T, P = S, O += P V: fragments of 128 + 64 + 128 registers a
    thread at 128x128 tiles; ``S_LEN // block_M`` blocks."""

    @T.prim_func
    def main(Q: T.Tensor((S_LEN, dim), T.float16), K: T.Tensor((S_LEN, dim), T.float16),
             V: T.Tensor((S_LEN, dim), T.float16), O: T.Tensor((S_LEN, dim), T.float16)):
        with T.Kernel(S_LEN // block_M, threads=threads) as bx:
            Q_s = T.alloc_shared((block_M, dim), T.float16)
            K_s = T.alloc_shared((block_N, dim), T.float16)
            V_s = T.alloc_shared((block_N, dim), T.float16)
            acc_s = T.alloc_fragment((block_M, block_N), T.float32)
            acc_p = T.alloc_fragment((block_M, block_N), T.float16)
            acc_o = T.alloc_fragment((block_M, dim), T.float32)
            T.copy(Q[bx * block_M, 0], Q_s)
            T.clear(acc_o)
            for k in T.Pipelined(S_LEN // block_N, num_stages=num_stages):
                T.copy(K[k * block_N, 0], K_s)
                T.gemm(Q_s, K_s, acc_s, transpose_B=True, clear_accum=True)
                T.copy(acc_s, acc_p)
                T.copy(V[k * block_N, 0], V_s)
                T.gemm(acc_p, V_s, acc_o)
            T.copy(acc_o, O[bx * block_M, 0])
    return main


def tile_loop(rows, cols, steps, threads=128):
    """A light kernel: each step copies a tile into shared memory and writes it back doubled."""
    @T.prim_func
    def main(A: T.Tensor((rows * steps, cols), T.float32), B: T.Tensor((rows * steps, cols), T.float32)):
        with T.Kernel(1, threads=threads) as bx:
            A_s = T.alloc_shared((rows, cols), T.float32)
            for k in T.serial(steps):
                T.copy(A[k * rows, 0], A_s)
                for i, j in T.Parallel(rows, cols):
                    B[k * rows + i, j] = A_s[i, j] * 2.0
    return main


def loop_part(src):
    return src[src.index("for (int k = 0;"):]


def test_register_heavy_loop_copies_use_cp_async():
    # (on 128 threads as written: thread widening would give it two warpgroups)
    src = source(attention_like(128, 1), **{"tl.enable_thread_widening": False})
    body = loop_part(src)
    # K and V: 16 vectors a thread on top of 320+ fragment registers -> cp.async, waited at once
    assert body.count("tl::cp_async_gs") == 2 and "copy_vec" not in body
    assert body.count("tl::cp_async_commit();") == 2 and body.count("tl::cp_async_wait<0>();") == 2
    # each wait precedes the barrier in front of the gemm that reads the tile
    k_wait = body.index("tl::cp_async_wait<0>();")
    assert k_wait < body.index("__syncthreads();") < body.index("wgmma_gemm")
    # Q, in front of the loop (no accumulator live yet): plain copies
    assert "tl::copy_vec<16>" in src[:src.index("for (int k = 0;")]


def test_light_loop_copies_stay_plain():
    # 32x64 float32 on 128 threads: 4 vectors a thread, no fragments -> plain loads and stores
    body = loop_part(source(tile_loop(32, 64, 8)))
    assert "tl::copy_vec<16>" in body and "cp_async" not in body


def test_large_copy_per_thread_uses_cp_async_even_without_fragments():
    # 128x128 float32 on 32 threads: 128 vectors (512 registers) a thread
    body = loop_part(source(tile_loop(128, 128, 2, threads=32)))
    assert "tl::cp_async_gs<16>" in body and "copy_vec" not in body
    assert "tl::cp_async_wait<0>();" in body


def test_budget_boundary():
    assert lower_copy.COPY_STAGING_BUDGET == 128
    # 64x64 float32 on 32 threads: 32 vectors = 128 registers, exactly the budget: plain
    body = loop_part(source(tile_loop(64, 64, 2, threads=32)))
    assert "tl::copy_vec<16>" in body and "cp_async" not in body
    # 68x64: 34 vectors = 136 registers -> cp.async
    body = loop_part(source(tile_loop(68, 64, 2, threads=32)))
    assert "tl::cp_async_gs<16>" in body


def test_one_stage_gemm_loop_uses_cp_async():
    # 128 accumulator registers + 4 vectors (16 registers) a tile: over the budget
    @T.prim_func
    def main(A: T.Tensor((256, 256), T.float16), B: T.Tensor((256, 256), T.float16),
             C: T.Tensor((256, 256), T.float16)):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            A_s = T.alloc_shared((128, 32), T.float16)
            B_s = T.alloc_shared((32, 128), T.float16)
            C_l = T.alloc_fragment((128, 128), T.float32)
            T.clear(C_l)
            for k in T.Pipelined(8, num_stages=1):
                T.copy(A[by * 128, k * 32], A_s)
                T.copy(B[k * 32, bx * 128], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * 128, bx * 128])
    body = loop_part(source(main))
    assert body.count("tl::cp_async_gs") == 2 and "copy_vec" not in body
    assert body.index("tl::cp_async_wait<0>();") < body.index("__syncthreads();") < body.index("wgmma_gemm")


def test_disable_async_copy_keeps_plain_copies():
    k = tilelang.compile(attention_like(128, 1), target=SM90, pass_configs={"tl.disable_async_copy": True})
    body = loop_part(k.get_kernel_source())
    assert "cp_async" not in body and "tl::copy_vec<16>" in body


def heavy_loop(trips):
    """256 fragment registers a thread; a loop of ``trips`` iterations copying a 128x32 tile."""
    @T.prim_func
    def main(A: T.Tensor((128, 32 * trips), T.float16), B: T.Tensor((32 * trips, 128), T.float16),
             C: T.Tensor((128, 128), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((128, 32), T.float16)
            B_s = T.alloc_shared((32, 128), T.float16)
            C_l = T.alloc_fragment((128, 128), T.float32)
            D_l = T.alloc_fragment((128, 128), T.float32)
            T.clear(C_l)
            for k in T.serial(trips):
                T.copy(A[0, k * 32], A_s)
                T.copy(B[k * 32, 0], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, D_l)
            T.copy(D_l, C)
    return main


def test_loop_of_one_iteration_counts_as_no_loop():
    assert "cp_async" not in source(heavy_loop(1))          # (gdn's T.Pipelined(1) over K)
    assert "tl::cp_async_gs<16>" in source(heavy_loop(2))


def lone_copies(body="readers"):
    """Register-heavy lone copies in a one-stage loop ahead of gemms. ``body``: "readers", three
    copies, the first tile rewritten first and the other two read later; "async", a T.async_copy
    and a lone copy behind the user's own ``ptx_wait_group(0)``; "if", the second and third copies
    inside an ``if`` (an ``else`` clears the tile)."""

    @T.prim_func
    def main(A: T.Tensor((256, 256), T.float16), B: T.Tensor((256, 256), T.float16),
             D: T.Tensor((256, 256), T.float16), C: T.Tensor((256, 256), T.float16)):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            A_s = T.alloc_shared((128, 32), T.float16)
            B_s = T.alloc_shared((32, 128), T.float16)
            D_s = T.alloc_shared((32, 128), T.float16)
            C_l = T.alloc_fragment((128, 128), T.float32)
            T.clear(C_l)
            for k in T.Pipelined(8, num_stages=1):
                if body == "readers":
                    T.copy(A[by * 128, k * 32], A_s)
                    T.copy(B[k * 32, bx * 128], B_s)
                    T.copy(D[k * 32, bx * 128], D_s)
                    for i, j in T.Parallel(128, 32):
                        A_s[i, j] = A_s[i, j] * T.float16(0.5)
                    T.gemm(A_s, B_s, C_l)
                    T.gemm(A_s, D_s, C_l)
                elif body == "async":
                    T.async_copy(A[by * 128, k * 32], A_s)
                    T.copy(B[k * 32, bx * 128], B_s)
                    T.ptx_wait_group(0)
                    T.gemm(A_s, B_s, C_l)
                else:
                    T.copy(A[by * 128, k * 32], A_s)
                    if bx > 0:
                        T.copy(B[k * 32, bx * 128], B_s)
                        T.copy(D[k * 32, bx * 128], B_s)
                    else:
                        T.clear(B_s)
                    T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * 128, bx * 128])
    return main


def three_copies_then_readers():
    return lone_copies("readers")


def test_lone_copies_wait_together_before_their_first_reader():
    """thread_sync._place_waits: the three copies are committed back to back; each tile is waited
    for just before its first reader, the copies issued after it left in flight: wait<2> before the
    loop that rewrites A_s, wait<1> before the gemm that reads B_s, wait<0> before the one reading
    D_s; a barrier after each (the tile lands there). (Split groups off: by default the one-stage
    loop refills each tile for the next iteration after its last use, transform/attention_schedule.py.)"""
    src = tilelang.compile(three_copies_then_readers(), target=SM90,
                           pass_configs={"tl.enable_pipeline_split_groups": False}).get_kernel_source()
    body = loop_part(src)
    commits = [m.start() for m in re.finditer(r"tl::cp_async_commit\(\);", body)]
    assert len(commits) == 3
    w2, w1, w0 = (body.index(f"tl::cp_async_wait<{n}>();") for n in (2, 1, 0))
    g1 = body.index("wgmma_gemm")
    g2 = body.index("wgmma_gemm", g1 + 1)
    assert commits[-1] < w2 < w1 < g1 < w0 < g2
    assert body.count("tl::cp_async_wait<") == 3
    for w, reader in ((w2, w1), (w1, g1), (w0, g2)):
        assert w < body.index("__syncthreads();", w) < reader


def test_a_sequence_with_its_own_async_copies_waits_at_once():
    """Where the sequence has a T.async_copy of its own, its waits count groups: lone copies
    keep their immediate wait."""
    body = loop_part(source(lone_copies("async")))
    b_copy = body.index("tl::cp_async_gs", body.index("tl::cp_async_commit();") + 1)
    assert body.index("tl::cp_async_wait<0>();", b_copy) < body.index("wgmma_gemm")


def test_disable_deferred_copy_wait_waits_on_the_spot():
    func = three_copies_then_readers()
    # (the one-stage loop's early loads, transform/attention_schedule.py, would issue the three
    # copies together on their own: off too, so that only the deferred waits are tested)
    configs = {"tl.disable_deferred_copy_wait": True, "tl.disable_attention_schedule": True}
    src = tilelang.compile(func, target=SM90, pass_configs=configs).get_kernel_source()
    body = loop_part(src)
    assert body.count("tl::cp_async_wait<0>();") == 3 and "tl::cp_async_wait<2>" not in body


def test_copies_under_an_if_wait_inside_it():
    """Lone copies in a nested sequence (the body of an ``if``) are that sequence's: waited for at
    its end, and the ``if`` itself is no deferred copy of the outer sequence (upstream's
    block-causal varlen backward raised an internal error here once)."""
    body = loop_part(source(lone_copies("if")))
    branch = body[body.index("if (0 < ((int)blockIdx.x))"):body.index("} else {")]
    assert branch.count("tl::cp_async_commit();") == 2 and branch.count("tl::cp_async_wait<") >= 1


def test_a_call_handed_a_shared_pointer_waits_for_every_copy():
    """thread_sync.passes_shared_pointers: a statement that passes shared memory by address may
    read any tile, so the copies in flight are waited for before it."""
    from tvm import tirx

    from tilelang.transform.thread_sync import passes_shared_pointers

    b = tirx.decl_buffer((64,), "float16", "b", scope="shared.dyn")
    loc = tirx.decl_buffer((8,), "float16", "l", scope="local")
    call = tirx.call_extern("int32", "f", tirx.address_of(tirx.BufferLoad(b, [0])))
    assert passes_shared_pointers(tirx.Evaluate(call))
    assert not passes_shared_pointers(tirx.Evaluate(tirx.call_extern("int32", "f", tirx.address_of(tirx.BufferLoad(loc, [0])))))
    ptr = b.access_ptr("r")
    assert passes_shared_pointers(tirx.Evaluate(tirx.call_extern("int32", "f", ptr)))
