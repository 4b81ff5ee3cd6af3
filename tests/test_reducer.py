"""Reducer epochs (T.alloc_reducer ...), TVM's thread all-reduce (T.comm_reducer) and the fp16
max fold: generated source and located errors (CPU only)."""

import warnings

import pytest

import tilelang
import tilelang.language as T


def _sum_kernel(extent=8, threads=128, seed=None, op="sum", dtype=T.float32):
    @T.prim_func
    def kernel(A: T.Tensor((extent,), dtype), B: T.Tensor((1,), dtype)):
        with T.Kernel(1, threads=threads):
            src = T.alloc_fragment((extent,), dtype)
            T.copy(A, src)
            acc = T.alloc_reducer((1,), dtype, op=op)
            if seed is None:
                T.reducer_init(acc)
            else:
                T.reducer_init(acc, seed)
            for i in T.Parallel(extent):
                T.reducer_update(acc[0], src[i])
            result = T.alloc_fragment((1,), dtype)
            T.finalize_reducer(acc, result)
            if T.get_thread_binding() == 0:
                B[0] = result[0]

    return kernel


def _source(func, baseline=False):
    """``baseline``: the whole-block plan (``tl.reducer_force_baseline``; tests/test_reducer_plans.py
    covers the narrow plans)."""
    configs = {"tl.reducer_force_baseline": True} if baseline else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tilelang.compile(func, out_idx=-1, pass_configs=configs).get_kernel_source()


def test_reducer_block_allreduce_with_replica_guard():
    src = _source(_sum_kernel(), baseline=True)
    assert "tl::AllReduce<tl::SumOp, 128, 1>::run(acc" in src
    # Parallel(8) over 128 threads: each iteration folds on one replica only (36, not 576)
    assert ">> 1) == 0)" in src or ">> 1) < 1)" in src


def test_reducer_seed_enters_once_through_thread_zero():
    src = _source(_sum_kernel(seed=100.0), baseline=True)
    assert "acc_seed" in src and "threadIdx.x) == 0" in src


def test_reducer_bitwise_and_bf16_max_identities():
    assert "tl::AllReduce<tl::BitXorOp, 64, 1>" in _source(_sum_kernel(threads=64, op="bitxor", dtype=T.int32),
                                                            baseline=True)
    src = _source(_sum_kernel(op="max", dtype=T.bfloat16), baseline=True)
    assert "tl::MaxOp" in src and "65408" in src   # -inf as bfloat16 bits


def test_reducer_rejects_float_bitwise():
    with pytest.raises(AssertionError, match="integer dtype"):
        _sum_kernel(op="bitand")


def _bad(body_kind):
    @T.prim_func
    def kernel(A: T.Tensor((8,), T.float32), B: T.Tensor((1,), T.float32)):
        with T.Kernel(1, threads=128):
            src = T.alloc_fragment((8,), T.float32)
            T.copy(A, src)
            acc = T.alloc_reducer((1,), T.float32, op="sum")
            if body_kind != "no_init":
                T.reducer_init(acc)
            if body_kind == "double":
                T.reducer_init(acc)
            for i in T.Parallel(8):
                if body_kind == "store":
                    acc[0] += src[i]
                else:
                    T.reducer_update(acc[0], src[i])
            result = T.alloc_fragment((1,), T.float32)
            if body_kind != "no_finalize":
                T.finalize_reducer(acc, result)
            if T.get_thread_binding() == 0:
                B[0] = result[0]

    return kernel


@pytest.mark.parametrize("kind,match", [
    ("no_init", "before T.reducer_init"), ("double", "double T.reducer_init"),
    ("no_finalize", "never finalized"), ("store", "illegal (store to|read of) reducer")])
def test_reducer_epoch_errors(kind, match):
    with pytest.raises(Exception, match=match):
        _source(_bad(kind))


def test_comm_reducer_thread_allreduce_shuffles():
    @T.prim_func
    def kernel(A: T.Tensor((8,), T.int8), C: T.Tensor((1,), T.int8)):
        with T.Kernel(1, threads=8):
            tk = T.get_thread_binding(0)
            v = T.alloc_local((1,), T.int8)
            v[0] = A[tk]
            Cr = T.alloc_local((1,), T.int8)
            with T.attr(T.comm_reducer(lambda x, y: x * y, [T.cast(1, T.int8)]), "reduce_scope",
                        T.reinterpret(T.uint64(0), dtype="handle")):
                T.evaluate(T.tvm_thread_allreduce(T.uint32(1), v[0], True, Cr[0], tk, dtype="handle"))
            C[0] = Cr[0]

    src = _source(kernel)
    for off in (4, 2, 1):
        assert f"tl::shfl_xor(red_buf[0], {off}, (uint)255)" in src
    assert "Cr[0] = red_buf[0];" in src


def test_comm_reducer_across_warps_uses_shared_workspace():
    @T.prim_func
    def kernel(A: T.Tensor((4, 64), T.float32), C: T.Tensor((4,), T.float32)):
        with T.Kernel(1, threads=(4, 64)):
            tn = T.get_thread_binding(0)
            tk = T.get_thread_binding(1)
            v = T.alloc_local((1,), T.float32)
            v[0] = A[tn, tk]
            Cr = T.alloc_local((1,), T.float32)
            with T.attr(T.comm_reducer(lambda x, y: x + y, [T.float32(0)]), "reduce_scope",
                        T.reinterpret(T.uint64(0), dtype="handle")):
                T.evaluate(T.tvm_thread_allreduce(T.uint32(1), v[0], True, Cr[0], tk, dtype="handle"))
            C[tn] = Cr[0]

    src = _source(kernel)
    assert "tl::shfl_xor(red_buf[0], 16," in src and "tl::shfl_xor(red_buf[0], 4," in src
    assert "__syncthreads()" in src   # the cross-warp half goes through shared memory


def test_fp16_reduce_max_uses_hmax():
    @T.prim_func
    def kernel(A: T.Tensor((64,), T.float16), B: T.Tensor((1,), T.float16)):
        with T.Kernel(1, threads=32):
            frag = T.alloc_fragment((64,), T.float16)
            out = T.alloc_fragment((1,), T.float16)
            T.copy(A, frag)
            T.reduce_max(frag, out, dim=0)
            T.copy(out, B)

    src = _source(kernel)
    assert "__hmax(" in src and "__hmax_nan" not in src
