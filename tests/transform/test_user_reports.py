"""Wrong code that upstream TileLang's users reported, which ours had too (read in our CUDA, session
39; tests/gpu/test_user_reports_gpu.py runs the same kernels against torch):

* #2957: a fragment first met in a T.Parallel loop over part of it took that loop's layout (100
  of its 256 elements placed); it now takes the layout of a loop over its own shape.
* #2668: a pipelined global->shared copy into a tile that the body reads before the copy (the
  tile of the previous iteration) was issued ahead and overwrote it; such a copy stays in place.
* a barrier under ``if tx < n`` with n threads inside one warp was dropped; it is ``__syncwarp``.
* a reduction over groups of a non-power-of-two number of threads stopped nvcc at a
  ``static_assert``; it takes the general shared-memory path.
* a T.Parallel body of sibling ``if``s with one condition was not seen as guarded (TL0203 on
  Megatron-LM's sparse attention backward); it is, as one ``if`` around both always was.
* #2612: an ``if`` on a value read per thread (``c = Mask[tx] != 0; if c:``) was taken as the
  same in every thread, so a barrier inside it was a ``__syncthreads()`` only some threads reach
  (may hang); no barrier is placed inside such a branch now (those around it order it), as for
  other guards that select an unknown set of threads, and as upstream hoists it.
* barriers under guards that do select whole warps were left out where the guard was written
  otherwise: ``tx < 48`` with 48 threads (the whole block), ``tx < 64 and bx < 3`` (a conjunct the
  same in every thread), ``w = tx // 32; if w == 0`` (a warp index in a variable).
"""

import pytest

import tilelang
import tilelang.language as T
from tilelang.jit import nvcc


def _body(func, arch="sm_90a"):
    art = tilelang.lower(func, arch)
    assert nvcc.compile_cubin(art.source, art.arch, art.compile_flags)[:4] == b"\x7fELF"
    return art.source[art.source.index('extern "C" __global__'):]


def test_partial_loop_first_does_not_shrink_the_fragment():
    @T.prim_func
    def kernel(A: T.Tensor((256,), "float32"), C: T.Tensor((256,), "float32")):
        with T.Kernel(1, threads=128):
            f = T.alloc_fragment((256,), "float32")
            for i in T.Parallel(100):
                f[i] = A[i] * 2.0
            for i in T.Parallel(256):
                f[i] = A[i] + 3.0
            for i in T.Parallel(256):
                C[i] = f[i]

    body = _body(kernel)
    assert "float f[2];" in body                    # 256 elements over 128 threads
    assert "threadIdx.x) < 50)" in body             # the 100-long loop: 50 threads x 2


@pytest.mark.parametrize("stages", [2, 3])
def test_copy_into_a_tile_read_earlier_in_the_body_is_not_issued_ahead(stages):
    @T.prim_func
    def kernel(A: T.Tensor((8, 32), "int32"), S0: T.Tensor((32,), "int32"), Out: T.Tensor((32,), "int32")):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((32,), "int32")
            acc = T.alloc_fragment((32,), "int32")
            T.clear(acc)
            for i in T.Parallel(32):
                S[i] = S0[i]
            for k in T.Pipelined(8, num_stages=stages):
                for i in T.Parallel(32):
                    acc[i] += S[i]          # the tile of iteration k - 1 (S0 first)
                T.copy(A[k, :], S)
            for i in T.Parallel(32):
                Out[i] = acc[i]

    body = _body(kernel)
    loop = body[body.index("for (int k = 0; k < 8; ++k)"):]
    assert loop.index("acc + ") < loop.index("A[((k * 32)")      # read, then this iteration's copy
    assert "cp_async_gs" not in body[:body.index("for (int k")]  # no prologue prefetch


def test_barrier_under_a_one_warp_thread_guard_is_syncwarp():
    @T.prim_func
    def kernel(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding()
            S = T.alloc_shared((64,), "float32")
            if tx < 16:
                S[tx] = A[tx] * 2.0
                B[tx] = S[15 - tx]

    assert "__syncwarp((uint)65535);" in _body(kernel)


def _exchange_under(flag_of):
    @T.prim_func
    def kernel(Mask: T.Tensor((64,), "int32"), Flags: T.Tensor((4,), "int32"), A: T.Tensor((4, 64), "float32"),
               B: T.Tensor((4, 64), "float32")):
        with T.Kernel(4, threads=64) as bx:
            tx = T.get_thread_binding()
            S = T.alloc_shared((64,), "float32")
            c = flag_of(Mask, Flags, tx, bx)
            if c:
                S[tx] = A[bx, tx] * 2.0
                B[bx, tx] = S[63 - tx]
    return kernel


def test_barrier_under_an_if_on_a_per_thread_value_is_split_out():
    # (upstream's ThreadSync hoists it the same way; barrier_hoist)
    body = _body(_exchange_under(lambda Mask, Flags, tx, bx: Mask[tx] != 0))
    head, first, rest = body.partition("if (cond) {")
    assert first and "__syncthreads();\n  if (cond) {" in rest
    assert "__syncthreads" not in rest[:rest.index("}")]       # none inside the first part


def test_barrier_under_an_if_on_a_per_block_value_stays():
    body = _body(_exchange_under(lambda Mask, Flags, tx, bx: Flags[bx] != 0))
    assert "__syncthreads();" in body[body.index("if ("):]


def _exchange(threads, guard, blocks=1):
    @T.prim_func
    def kernel(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(blocks, threads=threads) as bx:
            tx = T.get_thread_binding()
            S = T.alloc_shared((128,), "float32")
            w = T.alloc_var("int32")
            w = tx // 32
            if guard(tx, bx, w):
                S[tx] = A[tx] * 2.0
                B[tx] = S[31 - tx % 32]
    return kernel


@pytest.mark.parametrize("threads, guard, barrier", [
    (48, lambda tx, bx, w: tx < 48, "__syncthreads();"),                        # the whole block of 48
    (128, lambda tx, bx, w: T.And(tx < 64, bx < 3), "tl::named_barrier_sync(3, 64);"),  # bx: alike in all threads
    (128, lambda tx, bx, w: w == 0, "tl::named_barrier_sync(3, 32);"),           # w: tx // 32, read through
], ids=["whole_block_of_48", "block_uniform_conjunct", "warp_index_variable"])
def test_barrier_under_a_guard_that_selects_whole_warps(threads, guard, barrier):
    body = _body(_exchange(threads, guard, blocks=4))
    assert barrier in body


def test_values_derived_from_the_thread_index_vary():
    from tvm import tirx

    from tilelang.transform.thread_regions import thread_varying

    tx, bx = tirx.Var("tx", "int32"), tirx.Var("bx", "int32")
    m = tirx.decl_buffer((64,), "int32", "M")
    c = tirx.decl_buffer((1,), "bool", "c", scope="local")
    n = tirx.decl_buffer((1,), "int32", "n", scope="local.var")
    d = tirx.decl_buffer((1,), "int32", "d", scope="local.var")
    body = tirx.SeqStmt([
        tirx.BufferStore(c, tirx.BufferLoad(m, [tx]) != 0, [0]),          # a load at the thread's index
        tirx.BufferStore(n, tirx.BufferLoad(m, [bx]), [0]),                # the same in every thread
        tirx.IfThenElse(tirx.BufferLoad(c, [0]), tirx.BufferStore(d, tirx.IntImm("int32", 1), [0]), None),
    ])
    varying = thread_varying(body, [tx])
    assert any(v.same_as(c) for v in varying) and any(v.same_as(d) for v in varying)    # d: set under c
    assert not any(v.same_as(n) for v in varying)


def test_reduction_over_a_non_power_of_two_thread_group():
    @T.prim_func
    def kernel(X: T.Tensor((1, 96), "float32"), Y: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=96):
            x = T.alloc_fragment((1, 96), "float32")
            y = T.alloc_fragment((1,), "float32")
            T.copy(X, x)
            T.reduce_max(x, y, dim=1)
            T.copy(y, Y)

    body = _body(kernel)
    assert "AllReduce" not in body and "__syncthreads();" in body


def test_sibling_ifs_with_one_condition_guard_the_loop():
    # Megatron's sparse attention backward stores two accumulators half by half, each under its
    # own `if` of the same condition (one `if` around both always compiled)
    @T.prim_func
    def kernel(P: T.Tensor((32, 32), "bfloat16"), Q: T.Tensor((32, 512), "bfloat16"),
               dK: T.Tensor((32, 512), "float32")):
        with T.Kernel(1, threads=256):
            P_s = T.alloc_shared((32, 32), "bfloat16")
            Q_s = T.alloc_shared((32, 512), "bfloat16")
            a = T.alloc_fragment((32, 512), "float32")
            b = T.alloc_fragment((32, 512), "float32")
            a_s = T.alloc_shared((16, 512), "float32")
            b_s = T.alloc_shared((16, 512), "float32")
            T.copy(P, P_s)
            T.copy(Q, Q_s)
            T.gemm(P_s, Q_s, a, transpose_A=True, policy=T.GemmWarpPolicy.FullCol, clear_accum=True)
            T.gemm(P_s, Q_s, b, transpose_A=True, policy=T.GemmWarpPolicy.FullCol, clear_accum=True)
            for s in range(2):
                for i, d in T.Parallel(32, 512):
                    if i < 16:
                        a_s[i, d] = a[i + s * 16, d]
                    if i < 16:
                        b_s[i, d] = b[i + s * 16, d]
                for i, d in T.Parallel(16, 512):
                    dK[i + s * 16, d] = a_s[i, d] + b_s[i, d]

    _body(kernel)


def test_a_layout_annotation_before_the_copy_is_no_read_of_the_tile():
    # (upstream's mhc_pre annotates its tile inside the loop body, above the copy into it)
    @T.prim_func
    def kernel(X: T.Tensor((64, 1024), "bfloat16"), O: T.Tensor((64, 256), "float32")):
        with T.Kernel(1, threads=128):
            acc = T.alloc_fragment((64, 256), "float32")
            T.clear(acc)
            for k in T.Pipelined(4, num_stages=2):
                x_s = T.alloc_shared((64, 256), "bfloat16")
                T.annotate_layout({x_s: tilelang.layout.make_swizzled_layout(x_s)})
                T.copy(X[0, k * 256], x_s)
                for i, j in T.Parallel(64, 256):
                    acc[i, j] += x_s[i, j]
            T.copy(acc, O)

    body = _body(kernel)
    assert "cp_async" in body[:body.index("for (int k")]      # the first tile is issued ahead


def test_an_address_read_in_a_vectorized_copy_is_no_broadcast_value():
    @T.prim_func
    def kernel(X: T.Tensor((64, 128), "float16"), Off: T.Tensor((1,), "int32"), O: T.Tensor((128, 128), "float16")):
        with T.Kernel(1, threads=128):
            off = T.alloc_var("int32")
            off = Off[0]
            for i in T.serial(4):
                for v in T.vectorized(8):
                    O[off + i, T.get_thread_binding() % 16 * 8 + v] = X[i, T.get_thread_binding() % 16 * 8 + v]

    assert "uint4" in _body(kernel)          # one 16-byte vector, not two half4
