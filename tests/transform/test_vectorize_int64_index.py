"""The T.Parallel vectoriser (transform/vectorize_parallel.py) on 64-bit indices: a tensor with
more than 2**31 elements is indexed in int64, and its element-wise stores still become 16-byte
vector stores (upstream's test_tilelang_language_int64.py::test_fill_static compiled a TL0003
"mismatched types. int64 vs. int32" here)."""

import tilelang
import tilelang.language as T
from tilelang.jit import nvcc

try:
    nvcc.find_nvcc()
    HAVE_NVCC = True
except Exception:  # noqa: BLE001
    HAVE_NVCC = False


def _fill(n, block_n=512):
    @T.prim_func
    def main(x: T.Tensor[n, T.bfloat16]):
        with T.Kernel(T.ceildiv(n, block_n), threads=128) as bx:
            for i in T.Parallel(block_n):
                x[bx * block_n + i] = 1.0

    return main


def test_int64_indexed_fill_is_one_vector_store_per_thread():
    art = tilelang.lower(_fill(2**32), "sm_90a")
    body = art.source[art.source.index('extern "C" __global__'):]
    assert "int64_t" in body                      # the index is 64-bit
    # 512 iterations over 128 threads: 4 bf16 lanes per thread (the vector width that leaves no
    # thread idle, as upstream chooses), one 8-byte store
    assert "*(nv_bfloat164*)(x + " in body and "for (int v" not in body
    if HAVE_NVCC:
        assert nvcc.compile_cubin(art.source, art.arch, art.compile_flags)[:4] == b"\x7fELF"


def test_int32_indexed_fill_still_vectorised():
    art = tilelang.lower(_fill(2**20), "sm_90a")
    body = art.source[art.source.index('extern "C" __global__'):]
    assert "int64_t" not in body and "*(nv_bfloat164*)(x + " in body
