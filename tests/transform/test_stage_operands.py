"""A ``T.gemm`` whose B is a whole register fragment (upstream's kda ``chunk_bwd_intra``) is compiled
as if the fragment were copied to shared memory right before the gemm
(``transform/stage_operands.py``): it compiles for sm_90a and sm_80 instead of stopping at TL0002,
consecutive gemms on the same fragment share one copy, and the checker no longer reports it."""

import re

import tilelang
import tilelang.language as T
from tilelang import analysis
from tilelang.transform import stage_operands


def kernel(second_gemm=True, b_slice=False, M=64, N=64, K=64):
    @T.prim_func
    def f(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float32),
          D: T.Tensor((M, N), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            a = T.alloc_shared((M, K), T.float16)
            bs = T.alloc_shared((K, N), T.float16)
            bf = T.alloc_fragment((K, N), T.float16)
            c = T.alloc_fragment((M, N), T.float32)
            d = T.alloc_fragment((M, N), T.float32)
            T.copy(A, a)
            T.copy(B, bs)
            for i, j in T.Parallel(K, N):
                bf[i, j] = bs[i, j] * 2.0
            T.clear(c)
            T.clear(d)
            if b_slice:
                T.gemm(a[:, 0:32], bf[0:32, :], c)
            else:
                T.gemm(a, bf, c)
            if second_gemm:
                T.gemm(a, bf, d)
            T.copy(c, C)
            T.copy(d, D)

    return f


def _body(src):
    return src[src.rindex("__global__"):]


def test_the_fragment_b_is_read_from_a_shared_copy():
    for arch, call in (("sm_90a", "tl::wgmma_gemm_ss<"), ("sm_80", "tl::gemm_ss<")):
        body = _body(tilelang.compile(kernel(), target=f"cuda -arch={arch}").get_kernel_source())
        gemms = [line for line in body.splitlines() if call in line]
        assert len(gemms) == 2, arch
        b_ptrs = {re.search(r"\), \(&\(\(\(half\*\)smem\)\[(\d+)\]\)\)", g).group(1) for g in gemms}
        assert len(b_ptrs) == 1, arch        # both gemms read the one copy
        before = body[:body.index(call)]
        # the fragment goes to shared memory (16-byte stores from bf), then a barrier, then the gemms
        store = before.rindex("= *(uint4*)(bf + ")
        assert "__syncthreads();" in before[store:], arch


def test_consecutive_gemms_share_one_copy_and_the_func_is_kept_without_fragment_b():
    text = stage_operands.stage(kernel()).script()
    # one allocation, one copy bf -> bf_smem, and both gemms reading bf_smem
    assert len(re.findall(r"T\.tl_copy\(T\.tl_region\(bf\[0, 0\], 1, 64, 64\), T\.tl_region\(bf_smem\[0, 0\], 2", text)) == 1
    assert len(re.findall(r"T\.tl_gemm\(T\.tl_region\(a\[0, 0\], 1, 64, 64\), T\.tl_region\(bf_smem\[0, 0\], 1", text)) == 2

    @T.prim_func
    def plain(A: T.Tensor((64, 64), T.float16), C: T.Tensor((64, 64), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            a = T.alloc_shared((64, 64), T.float16)
            c = T.alloc_fragment((64, 64), T.float32)
            T.copy(A, a)
            T.clear(c)
            T.gemm(a, a, c)
            T.copy(c, C)

    assert stage_operands.stage(plain).same_as(plain)


def test_the_checker_accepts_a_whole_fragment_b_and_still_names_a_slice():
    assert not [d for d in analysis.check(kernel()) if d.code == "TL0002"]
    found = [d for d in analysis.check(kernel(second_gemm=False, b_slice=True)) if d.code == "TL0002"]
    assert found and "reads B from shared memory" in found[0].message and "'bf'" in found[0].message


def test_the_hover_lists_the_copy_at_the_gemm_line():
    from tilelang.analysis.summary import summarize

    buffers = summarize(kernel(), "sm_90a")["buffers"]
    line = next(i for i, text in enumerate(open(__file__).read().splitlines(), 1) if "T.gemm(a, bf, c)" in text)
    assert buffers["bf_smem"]["scope"] == "shared.dyn" and buffers["bf_smem"]["bytes"] == 64 * 64 * 2
    assert buffers["bf_smem"]["line"] == line
