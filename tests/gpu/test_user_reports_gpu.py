"""Wrong results, races and hangs that upstream TileLang's users reported (its issue tracker,
numbers in the test names), as kernels of our own with the same meaning, checked against torch on
the CPU. Session 39 read our CUDA for each on a machine without a GPU: four had upstream's bug
(two loops of different extents over one fragment, a pipelined copy into a tile read earlier in
the body, barriers under a partial-warp thread guard); all three are fixed: no barrier can be met
inside a branch of part of several warps or of the threads a per-thread value selects, so the
branch is split around it (``barrier_hoist``, session 41: #2556's 48 threads, #2612's every 4th
thread or ``Mask[tx]``). Without a GPU every test skips; ``kernels()`` lists every kernel for a
compile-only check.
"""

import pytest

torch = pytest.importorskip("torch")
tilelang = pytest.importorskip("tilelang")
import tilelang.language as T  # noqa: E402

needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
NO_WS = {"tl.disable_warp_specialized": True}


def _sm90():
    return torch.cuda.is_available() and torch.cuda.get_device_capability()[0] == 9


def _build(func, pass_configs=None):
    return tilelang.compile(func, pass_configs=pass_configs)


def _run(func, *args, pass_configs=None):
    k = _build(func, pass_configs)
    k(*args)
    torch.cuda.synchronize()


def _cpu(t):
    return t.detach().cpu()


# --------------------------------------------------------------------------------------------------
# kernels
# --------------------------------------------------------------------------------------------------

def k_serial_fragment_store(serial):          # tile-ai/tilelang#2396
    @T.prim_func
    def main(A: T.Tensor((16, 16), "float32"), B: T.Tensor((16, 16), "float32")):
        with T.Kernel(1, threads=128):
            frag = T.alloc_fragment((16, 16), "float32")
            T.copy(A, frag)
            if serial:
                for r in T.serial(16):
                    for c in T.serial(16):
                        B[r, c] = frag[r, c]
            else:
                for r, c in T.Parallel(16, 16):
                    B[r, c] = frag[r, c]
    return main


def k_mixed_parallel_extents(variant):        # tile-ai/tilelang#2957
    @T.prim_func
    def main(A: T.Tensor((256,), "float32"), C: T.Tensor((256,), "float32")):
        with T.Kernel(1, threads=128):
            g = T.alloc_fragment((256,), "float32")
            if variant == "big_first":
                for t in T.Parallel(256):
                    g[t] = A[t]
                for t in T.Parallel(100):
                    g[t] = 5.0
                for t in T.Parallel(256):
                    C[t] = g[t] + 1.0
            else:  # "small_first": a 100-wide write pins the layout, then a 256-wide write + read
                for t in T.Parallel(100):
                    g[t] = A[t] * 2.0
                for t in T.Parallel(256):
                    g[t] = A[t] + 3.0
                for t in T.Parallel(256):
                    C[t] = g[t]
    return main


def k_persistent(M=64, N=176, BM=16, BN=16, waves=5):   # tile-ai/tilelang#2433
    nbm, nbn = M // BM, N // BN

    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(waves, threads=128) as b:
            for ty, tx in T.Persistent([nbm, nbn], waves, b):
                for r, c in T.Parallel(BM, BN):
                    C[ty * BM + r, tx * BN + c] = A[ty * BM + r, tx * BN + c] + 1.0
    return main


def k_nested_mod(M, N, K):                    # tile-ai/tilelang#2955
    @T.prim_func
    def main(B: T.Tensor((K,), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128):
            for r, c in T.Parallel(M, N):
                C[r, c] = B[c % K]
    return main


def k_pipelined_war(stages, W=32, NK=8):      # tile-ai/tilelang#2668
    @T.prim_func
    def main(A: T.Tensor((NK, W), "int32"), Sinit: T.Tensor((W,), "int32"), Out: T.Tensor((W,), "int32")):
        with T.Kernel(1, threads=W):
            S = T.alloc_shared((W,), "int32")
            acc = T.alloc_fragment((W,), "int32")
            T.clear(acc)
            for t in T.Parallel(W):
                S[t] = Sinit[t]
            for k in T.Pipelined(NK, num_stages=stages):
                for t in T.Parallel(W):
                    acc[t] += S[t]          # consume the value loaded by the previous iteration
                T.copy(A[k, :], S)          # then overwrite S
            for t in T.Parallel(W):
                Out[t] = acc[t]
    return main


def k_one_iter_ws_gemm(M=128, N=128, K=64, bK=64, stages=3):   # tile-ai/tilelang#2566
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, 1, threads=128) as (bx, by):
            As = T.alloc_shared((M, bK), "float16")
            Bs = T.alloc_shared((bK, N), "float16")
            acc = T.alloc_fragment((M, N), "float32")
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, bK), num_stages=stages):
                T.copy(A[0, k * bK], As)
                T.copy(B[k * bK, 0], Bs)
                T.gemm(As, Bs, acc)
            T.copy(acc, C)
    return main


def k_gemv_reducer_all(M=4, N=96, bM=2, bN=48):   # tile-ai/tilelang#2408
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), x: T.Tensor((N,), "float32"), y: T.Tensor((M,), "float32")):
        with T.Kernel(M // bM, threads=128) as bx:
            red = T.alloc_reducer((bM,), "float32", replication="all")
            T.clear(red)
            for ko in T.serial(N // bN):
                for r, c in T.Parallel(bM, bN):
                    red[r] += A[bx * bM + r, ko * bN + c] * x[ko * bN + c]
            T.finalize_reducer(red)
            for r in T.Parallel(bM):
                y[bx * bM + r] = red[r]
    return main


def k_reducer_replicated_source(BD=8):      # tile-ai/tilelang PR #2881
    @T.prim_func
    def main(x: T.Tensor((BD,), "float32"), out: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=128):
            xf = T.alloc_fragment((BD,), "float32")
            T.copy(x, xf)
            tot = T.alloc_reducer((1,), "float32", replication="all")
            T.fill(tot, 0.0)
            for j in T.Parallel(BD):
                tot[0] += xf[j]
            T.finalize_reducer(tot)
            if T.get_thread_binding() == 0:
                out[0] = tot[0]
    return main


def k_gemm_colreduce_batch(op, batch, M=64, N=64, K=32):   # tile-ai/tilelang#2524
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=128):
            As = T.alloc_shared((M, K), "float16")
            Bs = T.alloc_shared((K, N), "float16")
            acc = T.alloc_fragment((M, N), "float32")
            col = T.alloc_fragment((N,), "float32")
            T.copy(A, As)
            T.copy(B, Bs)
            T.clear(acc)
            T.gemm(As, Bs, acc)
            if op == "sum":
                T.reduce_sum(acc, col, dim=0, batch=batch)
            else:
                T.reduce_max(acc, col, dim=0, batch=batch)
            T.copy(col, Y)
    return main


def k_row_reduce(N, threads):               # tile-ai/tilelang#2542
    @T.prim_func
    def main(X: T.Tensor((1, N), "float32"), Y: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=threads):
            xf = T.alloc_fragment((1, N), "float32")
            s = T.alloc_fragment((1,), "float32")
            T.copy(X, xf)
            T.reduce_sum(xf, s, dim=1)
            T.copy(s, Y)
    return main


def k_absmax_padded(H=576, BLK=768, rows=4):   # tile-ai/tilelang#2305
    @T.prim_func
    def main(X: T.Tensor((rows, H), "float32"), Y: T.Tensor((rows,), "float32")):
        with T.Kernel(rows, threads=128) as b:
            xf = T.alloc_fragment((BLK,), "float32")
            m = T.alloc_fragment((1,), "float32")
            for t in T.Parallel(BLK):
                xf[t] = T.if_then_else(t < H, X[b, T.min(t, H - 1)], 0.0)
            T.reduce_absmax(xf, m, dim=0)
            Y[b] = m[0]
    return main


def k_safe_value_tile_copy():               # tile-ai/tilelang#2543
    @T.prim_func
    def main(A: T.Tensor((60, 60), "int32"), Out: T.Tensor((64, 64), "int32")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((64, 64), "int32")
            T.annotate_safe_value({A: -99})
            T.copy(A[0:64, 0:64], S)
            for r, c in T.Parallel(64, 64):
                Out[r, c] = S[r, c]
    return main


def k_copy_then_offset_fill(lo, hi, N=64):  # tile-ai/tilelang#2698
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=N):
            S = T.alloc_shared((N,), "float32")
            T.copy(A, S)
            T.fill(S[lo:hi], -7.0)
            T.copy(S, B)
    return main


def k_partial_guard_exchange(active, threads, blocks=512):   # tile-ai/tilelang#2556
    @T.prim_func
    def main(A: T.Tensor((blocks, threads), "float32"), B: T.Tensor((blocks, threads), "float32")):
        with T.Kernel(blocks, threads=threads) as b:
            tx = T.get_thread_binding()
            S = T.alloc_shared((threads,), "float32")
            if tx < active:
                S[tx] = A[b, tx] * 2.0
                B[b, tx] = S[active - 1 - tx]
    return main


def k_loop_in_thread_if(strided, threads=64, iters=4, blocks=512):   # tile-ai/tilelang#2612
    @T.prim_func
    def main(Mask: T.Tensor((threads,), "int32"), A: T.Tensor((blocks, iters, threads), "float32"),
             Out: T.Tensor((blocks, threads), "float32")):
        with T.Kernel(blocks, threads=threads) as b:
            tx = T.get_thread_binding()
            S = T.alloc_shared((threads,), "float32")
            acc = T.alloc_var("float32")
            acc = 0.0
            cond = (tx % 4 == 0) if strided else (Mask[tx] != 0)
            if cond:
                for k in T.serial(iters):
                    S[tx] = A[b, k, tx] + acc
                    acc = acc + S[(tx + 4) % threads]
            Out[b, tx] = acc
    return main


def k_shared_roundtrip_1d(N, dtype):        # tile-ai/tilelang#2525
    @T.prim_func
    def main(A: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype)):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((N,), dtype)
            T.copy(A, S)
            T.copy(S, B)
    return main


def k_gemm_small_k(M=64, N=64, K=24):        # tile-ai/tilelang#2381
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128):
            As = T.alloc_shared((M, K), "float16")
            Bs = T.alloc_shared((K, N), "float16")
            acc = T.alloc_fragment((M, N), "float32")
            T.copy(A, As)
            T.copy(B, Bs)
            T.clear(acc)
            T.gemm(As, Bs, acc)
            T.copy(acc, C)
    return main


def k_pipelined_gemm(N=64, M=64, K=64, bK=32, threads=128, policy=T.GemmWarpPolicy.Square):
    """tile-ai/tilelang#2593 (block_N = 8 mod 16) and #2522 (FullRow, 256 rows on 256 threads)."""
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=threads):
            As = T.alloc_shared((M, bK), "float16")
            Bs = T.alloc_shared((bK, N), "float16")
            acc = T.alloc_fragment((M, N), "float32")
            T.clear(acc)
            for k in T.Pipelined(K // bK, num_stages=2):
                T.copy(A[0, k * bK], As)
                T.copy(B[k * bK, 0], Bs)
                T.gemm(As, Bs, acc, policy=policy)
            T.copy(acc, C)
    return main


def k_gemm_odd_n(N):                            # tile-ai/tilelang#2593
    return k_pipelined_gemm(N=N)


def k_gemm_fullrow_m256():                      # tile-ai/tilelang#2522
    return k_pipelined_gemm(M=256, threads=256, policy=T.GemmWarpPolicy.FullRow)


def k_rs_operand_to_shared(M=64, N=64, K=32):   # tile-ai/tilelang#2954
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
             C: T.Tensor((M, N), "float32"), Aout: T.Tensor((M, K), "float16")):
        with T.Kernel(1, threads=128):
            Ar = T.alloc_fragment((M, K), "float16")
            Ash = T.alloc_shared((M, K), "float16")
            Bs = T.alloc_shared((K, N), "float16")
            acc = T.alloc_fragment((M, N), "float32")
            T.copy(A, Ar)
            T.copy(B, Bs)
            T.clear(acc)
            T.gemm(Ar, Bs, acc)
            T.copy(Ar, Ash)
            T.copy(Ash, Aout)
            T.copy(acc, C)
    return main


def k_cumsum_subregion(dim, M=8, N=32, NBIG=48):   # tile-ai/tilelang#2523
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128):
            wide = T.alloc_shared((M, NBIG), "float32")
            T.fill(wide, 0.0)
            T.copy(A, wide[0:M, 0:N])
            T.cumsum(src=wide[0:M, 0:N], dim=dim)
            T.copy(wide[0:M, 0:N], B)
    return main


def k_atomic_add_narrow(dtype, tile, N=256):   # tile-ai/tilelang#2382
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Out: T.Tensor((N,), dtype)):
        with T.Kernel(1, threads=128):
            f = T.alloc_fragment((N,), "float32")
            T.copy(X, f)
            if tile:
                T.atomic_add(Out, f)
            else:
                for t in T.Parallel(N):
                    T.atomic_add(Out[t], f[t])
    return main


def k_fragment_if_fill():                    # tile-ai/tilelang#2307
    @T.prim_func
    def main(score: T.Tensor((16,), "float32"), out: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32):
            f = T.alloc_fragment((32,), "float32")
            for t in T.Parallel(32):
                if t < 16:
                    f[t] = score[t]
                else:
                    f[t] = T.infinity("float32")
            for t in T.Parallel(32):
                out[t] = T.if_then_else(t < 16, f[t] * 2.0, f[t])
    return main


def k_store_unaligned_column_offset():       # tile-ai/tilelang#2527
    @T.prim_func
    def main(A: T.Tensor((32, 32), "int32"), B: T.Tensor((32, 64), "int32")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((32, 32), "int32")
            T.copy(A, S)
            T.copy(S, B[0:32, 1:33])
    return main


def kernels():
    """Every kernel the tests build: (name, prim_func, pass_configs)."""
    out = [
        ("serial_frag", k_serial_fragment_store(True), None),
        ("parallel_frag", k_serial_fragment_store(False), None),
        ("extents_big_first", k_mixed_parallel_extents("big_first"), None),
        ("extents_small_first", k_mixed_parallel_extents("small_first"), None),
        ("persistent", k_persistent(), None),
        ("mod_5", k_nested_mod(32, 32, 5), None),
        ("mod_24", k_nested_mod(16, 64, 24), None),
        ("war_0", k_pipelined_war(0), None),
        ("war_1", k_pipelined_war(1), None),
        ("war_2", k_pipelined_war(2), None),
        ("war_3", k_pipelined_war(3), None),
        ("ws_one_iter_1", k_one_iter_ws_gemm(stages=1), None),
        ("ws_one_iter_2", k_one_iter_ws_gemm(stages=2), None),
        ("ws_one_iter_3", k_one_iter_ws_gemm(stages=3), None),
        ("reducer_all", k_gemv_reducer_all(), None),
        ("reducer_replicated", k_reducer_replicated_source(), None),
        ("colreduce_sum", k_gemm_colreduce_batch("sum", 2), None),
        ("colreduce_max", k_gemm_colreduce_batch("max", 4), None),
        ("rowreduce_48_64", k_row_reduce(48, 64), None),
        ("absmax", k_absmax_padded(), None),
        ("safe_value", k_safe_value_tile_copy(), None),
        ("fill_off10", k_copy_then_offset_fill(10, 16), None),
        ("fill_off0", k_copy_then_offset_fill(0, 6), None),
        ("guard48", k_partial_guard_exchange(48, 64), None),
        ("guard32", k_partial_guard_exchange(32, 64), None),
        ("loop_if_mask", k_loop_in_thread_if(False), None),
        ("loop_if_strided", k_loop_in_thread_if(True), None),
        ("roundtrip_h50", k_shared_roundtrip_1d(50, "float16"), None),
        ("roundtrip_f13", k_shared_roundtrip_1d(13, "float32"), None),
        ("gemm_n24", k_gemm_odd_n(24), NO_WS),
        ("gemm_n40", k_gemm_odd_n(40), NO_WS),
        ("fullrow_m256", k_gemm_fullrow_m256(), NO_WS),
        ("rs_to_shared", k_rs_operand_to_shared(), None),
        ("cumsum_d1", k_cumsum_subregion(1), None),
        ("cumsum_d0", k_cumsum_subregion(0), None),
        ("atomic_h", k_atomic_add_narrow("float16", False), None),
        ("atomic_bf_tile", k_atomic_add_narrow("bfloat16", True), None),
        ("frag_if", k_fragment_if_fill(), None),
        ("store_off1", k_store_unaligned_column_offset(), None),
    ]
    return out


# --------------------------------------------------------------------------------------------------
# tests
# --------------------------------------------------------------------------------------------------

@needs_gpu
@pytest.mark.parametrize("serial", [True, False])
def test_fragment_store_serial_loop_2396(serial):
    A = torch.arange(256, dtype=torch.float32).reshape(16, 16)
    B = torch.zeros(16, 16, device="cuda")
    _run(k_serial_fragment_store(serial), A.cuda(), B)
    torch.testing.assert_close(_cpu(B), A, rtol=0, atol=0)


@needs_gpu
@pytest.mark.parametrize("variant", ["big_first", "small_first"])
def test_parallel_loops_of_different_extent_2957(variant):
    A = torch.randn(256)
    C = torch.zeros(256, device="cuda")
    _run(k_mixed_parallel_extents(variant), A.cuda(), C)
    if variant == "big_first":
        ref = A + 1.0
        ref[:100] = 6.0
    else:
        ref = A + 3.0
    torch.testing.assert_close(_cpu(C), ref)


@needs_gpu
def test_persistent_domain_not_multiple_of_group_2433():
    A = torch.randn(64, 176)
    C = torch.full((64, 176), float("nan"), device="cuda")
    _run(k_persistent(), A.cuda(), C)
    torch.testing.assert_close(_cpu(C), A + 1.0)


@needs_gpu
@pytest.mark.parametrize("M,N,K", [(32, 32, 5), (16, 64, 24)])
def test_nested_modulo_index_2955(M, N, K):
    B = torch.randn(K)
    C = torch.zeros(M, N, device="cuda")
    _run(k_nested_mod(M, N, K), B.cuda(), C)
    ref = B[torch.arange(N) % K].expand(M, N)
    torch.testing.assert_close(_cpu(C), ref, rtol=0, atol=0)


@needs_gpu
@pytest.mark.parametrize("stages", [0, 1, 2, 3])
def test_pipelined_read_then_overwrite_2668(stages):
    W, NK = 32, 8
    A = torch.randint(-100, 100, (NK, W), dtype=torch.int32)
    Sinit = torch.randint(1000, 2000, (W,), dtype=torch.int32)
    Out = torch.zeros(W, dtype=torch.int32, device="cuda")
    _run(k_pipelined_war(stages), A.cuda(), Sinit.cuda(), Out)
    ref = Sinit + A[: NK - 1].sum(0)          # iteration k reads the tile copied by iteration k-1
    torch.testing.assert_close(_cpu(Out), ref.to(torch.int32), rtol=0, atol=0)


@needs_gpu
@pytest.mark.parametrize("stages", [1, 2, 3])
def test_single_iteration_pipelined_gemm_2566(stages):
    A = torch.randn(128, 64, dtype=torch.float16)
    B = torch.randn(64, 128, dtype=torch.float16)
    C = torch.zeros(128, 128, device="cuda")
    _run(k_one_iter_ws_gemm(stages=stages), A.cuda(), B.cuda(), C)
    torch.testing.assert_close(_cpu(C), A.float() @ B.float(), rtol=1e-2, atol=1e-2)


@needs_gpu
def test_reducer_replication_all_gemv_2408():
    A = torch.randn(4, 96)
    x = torch.randn(96)
    y = torch.zeros(4, device="cuda")
    _run(k_gemv_reducer_all(), A.cuda(), x.cuda(), y)
    torch.testing.assert_close(_cpu(y), A @ x, rtol=1e-4, atol=1e-4)


@needs_gpu
def test_reducer_over_replicated_fragment_pr2881():
    x = torch.randn(8)
    out = torch.zeros(1, device="cuda")
    _run(k_reducer_replicated_source(), x.cuda(), out)
    torch.testing.assert_close(_cpu(out), x.sum().reshape(1), rtol=1e-5, atol=1e-5)


@needs_gpu
@pytest.mark.parametrize("op,batch", [("sum", 2), ("max", 4)])
def test_batched_column_reduce_of_gemm_2524(op, batch):
    A = torch.randn(64, 32, dtype=torch.float16)
    B = torch.randn(32, 64, dtype=torch.float16)
    Y = torch.zeros(64, device="cuda")
    _run(k_gemm_colreduce_batch(op, batch), A.cuda(), B.cuda(), Y)
    prod = A.float() @ B.float()
    ref = prod.sum(0) if op == "sum" else prod.amax(0)
    torch.testing.assert_close(_cpu(Y), ref, rtol=1e-2, atol=5e-2)


@needs_gpu
def test_row_reduce_48_wide_on_64_threads_2542():
    X = torch.arange(1, 49, dtype=torch.float32).reshape(1, 48)
    Y = torch.zeros(1, device="cuda")
    _run(k_row_reduce(48, 64), X.cuda(), Y)
    torch.testing.assert_close(_cpu(Y), torch.tensor([1176.0]), rtol=0, atol=0)


@needs_gpu
def test_reduce_absmax_padded_row_2305():
    X = torch.randn(4, 576)
    X[1, 575] = 50.0      # the extreme sits in the last real element / the padded tail region
    X[2, 0] = -40.0
    Y = torch.zeros(4, device="cuda")
    _run(k_absmax_padded(), X.cuda(), Y)
    torch.testing.assert_close(_cpu(Y), X.abs().amax(1), rtol=0, atol=0)


@needs_gpu
def test_tile_copy_honours_safe_value_2543():
    A = torch.randint(0, 1000, (60, 60), dtype=torch.int32)
    Out = torch.zeros(64, 64, dtype=torch.int32, device="cuda")
    _run(k_safe_value_tile_copy(), A.cuda(), Out)
    ref = torch.full((64, 64), -99, dtype=torch.int32)
    ref[:60, :60] = A
    torch.testing.assert_close(_cpu(Out), ref, rtol=0, atol=0)


@needs_gpu
@pytest.mark.parametrize("lo,hi", [(10, 16), (0, 6)])
def test_copy_in_then_offset_fill_2698(lo, hi):
    A = torch.randn(64)
    B = torch.zeros(64, device="cuda")
    _run(k_copy_then_offset_fill(lo, hi), A.cuda(), B)
    ref = A.clone()
    ref[lo:hi] = -7.0
    torch.testing.assert_close(_cpu(B), ref, rtol=0, atol=0)


@needs_gpu
@pytest.mark.parametrize("active", [48, 32])      # 48: part of two warps, the `if` split around the barrier
def test_partial_thread_guard_shared_exchange_2556(active):
    blocks, threads = 512, 64
    A = torch.randn(blocks, threads)
    B = torch.zeros(blocks, threads, device="cuda")
    for _ in range(5):    # a race: run a few times over many blocks
        _run(k_partial_guard_exchange(active, threads, blocks), A.cuda(), B)
        ref = torch.zeros(blocks, threads)
        ref[:, :active] = (A[:, :active] * 2.0).flip(1)
        torch.testing.assert_close(_cpu(B), ref, rtol=0, atol=0)


@needs_gpu
@pytest.mark.parametrize("strided", [False, True])   # the loop and the `if` split around the barrier
def test_loop_inside_thread_dependent_if_2612(strided):
    threads, iters, blocks = 64, 4, 512
    tx = torch.arange(threads)
    mask = (tx % 4 == 0).to(torch.int32)            # same active set for both variants
    A = torch.randn(blocks, iters, threads)
    Out = torch.zeros(blocks, threads, device="cuda")
    for _ in range(5):
        _run(k_loop_in_thread_if(strided), mask.cuda(), A.cuda(), Out)
        acc = torch.zeros(blocks, threads)
        for k in range(iters):
            s = A[:, k, :] + acc
            acc = torch.where(mask.bool(), acc + s[:, (tx + 4) % threads], acc)
        torch.testing.assert_close(_cpu(Out), acc, rtol=1e-5, atol=1e-5)


@needs_gpu
@pytest.mark.parametrize("N,dtype", [(50, torch.float16), (13, torch.float32)])
def test_shared_roundtrip_unaligned_1d_2525(N, dtype):
    A = torch.randn(N).to(dtype)
    B = torch.zeros(N, dtype=dtype, device="cuda")
    _run(k_shared_roundtrip_1d(N, "float16" if dtype == torch.float16 else "float32"), A.cuda(), B)
    torch.testing.assert_close(_cpu(B), A, rtol=0, atol=0)


@needs_gpu
def test_gemm_k_not_multiple_of_atom_2381():
    """K=24 for fp16: either a clean compile-time rejection or the full-K product (never a dropped tail)."""
    A = torch.randn(64, 24, dtype=torch.float16)
    B = torch.randn(24, 64, dtype=torch.float16)
    try:
        kern = _build(k_gemm_small_k())
    except Exception as err:  # noqa: BLE001
        assert "K=24" in str(err) or "multiple" in str(err), err
        return
    C = torch.zeros(64, 64, device="cuda")
    kern(A.cuda(), B.cuda(), C)
    torch.cuda.synchronize()
    torch.testing.assert_close(_cpu(C), A.float() @ B.float(), rtol=1e-2, atol=1e-2)


@needs_gpu
@pytest.mark.parametrize("N", [24, 40])
def test_gemm_block_n_8_mod_16_2593(N):
    A = torch.randn(64, 64, dtype=torch.float16)
    B = torch.randn(64, N, dtype=torch.float16)
    C = torch.zeros(64, N, device="cuda")
    _run(k_gemm_odd_n(N), A.cuda(), B.cuda(), C, pass_configs=NO_WS)
    torch.testing.assert_close(_cpu(C), A.float() @ B.float(), rtol=1e-2, atol=1e-2)


@needs_gpu
def test_gemm_fullrow_two_warpgroups_along_m_2522():
    A = torch.randn(256, 64, dtype=torch.float16)
    B = torch.randn(64, 64, dtype=torch.float16)
    C = torch.zeros(256, 64, device="cuda")
    _run(k_gemm_fullrow_m256(), A.cuda(), B.cuda(), C, pass_configs=NO_WS)
    torch.testing.assert_close(_cpu(C), A.float() @ B.float(), rtol=1e-2, atol=1e-2)


@needs_gpu
def test_copy_of_register_gemm_operand_to_shared_2954():
    A = torch.randn(64, 32, dtype=torch.float16)
    B = torch.randn(32, 64, dtype=torch.float16)
    C = torch.zeros(64, 64, device="cuda")
    Aout = torch.zeros(64, 32, dtype=torch.float16, device="cuda")
    _run(k_rs_operand_to_shared(), A.cuda(), B.cuda(), C, Aout)
    torch.testing.assert_close(_cpu(Aout), A, rtol=0, atol=0)
    torch.testing.assert_close(_cpu(C), A.float() @ B.float(), rtol=1e-2, atol=1e-2)


@needs_gpu
@pytest.mark.parametrize("dim", [0, 1])
def test_cumsum_of_shared_subregion_2523(dim):
    A = torch.randn(8, 32)
    B = torch.zeros(8, 32, device="cuda")
    _run(k_cumsum_subregion(dim), A.cuda(), B)
    torch.testing.assert_close(_cpu(B), A.cumsum(dim), rtol=1e-5, atol=1e-5)


@needs_gpu
@pytest.mark.parametrize("dtype,tile", [(torch.float16, False), (torch.bfloat16, True)])
def test_atomic_add_fp32_into_16bit_2382(dtype, tile):
    X = torch.randn(256)
    Out = torch.ones(256, dtype=dtype, device="cuda")
    name = "float16" if dtype == torch.float16 else "bfloat16"
    _run(k_atomic_add_narrow(name, tile), X.cuda(), Out)
    ref = (torch.ones(256, dtype=dtype).float() + X.to(dtype).float())
    torch.testing.assert_close(_cpu(Out).float(), ref, rtol=2e-2, atol=2e-2)


@needs_gpu
def test_fragment_filled_under_if_2307():
    s = torch.randn(16)
    out = torch.zeros(32, device="cuda")
    _run(k_fragment_if_fill(), s.cuda(), out)
    ref = torch.cat([s * 2.0, torch.full((16,), float("inf"))])
    torch.testing.assert_close(_cpu(out), ref, rtol=0, atol=0)


@needs_gpu
def test_store_to_unaligned_column_offset_2527():
    A = torch.randint(-50, 50, (32, 32), dtype=torch.int32)
    B = torch.full((32, 64), 7, dtype=torch.int32, device="cuda")
    _run(k_store_unaligned_column_offset(), A.cuda(), B)
    ref = torch.full((32, 64), 7, dtype=torch.int32)
    ref[:, 1:33] = A
    torch.testing.assert_close(_cpu(B), ref, rtol=0, atol=0)
