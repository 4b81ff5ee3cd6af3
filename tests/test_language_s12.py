"""Names upstream's examples use that the language lacked (session 12), checked on CPU: IR, the
generated CUDA and nvcc's acceptance. GPU runs: tests/gpu/test_language_s12_gpu.py.

T.PersistentTileScheduler, T.tvm_warp_shuffle (+ up/down/xor), T.fence_proxy_async,
AutoTuner.run's scheduling keywords, GemmWarpPolicy.compute_warp_partition, the hand-written
warp-specialisation schedule objects (refused, built for the checks), T.mma_gemm_blockscaled
(refused) and ``annotations=`` on T.fill / T.clear / T.gemm / T.Parallel / T.Pipelined.
"""

from __future__ import annotations

import shutil
import sys
import types
from pathlib import Path

import pytest
from tvm import tirx

import tilelang
import tilelang.language as T
from tilelang.jit import nvcc

UPSTREAM = Path("/work/shared/conformance/upstream/examples")
if not UPSTREAM.is_dir():
    UPSTREAM = Path(__file__).resolve().parents[2] / "shared/conformance/upstream/examples"


def _src(func, arch="sm_90a"):
    return tilelang.lower(func, arch).source


def _body(source):
    return source[source.index('extern "C" __global__'):]


def _compiles(source, arch="sm_90a"):
    if shutil.which("nvcc") or nvcc.find_cuda_tool("nvcc"):
        assert nvcc.compile_cubin(source, arch, [])[:4] == b"\x7fELF"


# ----- T.PersistentTileScheduler ----------------------------------------------------------------
def _reference_coord(t, m_tiles, n_tiles, swizzle, column_major, cluster):
    """The tile order, written out: panels of ``swizzle`` slow-axis tiles, fast axis swept whole."""
    rows = -(-m_tiles // cluster)
    fast, slow = (rows, n_tiles) if column_major else (n_tiles, rows)
    panel = t // (fast * swizzle)
    base = panel * swizzle
    width = max(1, min(swizzle, slow - base))
    inside = t - panel * fast * swizzle
    f, s = inside // width, base + inside % width
    return (f, s) if column_major else (s, f)


@pytest.mark.parametrize("m_tiles,n_tiles,swizzle,column_major,cluster", [
    (4, 2, 1, True, 1), (5, 7, 3, True, 1), (5, 7, 3, False, 1), (6, 4, 8, True, 1), (7, 6, 2, True, 2),
    (9, 5, 4, False, 3), (16, 16, 8, True, 1)])
def test_scheduler_coord_visits_every_tile_once_in_the_panel_order(m_tiles, n_tiles, swizzle, column_major,
                                                                    cluster):
    import tvm

    sched = T.PersistentTileScheduler(m_tiles, n_tiles, num_workers=1, swizzle_size=swizzle,
                                      column_major=column_major, cluster_size=cluster, stateful=False)
    rows = -(-m_tiles // cluster)
    t = tirx.Var("t", "int32")
    m, n = sched.coord(t)
    analyzer = tvm.arith.Analyzer()
    seen = set()
    for tile in range(rows * n_tiles):
        got = tuple(int(analyzer.simplify(tirx.stmt_functor.substitute(e, {t: tirx.const(tile, "int32")})))
                    for e in (m, n))
        assert got == _reference_coord(tile, m_tiles, n_tiles, swizzle, column_major, cluster)
        seen.add(got)
    assert seen == {(i, j) for i in range(rows) for j in range(n_tiles)}


def test_scheduler_state_is_named_and_drives_a_while_loop():
    @T.prim_func
    def persistent(A: T.Tensor((8,), T.int32)):
        with T.Kernel(1, threads=1) as (block_id,):
            sched = T.PersistentTileScheduler(4, 2, num_workers=1, swizzle_size=1, name="sched")
            sched.init(block_id)
            while sched.valid():
                A[sched.m_idx] = sched.n_idx + sched.current_iter
                sched.next_tile()

    script = persistent.script()
    for name in ("sched_m_idx", "sched_n_idx", "sched_linear_idx", "sched_current_iter", "while"):
        assert name in script
    body = _body(_src(persistent))
    assert "while (1)" in body and "if (!((sched_linear_idx[0] < 8))) { break; }" in body
    assert "sched_m_idx = (sched_linear_idx[0] % 4);" in body and "sched_n_idx[0] = (sched_linear_idx[0] / 4);" in body
    assert "sched_linear_idx[0] = (sched_linear_idx[0] + 1)" in body
    assert "sched_current_iter[0] = (sched_current_iter[0] + 1)" in body


def test_stateless_scheduler_allocates_nothing_and_refuses_state():
    @T.prim_func
    def stateless(A: T.Tensor((8,), T.int32)):
        with T.Kernel(1, threads=1) as (block_id,):
            sched = T.PersistentTileScheduler(4, 2, num_workers=1, stateful=False)
            bx, by = sched.coord(block_id)
            A[bx] = by

    script = stateless.script()
    assert "alloc" not in script and "A[T.truncmod(block_id, 4)] = T.Div(block_id, 4)" in script

    sched = T.PersistentTileScheduler(4, 2, num_workers=1, stateful=False, name="s")
    with pytest.raises(RuntimeError, match="stateful=False.*m_idx"):
        sched.m_idx  # noqa: B018
    with pytest.raises(ValueError, match="swizzle_size"):
        T.PersistentTileScheduler(4, 2, swizzle_size=0, stateful=False)


def test_scheduler_default_workers_is_the_sm_count():
    sched = T.PersistentTileScheduler(8, 8, stateful=False)
    assert sched.num_workers >= 1
    assert T.PersistentTileScheduler(8, 8, cluster_size=2, stateful=False).num_workers == max(1, sched.num_workers // 2)


def _persistent_copy(M=512, N=512, bm=128, bn=128, workers=3, swizzle=3):
    @T.prim_func
    def pers(A: T.Tensor((M, N), T.float32), B: T.Tensor((M, N), T.float32)):
        with T.Kernel(workers, threads=128) as block_id:
            sched = T.PersistentTileScheduler(T.ceildiv(M, bm), T.ceildiv(N, bn), num_workers=workers,
                                              swizzle_size=swizzle, name="sched")
            sched.init(block_id)
            while sched.valid():
                bx = sched.m_idx
                by = sched.n_idx
                for i, j in T.Parallel(bm, bn):
                    B[bx * bm + i, by * bn + j] = A[bx * bm + i, by * bn + j] + sched.current_iter
                sched.next_tile()

    return pers


def test_persistent_kernel_generates_cuda_nvcc_accepts():
    src = _src(_persistent_copy())
    body = _body(src)
    assert "sched_linear_idx[0] = ((int)blockIdx.x);" in body
    assert "sched_linear_idx[0] = (sched_linear_idx[0] + 3);" in body   # stride: num_workers
    _compiles(src)


# ----- T.tvm_warp_shuffle --------------------------------------------------------------------------
def shuffles():
    """The four shuffle forms on 64 threads (the GPU test runs it: tests/gpu/test_language_s12_gpu.py)."""
    @T.prim_func
    def k(A: T.Tensor((64,), T.float32), B: T.Tensor((4, 64), T.float32)):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding(0)
            v = A[tx]
            B[0, tx] = T.tvm_warp_shuffle(0xFFFFFFFF, v, (tx ^ 1) % 32, 32, 32)
            B[1, tx] = T.tvm_warp_shuffle_up(0xFFFFFFFF, v, 1, 16, 32)
            B[2, tx] = T.tvm_warp_shuffle_down(0xFFFFFFFF, v, 2, 32, 32)
            B[3, tx] = T.tvm_warp_shuffle_xor(0xFFFFFFFF, v, 4, 8, 32)

    return k


def test_tvm_warp_shuffle_family_lowers_to_warp_shuffles():
    src = _src(shuffles())
    body = _body(src)
    assert "tl::__shfl_sync((uint)4294967295, " in body and "& 31), 32)" in body
    assert "tl::__shfl_up_sync((uint)4294967295, " in body and ", 1, 16)" in body
    assert "tl::__shfl_down_sync((uint)4294967295, " in body and ", 2, 32)" in body
    assert "tl::__shfl_xor_sync((uint)4294967295, " in body and ", 4, 8)" in body
    _compiles(src)
    _compiles(src, "sm_80")


def _hadamard_module(monkeypatch):
    path = UPSTREAM / "hadamard_transform"
    if not (path / "example_hadamard.py").is_file():
        pytest.skip("upstream's examples are not here")
    if "scipy" not in sys.modules:
        try:
            import scipy  # noqa: F401
        except ImportError:   # only its reference uses scipy
            monkeypatch.setitem(sys.modules, "scipy", types.ModuleType("scipy"))
    monkeypatch.syspath_prepend(str(path))
    monkeypatch.delitem(sys.modules, "example_hadamard", raising=False)
    import example_hadamard
    return example_hadamard


@pytest.mark.parametrize("n", [64, 1024, 32768])
def test_upstream_hadamard_example_compiles_with_warp_shuffles(monkeypatch, n):
    ex = _hadamard_module(monkeypatch)
    kernel = ex.hadamard.compile(b=4, n=n, dtype=T.float32)
    src = kernel.get_kernel_source()
    body = _body(src)
    assert "tl::__shfl_sync((uint)4294967295, local[" in body
    assert "(((int)threadIdx.x) ^ (1 << " in body
    if n >= 1024:   # the block-level exchange goes through shared memory between barriers
        assert body.count("__syncthreads()") >= 2
    _compiles(src)


# ----- T.fence_proxy_async --------------------------------------------------------------------------
def test_fence_proxy_async_emits_the_fence():
    @T.prim_func
    def k(A: T.Tensor((128,), T.float16)):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((128,), T.float16)
            tx = T.get_thread_binding(0)
            S[tx] = A[tx]
            T.fence_proxy_async()
            T.sync_threads()
            A[tx] = S[127 - tx]

    src = _src(k)
    assert "tl::fence_proxy_async();" in _body(src)
    _compiles(src)


def test_flashmla_example_builds_with_its_fence(monkeypatch):
    path = UPSTREAM / "warp_specialize"
    if not (path / "example_warp_specialize_flashmla.py").is_file():
        pytest.skip("upstream's examples are not here")
    pytest.importorskip("einops")   # the example imports it (not one of our dependencies)
    monkeypatch.syspath_prepend(str(path))
    monkeypatch.delitem(sys.modules, "example_warp_specialize_flashmla", raising=False)
    import example_warp_specialize_flashmla as ex
    src = ex.flashattn(1, 64, 1, 1024, 512, 64, 64, 64, 1).get_kernel_source()
    assert "tl::fence_proxy_async();" in src and "wgmma" in src


# ----- AutoTuner.run's scheduling keywords ---------------------------------------------------------
def test_autotuner_run_accepts_upstreams_scheduling_keywords(monkeypatch):
    from tilelang.autotuner import AutoTuner, tuner

    seen = {}

    def fake_tune(problem, profile, runner, force):
        seen["profile"] = profile
        return "result"

    monkeypatch.setattr(tuner, "_tune", fake_tune)
    at = AutoTuner.from_kernel(kernel=lambda block_M=64: None, configs=[dict(block_M=64)])
    assert at.run(warmup=3, rep=20, enable_grouped_compile=True) == "result"
    assert at.run(use_pipeline=True, group_compile_size=4, benchmark_multi_gpu=True, benchmark_devices=[0, 1],
                  early_stop=True, early_stop_factor=1.5) == "result"
    assert seen["profile"].early_stop is True and seen["profile"].early_stop_factor == 1.5
    with pytest.raises(ValueError, match="early_stop_factor"):
        at.run(early_stop=True, early_stop_factor=0.5)
    with pytest.raises(ValueError, match="group_compile_size"):
        at.run(enable_grouped_compile=True, group_compile_size=0)
    with pytest.raises(ValueError, match="benchmark_devices"):
        at.run(benchmark_multi_gpu=True, benchmark_devices=["cuda:0"])


# ----- GemmWarpPolicy.compute_warp_partition -------------------------------------------------------
@pytest.mark.parametrize("policy,M,N,warps,expected", [
    (T.GemmWarpPolicy.Square, 128, 128, 4, (2, 2)),
    (T.GemmWarpPolicy.Square, 128, 256, 8, (2, 4)),
    (T.GemmWarpPolicy.Square, 256, 128, 8, (2, 4)),    # balance in 16x8 units: 8x4 per warp (upstream's)
    (T.GemmWarpPolicy.Square, 64, 64, 8, (2, 4)),
    (T.GemmWarpPolicy.Square, 16, 16, 4, (1, 1)),      # no exact split fits: (1, 1)
    (T.GemmWarpPolicy.FullRow, 128, 128, 4, (4, 1)),
    (T.GemmWarpPolicy.FullRow, 32, 128, 4, (2, 2)),    # M holds two 16-row warps; the rest go along N
    (T.GemmWarpPolicy.FullCol, 128, 128, 4, (1, 4)),
    (T.GemmWarpPolicy.FullCol, 128, 16, 8, (4, 2)),
])
def test_compute_warp_partition(policy, M, N, warps, expected):
    assert policy.compute_warp_partition(M, N, warps) == expected


def test_warp_policy_helpers():
    P = T.GemmWarpPolicy
    assert P.Square.is_square() and P.FullRow.is_full_row() and P.FullCol.is_full_col()
    assert P.to_prime_factors(360) == [2, 2, 2, 3, 3, 5] and P.to_prime_factors(1) == []
    assert P.from_warp_partition(4, 1) is P.FullRow and P.from_warp_partition(1, 4) is P.FullCol
    assert P.from_warp_partition(2, 2) is P.Square
    with pytest.raises(ValueError, match="fewer than 16 rows"):
        P.FullRow.compute_warp_partition(8, 64, 4)


# ----- hand-written warp-specialisation schedules, T.mma_gemm_blockscaled ---------------------------
def _ws_kernel():
    @T.prim_func
    def k(A: T.Tensor((128, 64), T.float16), B: T.Tensor((128, 64), T.float16)):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((128, 64), T.float16)
            T.annotate_ws_schedule(T.WSSchedule(
                num_warps=4,
                roles=[T.WSRole("TMA", warps_lo=0, warps_hi=1), T.WSRole("Math", warps_lo=1, warps_hi=4)],
                pipelines=[T.WSPipeline("a", [A_s], depth=1)],
                scopes=[T.WSScope(T.WSScope.ROOT, {
                    "TMA": [T.WSSync.producer_acquire("a"), "load", T.WSSync.producer_commit("a")],
                    "Math": [T.WSSync.consumer_wait("a"), "store", T.WSSync.consumer_release("a")]})]))
            T.copy(A, A_s, annotations={T.WSID: "load"})
            with T.ws_op("store"):
                T.copy(A_s, B)

    return k


def test_ws_schedule_is_refused_where_it_is_annotated():
    with pytest.raises(Exception, match="does not materialise hand-written warp-specialisation") as err:
        _ws_kernel()
    assert "annotate_ws_schedule" in str(err.value)
    assert getattr(err.value, "span", None) is not None


def test_ws_schedule_builds_for_the_checks():
    from tilelang.language.tmem import for_checks

    with for_checks():
        func = _ws_kernel()
    assert func.script().count("T.tl_copy(") == 2


def test_ws_schedule_objects_check_themselves():
    sync = T.WSSync.consumer_wait("smem", stage=2)
    assert sync.kind is T.WSSyncKind.CONSUMER_WAIT and sync.stage == 2
    scope = T.WSScope("loop", {"MMA": ["gemm", sync]})
    assert isinstance(scope.bodies["MMA"][0], T.WSOpRef) and scope.bodies["MMA"][0].id == "gemm"
    with pytest.raises(ValueError, match="multiple of 4"):
        T.WSSchedule(num_warps=6, roles=[], pipelines=[], scopes=[])
    with pytest.raises(ValueError, match="no pipeline 'smem'"):
        T.WSSchedule(4, [T.WSRole("MMA", warps_lo=0, warps_hi=1)], [], [scope])
    with pytest.raises(ValueError, match="warps_hi"):
        T.WSRole("x", warps_lo=2, warps_hi=2)
    with pytest.raises(TypeError, match="ws_op id"):
        T.ws_op("")


def test_ws_op_keeps_names_visible_and_builds_no_ir():
    @T.prim_func
    def k(A: T.Tensor((8,), T.int32)):
        with T.Kernel(2, threads=1) as bx:
            with T.ws_op("idx"):
                y = bx * 2 + 1
            A[y] = y

    assert "A[bx * 2 + 1] = bx * 2 + 1" in k.script() and "attr" not in k.script()


def test_mma_gemm_blockscaled_is_refused_at_the_call():
    with pytest.raises(Exception, match="sm_120 block-scaled MMA") as err:
        @T.prim_func
        def k(A: T.Tensor((128, 64), T.uint8), B: T.Tensor((128, 64), T.uint8)):
            with T.Kernel(1, threads=128):
                A_s = T.alloc_shared((128, 64), T.uint8)
                C = T.alloc_fragment((128, 128), T.float32)
                SF = T.alloc_shared((128, 4), T.uint8)
                T.mma_gemm_blockscaled(A_s, A_s, C, SF, SF, transpose_B=True, k_start=0, sf_a_granularity_k=16,
                                       sf_b_granularity_k=16)
    assert "A_s" in str(err.value) and getattr(err.value, "span", None) is not None


# ----- annotations= on tile ops and loops -----------------------------------------------------------
def _gemm(with_annotations: bool):
    ann = {T.WSID: "x"} if with_annotations else None
    extra = {"annotations": ann} if with_annotations else {}

    @T.prim_func
    def k(A: T.Tensor((128, 64), T.float16), B: T.Tensor((128, 64), T.float16), C: T.Tensor((128, 128), T.float32)):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((128, 64), T.float16)
            B_s = T.alloc_shared((128, 64), T.float16)
            C_l = T.alloc_fragment((128, 128), T.float32)
            T.clear(C_l, **extra)
            T.fill(C_l, 0, **extra)
            for _ in T.Pipelined(2, num_stages=1, **extra):
                T.copy(A, A_s)
                T.copy(B, B_s)
                T.gemm(A_s, B_s, C_l, transpose_B=True, **extra)
            for i, j in T.Parallel(128, 128, **extra):
                C_l[i, j] = C_l[i, j] * 2
            T.copy(C_l, C)

    return k


def test_annotations_keyword_is_accepted_and_changes_nothing():
    assert _body(_src(_gemm(True))) == _body(_src(_gemm(False)))


# ----- sm_100 names beyond tensor memory: refused at the call, placeholders for the checks ---------
def _clc_kernel():
    @T.prim_func
    def k(A: T.Tensor((8,), T.int32)):
        with T.Kernel(1, threads=32):
            res = T.alloc_shared((4,), T.uint32)
            bar = T.alloc_barrier([1])
            T.clc_try_cancel_multicast(res, bar[0])
            if T.clc_is_canceled(res):
                A[0] = T.cast(T.clc_get_first_ctaid_x(res), "int32")

    return k


def test_sm100_operations_are_refused_where_they_are_called():
    with pytest.raises(Exception, match=r"T.clc_try_cancel_multicast\(res.*does not generate sm_100 cluster launch"
                       ) as err:
        _clc_kernel()
    assert getattr(err.value, "span", None) is not None
    for name in ("tcgen05_cp_warpx4", "tcgen05_sf_warp_transpose", "tcgen05_gemm_blockscaled"):
        with pytest.raises(NotImplementedError, match=f"T.{name}.*sm_100"):
            getattr(T, name)()


def test_clc_operations_build_placeholders_for_the_checks():
    from tilelang.language.tmem import for_checks

    with for_checks():
        script = _clc_kernel().script()
    for name in ("clc_try_cancel_multicast", "clc_is_canceled", "clc_get_first_ctaid_x"):
        assert f'"tl::{name}"' in script
