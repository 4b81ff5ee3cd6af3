"""Reducer epochs and TVM's thread all-reduce against torch (the kernels tests/test_reducer.py
checks on the CPU)."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tilelang  # noqa: E402
import tilelang.language as T  # noqa: E402
import test_reducer as tr  # noqa: E402


@pytest.mark.parametrize("seed", [None, 100.0])
def test_reducer_sum_counts_each_iteration_once(seed):
    k = tilelang.compile(tr._sum_kernel(seed=seed), out_idx=-1)
    a = torch.arange(1, 9, dtype=torch.float32, device="cuda")
    expect = a.sum() + (seed or 0.0)
    torch.testing.assert_close(k(a), expect.reshape(1), atol=0, rtol=0)


def test_reducer_row_max_across_serial_tiles():
    M, K, BK = 32, 512, 128

    @T.prim_func
    def kernel(A: T.Tensor((M, K), T.float32), B: T.Tensor((M,), T.float32)):
        with T.Kernel(1, threads=128):
            acc = T.alloc_reducer((M,), T.float32, op="max")
            T.reducer_init(acc)
            a = T.alloc_fragment((M, BK), T.float32)
            for kt in T.serial(K // BK):
                T.copy(A[0, kt * BK], a)
                for i, k in T.Parallel(M, BK):
                    T.reducer_update(acc[i], a[i, k])
            out = T.alloc_fragment((M,), T.float32)
            T.finalize_reducer(acc, out)
            T.copy(out, B)

    a = torch.randn(M, K, device="cuda")
    torch.testing.assert_close(tilelang.compile(kernel, out_idx=-1)(a), a.max(1).values, atol=0, rtol=0)


def test_comm_reducer_product_over_threads():
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

    a = torch.randn(4, 64, device="cuda")
    torch.testing.assert_close(tilelang.compile(kernel, out_idx=-1)(a), a.sum(1), rtol=1e-5, atol=1e-4)
