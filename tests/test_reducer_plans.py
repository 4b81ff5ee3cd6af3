"""Narrow reducer plans (layout_inference.plan_reducer + lower_reduce): the reducer takes its update
loop's layout with the reduced dimensions dropped, every replica of the loop runs its updates,
and T.finalize_reducer all-reduces only the threads that hold partials of one element (none:
LocalComplete); 16-bit single-site epochs split each partial into two lanes (``_pk``). CPU only:
generated source (tilelang.compile also runs nvcc on it)."""

import re
import warnings

import pytest

import tilelang
import tilelang.language as T

BASELINE = {"tl.reducer_force_baseline": True}


def _src(func, configs=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tilelang.compile(func, out_idx=-1, pass_configs=configs).get_kernel_source()


def _scalar(extent=8, threads=128, seed=None, value=None):
    @T.prim_func
    def kernel(A: T.Tensor((extent,), T.float32), B: T.Tensor((1,), T.float32)):
        with T.Kernel(1, threads=threads):
            src = T.alloc_fragment((extent,), T.float32)
            T.copy(A, src)
            acc = T.alloc_reducer((1,), T.float32, op="sum")
            if seed is None:
                T.reducer_init(acc)
            else:
                T.reducer_init(acc, seed)
            for i in T.Parallel(extent):
                if value is None:
                    T.reducer_update(acc[0], src[i])
                else:
                    T.reducer_update(acc[0], src[i] * T.cast(T.get_thread_binding(), T.float32))
            result = T.alloc_fragment((1,), T.float32)
            T.finalize_reducer(acc, result)
            if T.get_thread_binding() == 0:
                B[0] = result[0]

    return kernel


def _rowsum(M, K, threads, dtype, op="sum"):
    @T.prim_func
    def kernel(A: T.Tensor((M, K), dtype), B: T.Tensor((M,), dtype)):
        with T.Kernel(1, threads=threads):
            src = T.alloc_fragment((M, K), dtype)
            T.copy(A, src)
            acc = T.alloc_reducer((M,), dtype, op=op)
            T.reducer_init(acc)
            for i, k in T.Parallel(M, K):
                T.reducer_update(acc[i], src[i, k])
            result = T.alloc_fragment((M,), dtype)
            T.finalize_reducer(acc, result)
            T.copy(result, B)

    return kernel


def _body(src):
    """The kernel, with the ``_ptr`` suffix of local array names (there or not by kernel) dropped."""
    return re.sub(r"\b(\w+)_ptr\b", r"\1", src[src.index("__global__ void __launch_bounds__"):])


def test_scalar_sum_reduces_only_the_threads_of_one_element():
    src = _body(_src(_scalar()))
    assert "smem" not in src                   # an in-warp group: shuffles, no workspace
    # src is 2 threads x 4 registers, replicated 64 times: each replica group sums on its own
    assert "tl::AllReduce<tl::SumOp, 2, 1>::run(acc" in src
    assert "SumOp, 128" not in src
    assert ">> 1) == 0)" not in src            # no replica guard: every replica folds its partial


def test_force_baseline_keeps_the_whole_block_plan():
    src = _body(_src(_scalar(), BASELINE))
    assert "tl::AllReduce<tl::SumOp, 128, 1>::run(acc" in src
    assert ">> 1) == 0)" in src


def test_seed_is_combined_once_after_the_collective():
    src = _body(_src(_scalar(seed=100.0)))
    assert re.search(r"acc_seed(\[0\])? = 0x1.9p\+6f", src)
    assert re.search(r"tl::AllReduce<tl::SumOp, 2, 1>::run\(acc(\[0\])?\) \+ acc_seed(\[0\])?\);", src)


def test_thread_dependent_contribution_falls_back_to_whole_block():
    src = _body(_src(_scalar(value=True)))
    assert "tl::AllReduce<tl::SumOp, 128, 1>" in src


def test_row_reduction_fp16_is_packed_and_narrow():
    src = _body(_src(_rowsum(32, 64, 128, T.float16)))
    assert "half acc_pk[4];" in src            # two lanes for each of the 2 rows a thread holds
    assert "acc_pk[(((v_1 >> 3) * 2) + (v_1 & 1))] = (acc_pk[" in src    # lane: parity of k
    assert "tl::AllReduce<tl::SumOp, 8, 1>::run((acc_pk[(v_2 * 2)] + acc_pk[((v_2 * 2) + 1)])" in src
    # the replicated destination reads the rows through shared memory, one writer per row
    assert "if ((((int)threadIdx.x) % 8) == 0) {" in src and src.count("__syncthreads();") == 2


def test_fp32_row_reduction_is_not_packed():
    src = _body(_src(_rowsum(32, 64, 128, T.float32)))
    assert "_pk" not in src and "tl::AllReduce<tl::SumOp, 16, 1>" in src


def test_bf16_max_is_packed():
    src = _body(_src(_rowsum(32, 64, 128, T.bfloat16, op="max")))
    assert "acc_pk" in src and "tl::AllReduce<tl::MaxOp, 8, 1>" in src


def test_local_complete_needs_no_collective():
    @T.prim_func
    def kernel(A: T.Tensor((8, 16), T.float32), B: T.Tensor((8,), T.float32)):
        with T.Kernel(1, threads=128):
            src = T.alloc_fragment((8, 16), T.float32)
            T.copy(A, src)
            acc = T.alloc_reducer((8,), T.float32, op="sum")
            T.reducer_init(acc, 5.0)
            for i in T.Parallel(8):
                for k in T.serial(16):
                    T.reducer_update(acc[i], src[i, k])
            result = T.alloc_fragment((8,), T.float32)
            T.finalize_reducer(acc, result)
            T.copy(result, B)

    src = _body(_src(kernel))
    assert "AllReduce" not in src
    assert re.search(r"\(acc\[v_2\] \+ acc_seed(\[0\])?\)", src)


def test_sites_with_different_layouts_keep_the_whole_block_plan():
    @T.prim_func
    def kernel(A: T.Tensor((8,), T.float32), B: T.Tensor((16,), T.float32), C: T.Tensor((1,), T.float32)):
        with T.Kernel(1, threads=128):
            a = T.alloc_fragment((8,), T.float32)
            b = T.alloc_fragment((16,), T.float32)
            T.copy(A, a)
            T.copy(B, b)
            acc = T.alloc_reducer((1,), T.float32, op="sum")
            T.reducer_init(acc)
            for i in T.Parallel(8):
                T.reducer_update(acc[0], a[i])
            for i in T.Parallel(16):
                T.reducer_update(acc[0], b[i])
            result = T.alloc_fragment((1,), T.float32)
            T.finalize_reducer(acc, result)
            if T.get_thread_binding() == 0:
                C[0] = result[0]

    src = _body(_src(kernel))
    assert "tl::AllReduce<tl::SumOp, 128, 1>" in src


def _legacy_gemv(block_M=128, block_N=128, threads=256):
    M = N = 1024

    @T.prim_func
    def kernel(a: T.Tensor((M, N), T.float16), x: T.Tensor((N,), T.float16), o: T.Tensor((M,), T.float16)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bm:
            acc = T.alloc_reducer(block_M, T.float32, replication="all")
            T.clear(acc)
            for kn in T.Pipelined(T.ceildiv(N, block_N), num_stages=2):
                a_s = T.alloc_shared((block_M, block_N), T.float16)
                T.copy(a[bm * block_M, kn * block_N], a_s)
                a_f = T.alloc_fragment((block_M, block_N), T.float16)
                T.copy(a_s, a_f)
                x_f = T.alloc_fragment(block_N, T.float16)
                T.copy(x[kn * block_N], x_f)
                for i, j in T.Parallel(block_M, block_N):
                    acc[i] += a_f[i, j] * x_f[j]
            T.finalize_reducer(acc)
            T.copy(acc, o[bm * block_M])

    return kernel


def test_older_form_gemv_reduces_within_warps():
    src = _body(_src(_legacy_gemv(), {"tl.disable_tma_lower": True, "tl.disable_warp_specialized": True}))
    # 8 rows per thread, 16 threads per row: 8 in-warp all-reduces instead of 128 block-wide ones
    assert src.count("tl::AllReduce<tl::SumOp, 16, 1>::run(acc[") == 1
    assert "float acc[8];" in src and "SumOp, 256" not in src


def test_older_form_with_a_replicated_loop_guards_the_replicas():
    @T.prim_func
    def kernel(A: T.Tensor((4, 64), T.float32), B: T.Tensor((4, 4), T.float32)):
        with T.Kernel(1, threads=128):
            src = T.alloc_fragment((4, 64), T.float32)
            T.copy(A, src)
            acc = T.alloc_reducer((4, 4), T.float32, replication="all")
            T.clear(acc)
            for i in T.serial(4):
                for j in T.serial(4):
                    for k in T.Parallel(64):   # 64 iterations on 128 threads: two replicas
                        acc[i, j] += src[i, k] * src[j, k]
            T.finalize_reducer(acc)
            T.copy(acc, B)

    src = _body(_src(kernel))
    # acc[i, j] is not indexed by the loop: the whole-block plan, each iteration on one replica
    assert "tl::AllReduce<tl::SumOp, 128, 1>" in src
    assert "if ((((int)threadIdx.x) >> 6) == 0) {" in src


@pytest.mark.parametrize("perm", [False, True])
def test_permuted_and_unit_dim_indices(perm):
    @T.prim_func
    def permuted(A: T.Tensor((8, 16), T.float32), B: T.Tensor((16, 8), T.float32)):
        with T.Kernel(1, threads=128):
            src = T.alloc_fragment((8, 16), T.float32)
            T.copy(A, src)
            acc = T.alloc_reducer((16, 8), T.float32, op="sum")
            T.reducer_init(acc)
            for i, j in T.Parallel(8, 16):
                T.reducer_update(acc[j, i], src[i, j])
            result = T.alloc_fragment((16, 8), T.float32)
            T.finalize_reducer(acc, result)
            T.copy(result, B)

    @T.prim_func
    def unit(A: T.Tensor((16, 16), T.float32), B: T.Tensor((1, 16), T.float32)):
        with T.Kernel(1, threads=128):
            src = T.alloc_fragment((16, 16), T.float32)
            T.copy(A, src)
            acc = T.alloc_reducer((1, 16), T.float32, op="sum")
            T.reducer_init(acc)
            for i, k in T.Parallel(16, 16):
                T.reducer_update(acc[0, i], src[i, k])
            result = T.alloc_fragment((1, 16), T.float32)
            T.finalize_reducer(acc, result)
            T.copy(result, B)

    src = _body(_src(permuted if perm else unit))
    if perm:
        assert "AllReduce" not in src
    else:
        assert "tl::AllReduce<tl::SumOp, 4, 1>" in src and "SumOp, 128" not in src


def _older_rowsum(batch=1, block_M=128, threads=256):
    @T.prim_func
    def kernel(A: T.Tensor((block_M, 64), T.float32), B: T.Tensor((block_M,), T.float32)):
        with T.Kernel(1, threads=threads):
            acc = T.alloc_reducer(block_M, T.float32, op="sum", replication="all")
            T.clear(acc)
            a_f = T.alloc_fragment((block_M, 64), T.float32)
            T.copy(A, a_f)
            for i, j in T.Parallel(block_M, 64):
                acc[i] += a_f[i, j]
            T.finalize_reducer(acc, batch=batch)
            T.copy(acc, B)

    return kernel


def test_batched_whole_block_finalize_shares_barriers():
    src = _body(_src(_older_rowsum(batch=4), BASELINE))
    assert "tl::AllReduceBatch<tl::SumOp, 256, 1, 4, 256>::run_batch((&(acc[(v_2 * 4)]))" in src
    # the narrow plan's collective stays inside a warp: nothing to batch
    src = _body(_src(_older_rowsum(batch=4)))
    assert "run_batch" not in src and "tl::AllReduce<tl::SumOp, 16, 1>" in src


@pytest.mark.parametrize("batch,match", [(256, "exceeds total output elements"), (3, "must evenly divide")])
def test_batch_is_checked(batch, match):
    with pytest.raises(tilelang.TileLangCompileError, match=match):
        _src(_older_rowsum(batch=batch), BASELINE)
    with pytest.raises(ValueError, match="batch must be >= 1"):
        _older_rowsum(batch=0)


def test_reducer_without_replication_or_epoch_is_the_older_form():
    @T.prim_func
    def kernel(A: T.Tensor((8,), T.float32), B: T.Tensor((1,), T.float32)):
        with T.Kernel(1, threads=128):
            src = T.alloc_fragment((8,), T.float32)
            T.copy(A, src)
            total = T.alloc_reducer((1,), T.float32)
            T.clear(total)
            for i in T.Parallel(8):
                total[0] += src[i]
            T.finalize_reducer(total)
            if T.get_thread_binding() == 0:
                B[0] = total[0]

    src = _body(_src(kernel))
    assert re.search(r"tl::AllReduce<tl::SumOp, 2, 1>::run\(total(\[0\])?\);", src)


def test_thread_dependent_condition_falls_back_to_whole_block():
    @T.prim_func
    def kernel(A: T.Tensor((8,), T.float32), B: T.Tensor((1,), T.float32)):
        with T.Kernel(1, threads=128):
            src = T.alloc_fragment((8,), T.float32)
            T.copy(A, src)
            acc = T.alloc_reducer((1,), T.float32, op="sum")
            T.reducer_init(acc)
            for i in T.Parallel(8):
                if T.get_thread_binding() < 64:
                    T.reducer_update(acc[0], src[i])
            result = T.alloc_fragment((1,), T.float32)
            T.finalize_reducer(acc, result)
            if T.get_thread_binding() == 0:
                B[0] = result[0]

    assert "tl::AllReduce<tl::SumOp, 128, 1>" in _body(_src(kernel))
