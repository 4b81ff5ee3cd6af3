"""CPU checks for three upstream example mappings (session 11): flash decoding's partial-row
epilogue through swizzle slabs, deepseek_mhc's tf32 gemm + sum of squares (a T.Parallel loop
reading a gemm operand through an enclosing serial loop's variable) and its hand-written thread
roles (tile work under ``if tx < 32: ... else: ...``). The GPU twin compares with torch."""

import sys
from pathlib import Path

import pytest

import tilelang
import tilelang.language as T
from tilelang.diagnostics.errors import TileLangCompileError

sys.path.insert(0, str(Path(__file__).resolve().parent))
import session11_kernels as ks  # noqa: E402


def _body(src):
    return src[src.index("__global__"):]


def test_partial_rows_are_not_tma_boxes_across_misaligned_slabs():
    # 4 rows x 64 columns = 512 bytes per slab: the second slab would start mid-pattern
    src = _body(tilelang.lower(ks.partial_rows_epilogue(rows=4), "sm_90a").source)
    assert "tma_store" not in src
    assert "copy_vec<16>" in src or "uint4" in src
    # whole 8-row patterns keep the TMA store
    src8 = _body(tilelang.lower(ks.partial_rows_epilogue(rows=8), "sm_90a").source)
    assert src8.count("tl::tma_store_2d") == 2


def test_tf32_operand_read_through_serial_loop_variable():
    src = _body(tilelang.lower(ks.gemm_sqrsum_tf32(), "sm_80").source)
    assert "tl::gemm_rs<32, 32, 256, 2, 2, false, true, false, 256>" in src
    # each thread squares its own registers of the operand: row half v, column group jj
    assert "part[v_2] = (part[v_2] + (xf[((jj * 2) + v_2)] * xf[((jj * 2) + v_2)]));" in src
    # declared T.tfloat32 (as upstream's example does), both operands go to the tensor cores unrounded
    tf = _body(tilelang.lower(ks.gemm_sqrsum_tf32(operands=T.tfloat32), "sm_80").source)
    assert "tl::gemm_rs<32, 32, 256, 2, 2, false, true, false, 256, 0, 0, 3>" in tf
    assert "float xf[128]" in tf      # stored as float32


def test_tile_work_in_thread_regions_uses_their_threads_and_named_barriers():
    art = tilelang.lower(ks.thread_regions(), "sm_80")
    src = _body(art.source)
    then, other = src.split("} else {", 1)
    # threads 0..31: warp-level reductions only, no barrier
    assert "warp_allreduce" in then and "sync" not in then.split("< 32)", 1)[1]
    # threads 32..95: barriers over those 64 threads only
    assert "__syncthreads" not in other
    assert "tl::named_barrier_sync(3, 64)" in other      # ids from 3, as upstream numbers them
    # the region's thread index starts at 0 for thread 32
    assert "threadIdx.x) + 32) & 63)" in other or "threadIdx.x) - 32)" in other


def test_thread_region_compiles_with_nvcc():
    from tilelang.jit import nvcc

    art = tilelang.lower(ks.thread_regions(), "sm_80")
    try:
        nvcc.compile_cubin(art.source, art.arch, art.compile_flags)
    except FileNotFoundError:
        pytest.skip("no nvcc")


def test_fragment_shared_between_region_and_block_is_still_refused():
    @T.prim_func
    def k(B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=256):
            f = T.alloc_fragment((128,), "float32")
            if T.get_thread_binding(0) < 128:
                T.fill(f, 1)
            T.copy(f, B)

    with pytest.raises(TileLangCompileError) as err:
        tilelang.lower(k, "sm_80")
    assert "inside an `if` on the thread index" in err.value.diagnostics[0].message


def _histogram_cumsum():
    """topk_selector's pattern: a scan over shared memory by the first 256 threads of 1024, the
    user's own partial barriers inside, then a pass where each thread works only while its index
    is below a count read from shared memory."""

    @T.prim_func
    def k(inp: T.Tensor((1024,), T.int32), out: T.Tensor((256,), T.int32)):
        with T.Kernel(1, threads=1024):
            tx = T.get_thread_binding()
            hist = T.alloc_shared([257], T.int32)
            buf = T.alloc_shared([2, 1024], T.int32)
            n = T.alloc_shared([2], T.int32)
            val = T.alloc_var(T.int32)
            T.fill(hist, 0)
            T.fill(n, 0)
            T.sync_threads()
            T.atomic_add(hist[inp[tx] & 255], 1)
            T.sync_threads()
            if tx < 256:
                for i in T.serial(8):
                    T.sync_threads(3, 256)
                    if tx < 256 - (1 << i):
                        val = hist[tx] + hist[tx + (1 << i)]
                    T.sync_threads(3, 256)
                    if tx < 256 - (1 << i):
                        hist[tx] = val
            T.sync_threads()
            count = n[0]
            if tx < count:
                v = buf[0, tx]
                pos = T.atomic_add(n[1], 1, return_prev=True)
                buf[1, pos] = v
            T.sync_threads()
            if tx < 256:
                out[tx] = hist[tx]

    return k


def test_compiler_barriers_under_thread_conditions_are_partial_or_split_out():
    src = _body(tilelang.lower(_histogram_cumsum(), "sm_80").source)
    lines = [ln.strip() for ln in src.splitlines()]
    scan = src[src.index("if (((int)threadIdx.x) < 256) {"):]
    scan = scan[:scan.index("\n  }\n")]
    # inside `if tx < 256`: only barriers over those 256 threads, never the whole block's
    assert "__syncthreads" not in scan and "tl::named_barrier_sync(3, 256)" in scan
    # `if tx < count` selects no range known when compiling: no barrier can be met inside it, so
    # the `if` is split around the barrier (the condition evaluated once, the values read on
    # either side kept in registers declared before it)
    rest = src[src.index("bool cond = (((int)threadIdx.x) < count[0]);"):]
    first, second = rest.split("if (cond) {")[1:3]
    assert "sync" not in first.split("}")[0] and first.rstrip().endswith("__syncthreads();")
    assert "pos[0] + 1312" in second and "sync" not in second.split("}")[0]
    assert lines.count("__syncthreads();") >= 4


def test_cross_warp_reduction_in_a_region_meets_at_its_named_barrier():
    src = _body(tilelang.lower(ks.region_cross_warp_reduce(), "sm_80").source)
    assert "AllReduce" not in src and "__syncthreads" not in src     # (tl::AllReduce syncs the block)
    assert src.count("tl::named_barrier_sync(3, 128)") == 2
    assert "tl::warp_allreduce<tl::SumOp, 1, 32>" in src
