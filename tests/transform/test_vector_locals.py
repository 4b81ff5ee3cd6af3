"""A local variable declared inside ``T.vectorized`` gets one value per lane (the loop is unrolled;
apache-tvm's vectorizer would keep one element for every lane)."""

import re

import tilelang
import tilelang.language as T


def test_vectorized_loop_with_a_local_reads_each_lane():
    @T.prim_func
    def main(C: T.Tensor((4, 2), "float16"), A: T.Tensor((4, 2), "float16")):
        with T.Kernel(1, threads=1):
            for i in T.serial(4):
                for j in T.vectorized(2):
                    v = A[i, j]
                    C[i, j] = v

    src = tilelang.compile(main, target="sm_90a").get_kernel_source()
    assert "make_half2" not in src
    assert re.search(r"\bC\[\(i \* 2\)\] = ", src) and re.search(r"\bC\[\(\(i \* 2\) \+ 1\)\] = ", src)


def test_vectorized_loop_without_locals_stays_vectorized():
    @T.prim_func
    def main(C: T.Tensor((4, 2), "float16"), A: T.Tensor((4, 2), "float16")):
        with T.Kernel(1, threads=1):
            for i in T.serial(4):
                for j in T.vectorized(2):
                    C[i, j] = A[i, j]

    src = tilelang.compile(main, target="sm_90a").get_kernel_source()
    assert "*(uint1*)(C +" in src or "*(half2*)(C +" in src


def test_a_pipelined_loop_that_never_runs_is_dropped():
    K = 0

    @T.prim_func
    def main(A: T.Tensor((256, K), "float16"), B: T.Tensor((K, 256), "float16"), C: T.Tensor((256, 256), "float16")):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            A_shared = T.alloc_shared((128, 32), "float16")
            B_shared = T.alloc_shared((32, 128), "float16")
            C_local = T.alloc_fragment((128, 128), "float32")
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, 32), num_stages=2):
                T.copy(A[by * 128, k * 32], A_shared)
                T.copy(B[k * 32, bx * 128], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * 128, bx * 128])

    src = tilelang.compile(main, target="sm_90a").get_kernel_source()
    body = src[src.index("main_kernel("):]
    assert not re.search(r"wgmma|gemm|tma_load|cp_async|\bA\[", body)   # no K loop left
    assert re.search(r"\bC\[|\(C \+", body)                                              # C gets the cleared tile


def test_a_single_trip_loop_from_a_variable_start_becomes_its_body():
    @T.prim_func
    def main(A: T.Tensor((1024,), "float32")):
        with T.Kernel(64) as bx:
            for i in T.serial(bx, bx + 1):
                A[bx] = T.cast(i, "float32")

    src = tilelang.compile(main, target="sm_90a").get_kernel_source()
    assert "A[((int)blockIdx.x)] = ((float)((int)blockIdx.x));" in src and "for (" not in src
