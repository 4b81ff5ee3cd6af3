"""The guarded form of ``pipeline.lower_pipelined`` pinned on CPU (the CUDA source): a ``T.Pipelined`` body that is one
``if c:`` around its copies and gemm (a block-sparse main loop) is software-pipelined, with each
iteration's copies issued ahead under ``c`` of that iteration and its gemm run under ``c``, the
commits, waits and barriers unconditional; a condition that reads shared memory keeps the loop as
written. (It used to run as written: every tile's copies waited for before its gemm.)

On sm_90a such a loop is warp-specialised (``warp_specialize._TileCounter``): each role counts the
iterations it ran, the count is the ring slot, so the producer's TMA loads run up to S tiles that
do run ahead of the consumers."""

import shutil

import pytest

import tilelang
import tilelang.language as T


def _blocksparse(stages=2, shared_cond=False, cond="global"):
    """A block-sparse GEMM; ``cond``: the mask is read from global memory as it is ("global"), from
    registers the kernel loaded ("local"), or from global memory the kernel wrote first ("written")."""
    shared_cond = shared_cond or cond == "shared"

    @T.prim_func
    def k(A: T.Tensor((1024, 1024), "float16"), B: T.Tensor((1024, 1024), "float16"),
          Mask: T.Tensor((8, 8, 32), "bool"), C: T.Tensor((1024, 1024), "float16")):
        with T.Kernel(8, 8, threads=128) as (bx, by):
            a = T.alloc_shared((128, 32), "float16")
            b = T.alloc_shared((32, 128), "float16")
            m = T.alloc_shared((32,), "bool")
            r = T.alloc_local((32,), "bool")
            c = T.alloc_fragment((128, 128), "float32")
            if cond == "local":
                for i in T.serial(32):
                    r[i] = Mask[by, bx, i]
            if cond == "written":
                for i in T.Parallel(32):
                    Mask[by, bx, i] = i % 2 == 0
            T.clear(c)
            if shared_cond:
                T.copy(Mask[by, bx, :], m)
            for kk in T.Pipelined(32, num_stages=stages):
                if (m[kk] if shared_cond else r[kk] if cond == "local" else Mask[by, bx, kk]):
                    T.copy(A[by * 128, kk * 32], a)
                    T.copy(B[kk * 32, bx * 128], b)
                    T.gemm(a, b, c)
            T.copy(c, C[by * 128, bx * 128])
    return k


def _loop(src):
    body = src[src.find('extern "C" __global__ void __launch'):]
    head, rest = body.split("for (int kk = 0; kk < 32; ++kk)", 1)
    return head, rest


NO_WS = {"tl.disable_warp_specialized": True}


@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
def test_guarded_body_is_pipelined(target):
    src = tilelang.lower(_blocksparse(), target=target, pass_configs=NO_WS).source
    head, loop = _loop(src)
    # prologue: tile 0's copies under Mask[.., 0], one commit
    assert head.count("tl::cp_async_commit();") == 1
    assert "if (Mask[" in head and "cp_async" in head.split("if (Mask[", 1)[1]
    # in the loop: the next tile's copies under its own mask, then an unconditional commit and
    # wait, and the gemm under this iteration's mask
    nxt = loop.index("if (kk < 31)")
    guard_next = loop.index("if (Mask[", nxt)
    commit = loop.index("tl::cp_async_commit();")
    wait = loop.index("tl::cp_async_wait<1>();")
    guard_now = loop.index("if (Mask[", wait)
    gemm = loop.index("gemm", guard_now)
    assert nxt < guard_next < commit < wait < guard_now < gemm
    assert "+ 1)]" in loop[guard_next:commit].split("\n")[0]        # Mask[.. + kk + 1]
    assert "((kk + 1) & 1)" in loop[guard_next:commit]              # into the other stage
    assert "(kk & 1)" in loop[guard_now:]                            # reads this stage
    assert src.count("tl::cp_async_wait<0>();") >= 1


def test_condition_on_shared_memory_keeps_the_loop_as_written():
    src = tilelang.lower(_blocksparse(shared_cond=True), target="sm_90a").source
    _, loop = _loop(src)
    assert "if (kk < 31)" not in loop
    assert "tl::cp_async_wait<0>();" in loop


def test_one_stage_keeps_the_loop_as_written():
    src = tilelang.lower(_blocksparse(stages=1), target="sm_90a").source
    _, loop = _loop(src)
    assert "if (kk < 31)" not in loop


def test_guarded_main_loop_is_warp_specialised_with_counted_slots():
    src = tilelang.lower(_blocksparse(stages=2), target="sm_90a").source
    body = src[src.find('extern "C" __global__ void __launch'):]
    producer, consumer = body.split("} else {", 1)
    assert "cp_async" not in body
    # producer: for each tile that runs, wait for its slot, then load it with TMA; count it
    loop = producer[producer.index("for (int kk_tma = 0; kk_tma < 32; ++kk_tma)"):]
    guard = loop.index("if (Mask[")
    wait = loop.index("tl::mbarrier_wait(", guard)
    load = loop.index("tl::tma_load_2d(", wait)
    step = loop.index("tiles_issued = (tiles_issued + 1);", load)
    assert guard < wait < load < step
    assert "tiles_issued = 0;" in producer[:producer.index("for (int kk_tma")]
    slots = 3   # num_stages + 1: plan_ring's buffer for the wgmma in flight
    assert f"(tiles_issued % {slots})" in loop and f"((tiles_issued % {2 * slots}) / {slots}) ^ 1)" in loop
    # consumer: the same guard; the slot is the count of the tiles it ran, released one tile late
    loop = consumer[consumer.index("for (int kk = 0; kk < 32; ++kk)"):]
    guard = loop.index("if (Mask[")
    wait = loop.index("tl::mbarrier_wait(", guard)
    gemm = loop.index("wgmma_gemm_ss_async", wait)
    release = loop.index("tl::mbarrier_arrive(", gemm)
    step = loop.index("tiles_done[0] = (tiles_done[0] + 1);", release)
    assert guard < wait < gemm < release < step
    assert f"(tiles_done[0] % {slots})" in loop[wait:gemm]
    assert "(0 < tiles_done[0])" in loop[gemm:release]      # the first tile releases nothing
    assert "tl::wgmma_wait<0" in consumer[consumer.index("tiles_done[0] = (tiles_done[0] + 1);"):]


@pytest.mark.parametrize("cond", ["local", "written"])
def test_guard_on_registers_or_on_a_tensor_the_kernel_writes_keeps_the_cp_async_pipeline(cond):
    # registers: the producer warpgroup has none of the consumers'; a tensor the consumers write
    # before the loop: the producer could read it first
    src = tilelang.lower(_blocksparse(cond=cond), target="sm_90a").source
    assert "tiles_done" not in src and "cp_async" in src


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not found")
@pytest.mark.parametrize("target, configs", [("sm_90a", None), ("sm_90a", NO_WS), ("sm_80", None)])
def test_guarded_pipeline_compiles(target, configs):
    kernel = tilelang.compile(_blocksparse(), target=f"cuda -arch={target}", pass_configs=configs)
    kernel.ensure_cubin()


def test_guard_without_copies_keeps_the_body_as_written():
    from tilelang.tir_utils import walk_stmts
    from tilelang.transform.pipelined_loop import PipelinedLoop, is_pipelined

    @T.prim_func
    def k(A: T.Tensor((128, 32), "float16"), Mask: T.Tensor((32,), "bool"), C: T.Tensor((128, 128), "float32")):
        with T.Kernel(1, threads=128):
            a = T.alloc_shared((128, 32), "float16")
            c = T.alloc_fragment((128, 128), "float32")
            T.copy(A, a)
            T.clear(c)
            for kk in T.Pipelined(32, num_stages=2):
                if Mask[kk]:
                    T.gemm(a, a, c, transpose_B=True)
            T.copy(c, C)

    loops = []
    walk_stmts(k.body, lambda s: loops.append(s) if is_pipelined(s) else None)
    pl = PipelinedLoop.of(loops[0])
    assert pl.guard is None and not pl.producers
    assert len(pl.consumers) == 1 and pl.consumers[0].same_as(loops[0].body)   # the `if`, not its branch

