"""A T.copy between two fragments whose layouts differ converts through shared memory
(``Layouts.conversions``, ``lower_reduce.convert_layout``) instead of stopping at TL0201.

The case that needs it: upstream's flash-attention forward with block_M = 64 on 256 threads. Two
warpgroups cannot split 64 rows, so they split the score tile's columns (``tl::Warpgroups<1, 2>``),
while the P V gemm needs every row of P whole in both warpgroups (its register A operand is
replicated over the N warpgroups): ``T.copy(acc_s, acc_s_cast)`` moves P through a shared
workspace between two barriers. Upstream's compiler stops there with a layout conflict. GPU side:
tests/gpu/test_user_configs_gpu.py."""

import importlib.util
import re
from pathlib import Path

import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang.layout.axes import wgmma_accumulator, wgmma_operand_a

from host_cuda import NVCC

FA = Path("/work/shared/conformance/upstream/examples/flash_attention/example_mha_fwd_bhsd.py")


def two_gemms(threads=256, M=64, N=64, D=128):
    """S = Q K^T into a float32 fragment, P = S cast to float16 into a second fragment, O = P V:
    the attention forward's two gemms without the softmax."""

    @T.prim_func
    def main(Q: T.Tensor((M, D), "float16"), K: T.Tensor((N, D), "float16"), V: T.Tensor((N, D), "float16"),
             O: T.Tensor((M, D), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            Q_s = T.alloc_shared((M, D), "float16")
            K_s = T.alloc_shared((N, D), "float16")
            V_s = T.alloc_shared((N, D), "float16")
            S = T.alloc_fragment((M, N), "float32")
            P = T.alloc_fragment((M, N), "float16")
            acc = T.alloc_fragment((M, D), "float32")
            T.copy(Q, Q_s)
            T.copy(K, K_s)
            T.copy(V, V_s)
            T.gemm(Q_s, K_s, S, transpose_B=True, clear_accum=True)
            T.copy(S, P)
            T.gemm(P, V_s, acc, clear_accum=True)
            T.copy(acc, O)

    return main


def test_the_workspace_mapping_moves_every_element_once():
    """What the lowering does, on the layouts' own tables: each source element is stored once (its
    one replica) at its row-major position, every destination register finds its element there,
    and each warpgroup reads elements the other one wrote (why registers alone cannot do it)."""
    src = wgmma_accumulator(64, 64, 1, 256, warpgroups_n=2)
    dst = wgmma_operand_a(64, 64, 1, 256, warpgroups_n=2)
    assert not src.same_as(dst) and src.replication == 1 and dst.replication == 2
    writer = np.full(64 * 64, -1)
    for t in range(256):
        assert (writer[src.owners()[t]] == -1).all()          # no element stored twice
        writer[src.owners()[t]] = t
    assert (writer >= 0).all()                                # every element stored
    for wg in (0, 1):
        readers = range(128 * wg, 128 * wg + 128)
        from_other = {int(writer[f]) // 128 for t in readers for f in dst.owners()[t]} - {wg}
        assert from_other == {1 - wg}


def test_two_gemm_kernel_converts_through_shared_memory():
    src = tilelang.lower(two_gemms(), "sm_90a").source
    assert "tl::Warpgroups<1, 2>" in src and "wgmma_gemm_rs<64, 128, 64, tl::Warpgroups<1, 2>" in src
    body = src[src.index("wgmma_gemm_ss"):src.index("wgmma_gemm_rs")]
    # a barrier, the 16 stores of S (one replica), a barrier, the 32 loads of P
    assert re.search(r"__syncthreads\(\);\s*(?:int \w+ = [^;]*;\s*)*#pragma unroll\s*for \(int v\w* = 0; v\w* < 16;"
                     r"[^}]*\(\(half\)S\[", body), body
    assert re.search(r"__syncthreads\(\);\s*#pragma unroll\s*for \(int (\w+) = 0; \1 < 32;[^}]*P\[\1\] = "
                     r"\(\(half\*\)smem\)\[", body), body


@pytest.mark.skipif(not NVCC, reason="nvcc not found")
def test_it_compiles_with_nvcc():
    kernel = tilelang.compile(two_gemms(), target="sm_90a")
    info = kernel.ptxas_info()
    assert info.spill_stores == 0


def test_equal_layouts_still_copy_in_registers():
    """The attention forward at block_M = 128 on 256 threads: P keeps S's layout, no workspace."""
    src = tilelang.lower(two_gemms(M=128), "sm_90a").source
    body = src[src.index("wgmma_gemm_ss"):src.index("wgmma_gemm_rs")]
    body = body[body.index(";"):]          # past the first gemm's own operands
    assert "smem)[" not in body and "__syncthreads" not in body


@pytest.mark.skipif(not FA.exists(), reason="upstream's examples are not checked out")
@pytest.mark.parametrize("block_N,stages", [(64, 1), (128, 2)])
def test_upstream_attention_with_64_rows_on_256_threads_compiles(block_N, stages):
    spec = importlib.util.spec_from_file_location("example_mha_fwd_bhsd_conversion", FA)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    flashattn = getattr(mod.flashattn, "_target", mod.flashattn)
    kernel = flashattn(2, 4, 1024, 1024, 128, True, block_M=64, block_N=block_N, num_stages=stages, threads=256)
    assert "tl::Warpgroups<1, 2>" in kernel.get_kernel_source()
