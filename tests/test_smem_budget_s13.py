"""Plans stay within the shared-memory budget (session 13, issue 18/20: upstream's MLA decode).

The lowering carves the cross-warp reductions' workspaces after every plan has been made: a
workspace that would take the block over the budget takes the bytes of an earlier one of the
same threads instead (each exchange writes after a barrier and reads before the next one), and
where the kernel still goes over, ``engine.pipeline`` plans again: leaving room for the
workspaces, then the epilogue as written, then wgmma warpgroups splitting M only (the static
check, TL0501, counts that last plan too). With warpgroups splitting N, upstream's MLA decode
kernel (block_H = 64 on 256 threads) fits: 224 KiB of tiles, 128 bytes of mbarriers, one 2 KiB
workspace for both the row max and the row sum.
"""

import re

import tilelang
import tilelang.language as T
from tilelang import targets

BUDGET = targets.smem_per_block("sm_90a")
SPLIT_N = {"tl.enable_wgmma_split_n": True}

from test_smem_plan_fit import attention_rows  # noqa: E402  (MLA decoding's shape of kernel)


def _exchange_offsets(src):
    """The float offsets of the batched cross-warp exchanges' stores, in order."""
    return [int(x) for x in re.findall(
        r"\(\(float\*\)smem\)\[\(\(\(u_\d+ \* 256\) \+ \(\(int\)threadIdx\.x\)\) \+ (\d+)\)\] = \w+\[u_\d+\];", src)]


def test_split_n_mla_decode_fits_with_one_workspace_for_both_reductions():
    k = tilelang.compile(attention_rows(512), target="cuda -arch=sm_90a", pass_configs=SPLIT_N)
    src = k.get_kernel_source()
    assert "tl::Warpgroups<1, 2>" in src
    # 224 KiB of tiles (O on Q's bytes), the mbarriers (128-byte aligned), one 2 KiB workspace:
    # the row sum's exchange takes the row max's bytes (a fresh 2 KiB would make 232576 bytes)
    assert k.artifact.dynamic_smem == 224 * 1024 + 128 + 2 * 256 * 4 <= BUDGET
    offsets = _exchange_offsets(src)
    assert len(offsets) == 2 and offsets[0] == offsets[1]


def test_workspaces_keep_their_own_bytes_where_there_is_room():
    k = tilelang.compile(attention_rows(256), target="cuda -arch=sm_90a", pass_configs=SPLIT_N)
    offsets = _exchange_offsets(k.get_kernel_source())
    assert len(offsets) == 2 and offsets[1] - offsets[0] == 2 * 256


def gemm_between_small_tiles(pad=106560, M=64, N=64, K=64):
    """A 64 x 64 gemm on 256 threads (wgmma only with warpgroups splitting N) whose operand tiles
    sit between small buffers: their 1024-byte alignment on wgmma costs 1792 bytes more than
    mma.sync's 128, which with ``pad`` halves of other tiles is past the budget."""

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((N, K), "float16"), X: T.Tensor((512,), "float16"),
             P: T.Tensor((pad,), "float16"), C: T.Tensor((M, N), "float32"), Y: T.Tensor((pad,), "float16"),
             Z: T.Tensor((1088,), "float16")):
        with T.Kernel(1, threads=256) as bx:
            P_s = T.alloc_shared((pad,), "float16")
            X_s = T.alloc_shared((512,), "float16")
            A_s = T.alloc_shared((M, K), "float16")
            X2_s = T.alloc_shared((576,), "float16")
            B_s = T.alloc_shared((N, K), "float16")
            acc = T.alloc_fragment((M, N), "float32")
            T.copy(P, P_s)
            T.copy(X, X_s)
            T.copy(Z[0:576], X2_s)
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.gemm(A_s, B_s, acc, transpose_B=True, clear_accum=True)
            T.copy(acc, C)
            T.copy(X_s, Z[0:512])
            T.copy(X2_s, Z[512:1088])
            T.copy(P_s, Y)

    return main


def test_a_split_n_plan_over_the_budget_falls_back_to_the_m_only_plan():
    # with room, the gemm takes wgmma with warpgroups splitting N
    roomy = tilelang.compile(gemm_between_small_tiles(8192), target="cuda -arch=sm_90a", pass_configs=SPLIT_N)
    assert "tl::Warpgroups<1, 2>" in roomy.get_kernel_source()
    # near the budget the N-split plan needs 233472 bytes: no TL0501, the kernel keeps mma.sync
    # (231680 bytes) as without the option
    tight = tilelang.compile(gemm_between_small_tiles(), target="cuda -arch=sm_90a", pass_configs=SPLIT_N)
    plain = tilelang.compile(gemm_between_small_tiles(), target="cuda -arch=sm_90a")
    assert tight.artifact.dynamic_smem == plain.artifact.dynamic_smem == 231680 <= BUDGET
    assert "wgmma" not in tight.get_kernel_source()
    assert tight.get_kernel_source() == plain.get_kernel_source()


def test_a_reserve_leaves_room_for_the_workspaces():
    # the Lowerer's plans (here: the persistent grid, the next tile's heads with bytes of their
    # own) are made against the budget less the reserve the pipeline learnt from a first lowering
    from tilelang.transform.kernel import analyze_kernel as analyze
    from tilelang.transform.layout_inference import infer_layouts
    from tilelang.transform.lower_tile_ops import Lowerer

    func = attention_rows(512)
    info = analyze(func)
    layouts = infer_layouts(info, "sm_90a", SPLIT_N)
    free = Lowerer(info, layouts, SPLIT_N)
    assert free.budget == BUDGET and free.plan_bytes == free.smem_bytes
    tight = Lowerer(info, layouts, SPLIT_N, reserve=BUDGET - free.smem_bytes + 1)
    assert tight.budget == free.smem_bytes - 1
    assert free.ws.persistent is not None
    assert tight.ws.persistent is None and "bytes of shared memory" in tight.persistent_why


def test_grouped_gemm_on_256_threads_takes_wgmma_without_warp_specialisation():
    # upstream's grouped GEMM at 64x128 tiles on 256 threads: wgmma with the warpgroups splitting
    # N (the default since session 13), still the cp.async pipeline (its loads are addressed by
    # values computed from the batch tables: tests/test_ws_computed_coords.py)
    from test_ws_computed_coords import grouped

    src = tilelang.compile(grouped(block_M=64, threads=256), target="cuda -arch=sm_90a").get_kernel_source()
    assert re.search(r"tl::wgmma_gemm_ss(_async)?<64, 128, 64, tl::Warpgroups<1, 2>", src)
    assert "tma_load" not in src and "cp_async" in src
    off = tilelang.compile(grouped(block_M=64, threads=256), target="cuda -arch=sm_90a",
                           pass_configs={"tl.enable_wgmma_split_n": False}).get_kernel_source()
    assert "wgmma" not in off
