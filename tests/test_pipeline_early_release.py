"""Software pipelining of a T.Pipelined loop whose consumers copy the staged tile into registers
and then compute on the copy (``pipeline._lower_early_release``): the stage is refilled right
after every thread has read it, so S tiles (not S-1) are in flight while the body computes.

The structure pinned here (S = num_stages):

    prologue: S tiles, each committed
    for k: cp_async_wait<S-1>; __syncthreads(); shared -> registers; __syncthreads();
           if (k < n - S) producers(k + S) into stage k % S; commit; compute (no barrier after)

Loops whose consumers read the staged tile to the end keep the plain schedule (producer first).
The schedule is the default where every producer is a plain cp.async copy (no converting copy, no
gather); a global -> register ``T.copy`` among the leading register reads (a gemv's x slice) is
issued at the top of the iteration, before the wait (``pipeline.early_loads``).
"""

from __future__ import annotations

import re

import pytest

import tilelang
import tilelang.language as T

# the schedule is on by default for plain cp.async producers; True also takes converting copies
EARLY_RELEASE = {"tl.enable_pipeline_early_release": True}
PLAIN = {"tl.enable_pipeline_early_release": False}


def _body(source):
    return source[source.index('extern "C" __global__'):]


def _gemv(M=4096, N=4096, block_M=128, block_N=128, stages=2, threads=256):
    """y = A @ x with the A tile staged through shared memory and copied into registers (the
    shape of upstream's gemv_alloc_reducer example)."""

    @T.prim_func
    def gemv(a: T.Tensor((M, N), T.float16), x: T.Tensor((N,), T.float16), o: T.Tensor((M,), T.float16)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bm:
            acc = T.alloc_reducer(block_M, T.float32, replication="all")
            T.clear(acc)
            for kn in T.Pipelined(T.ceildiv(N, block_N), num_stages=stages):
                a_smem = T.alloc_shared((block_M, block_N), T.float16)
                T.copy(a[bm * block_M, kn * block_N], a_smem)
                a_frag = T.alloc_fragment((block_M, block_N), T.float16)
                T.copy(a_smem, a_frag)
                x_frag = T.alloc_fragment(block_N, T.float16)
                T.copy(x[kn * block_N], x_frag)
                for i, j in T.Parallel(block_M, block_N):
                    acc[i] += a_frag[i, j] * x_frag[j]
            T.finalize_reducer(acc)
            T.copy(acc, o[bm * block_M])

    return gemv


def own_buffer_rest(stages):
    """B = 2 A with rows rolled by one: each tile read into registers, then the rest of the body
    stages it through a shared buffer of its own (R) before storing it."""

    @T.prim_func
    def main(A: T.Tensor((256, 1024), T.float16), B: T.Tensor((256, 1024), T.float16)):
        with T.Kernel(2, threads=128) as bx:
            S = T.alloc_shared((128, 64), T.float16)
            R = T.alloc_shared((128, 64), T.float16)
            F = T.alloc_fragment((128, 64), T.float16)
            for k in T.Pipelined(16, num_stages=stages):
                T.copy(A[bx * 128, k * 64], S)
                T.copy(S, F)
                for i, j in T.Parallel(128, 64):
                    R[(i + 1) % 128, j] = F[i, j] * 2
                T.copy(R, B[bx * 128, k * 64])

    return main


def _loop(src, var="kn"):
    start = src.index(f"for (int {var} = 0;")
    end = src.index("tl::cp_async_wait<0>();", start)
    return src[start:end]


@pytest.mark.parametrize("stages", [2, 3])
def test_the_stage_is_refilled_once_read_into_registers(stages):
    src = _body(tilelang.lower(_gemv(stages=stages), "sm_90a", pass_configs=EARLY_RELEASE).source)
    prologue = src[:src.index("for (int kn = 0;")]
    assert prologue.count("tl::cp_async_commit();") == stages          # S tiles ahead, not S-1
    loop = _loop(src)
    wait = loop.index(f"tl::cp_async_wait<{stages - 1}>();")
    first_sync = loop.index("__syncthreads();", wait)
    read = loop.index("*(uint4*)(a_frag", first_sync)                   # shared -> registers
    second_sync = loop.index("__syncthreads();", read)
    refill = loop.index("tl::cp_async_gs<16>", second_sync)
    commit = loop.index("tl::cp_async_commit();", refill)
    compute = loop.index("o_reducer", commit) if "o_reducer" in loop else loop.index("acc[", commit)
    assert wait < first_sync < read < second_sync < refill < commit < compute
    assert loop.count("__syncthreads();") == 2                          # none after the compute
    assert f"if (kn < {32 - stages})" in loop                           # tile kn + S, while there is one
    # the refill goes into the stage just read: (kn % S), the same expression as the read's
    stage = "(kn & 1)" if stages == 2 else "(kn % 3)"
    assert loop.count(stage) >= 2


def test_tiles_all_read_first_take_the_early_release_not_split_groups():
    """Two staged tiles, both read into registers before a compute that touches neither: the
    tiles are done with before the last consumer, which ``pipeline._lower_split_groups`` would also
    take (and close with a barrier); the early release is decided first: one group per iteration,
    both tiles refilled together, two barriers per iteration."""
    M = N = 4096

    @T.prim_func
    def main(a: T.Tensor((M, N), T.float16), b: T.Tensor((M, N), T.float16), x: T.Tensor((N,), T.float16),
             o: T.Tensor((M,), T.float16)):
        with T.Kernel(M // 128, threads=256) as bm:
            acc = T.alloc_reducer(128, T.float32, replication="all")
            T.clear(acc)
            for kn in T.Pipelined(N // 128, num_stages=2):
                a_s = T.alloc_shared((128, 128), T.float16)
                b_s = T.alloc_shared((128, 128), T.float16)
                T.copy(a[bm * 128, kn * 128], a_s)
                T.copy(b[bm * 128, kn * 128], b_s)
                a_f = T.alloc_fragment((128, 128), T.float16)
                b_f = T.alloc_fragment((128, 128), T.float16)
                T.copy(a_s, a_f)
                T.copy(b_s, b_f)
                x_f = T.alloc_fragment(128, T.float16)
                T.copy(x[kn * 128], x_f)
                for i, j in T.Parallel(128, 128):
                    acc[i] += (a_f[i, j] + b_f[i, j]) * x_f[j]
            T.finalize_reducer(acc)
            T.copy(acc, o[bm * 128])

    src = _body(tilelang.lower(main, "sm_90a", pass_configs=EARLY_RELEASE).source)
    assert src[:src.index("for (int kn = 0;")].count("tl::cp_async_commit();") == 2     # S groups, not S*P
    loop = _loop(src)
    assert loop.count("tl::cp_async_wait<1>();") == 1 and loop.count("tl::cp_async_commit();") == 1
    assert loop.count("__syncthreads();") == 2
    assert loop.index("*(uint4*)(b_f") < loop.rindex("__syncthreads();") < loop.index("tl::cp_async_gs<16>")


def test_short_loops_guard_the_prologue():
    """One or three iterations of a 2-stage loop: tiles past the end are never loaded."""
    one = _body(tilelang.lower(_gemv(N=128), "sm_90a", pass_configs=EARLY_RELEASE).source)
    assert one.count("tl::cp_async_gs<16>") == 1 and "for (int kn" not in one     # tile 0 only, loop gone
    three = _body(tilelang.lower(_gemv(N=384), "sm_90a", pass_configs=EARLY_RELEASE).source)
    assert three[:three.index("for (int kn = 0;")].count("tl::cp_async_gs<16>") == 2
    assert "if (kn < 1) {" in _loop(three)                                          # only tile 2 is refilled
    for src in (one, three):
        assert src.count("tl::cp_async_wait<0>();") == 1


def test_a_consumer_reading_the_stage_to_the_end_keeps_the_plain_schedule():
    @T.prim_func
    def main(A: T.Tensor((1024, 1024), T.float16), B: T.Tensor((1024, 1024), T.float16)):
        with T.Kernel(8, threads=128) as bx:
            S = T.alloc_shared((128, 64), T.float16)
            acc = T.alloc_fragment((128, 64), T.float32)
            T.clear(acc)
            for k in T.Pipelined(16, num_stages=2):
                T.copy(A[bx * 128, k * 64], S)
                for i, j in T.Parallel(128, 64):
                    acc[i, j] += S[i, j]
            T.copy(acc, B[bx * 128, 0])

    src = _body(tilelang.lower(main, "sm_90a", pass_configs=EARLY_RELEASE).source)
    loop = _loop(src, "k")
    # producer of tile k+1 first, then the wait for tile k; a barrier closes the body
    assert loop.index("tl::cp_async_gs") < loop.index("tl::cp_async_wait<1>();")
    assert src[:src.index("for (int k = 0;")].count("tl::cp_async_commit();") == 1
    assert loop.rstrip().rstrip("}").rstrip().endswith("__syncthreads();")


def test_rest_touching_shared_memory_is_fenced_by_the_barriers():
    """A rest that stages through a shared buffer of its own: its write and read are separated
    by a barrier, and the next iteration's write by the loop's first barrier."""

    src = _body(tilelang.lower(own_buffer_rest(stages=2), "sm_90a", pass_configs=EARLY_RELEASE).source)
    loop = _loop(src, "k")
    commit = loop.index("tl::cp_async_commit();")
    rest = loop[commit:]
    write = rest.index("(((half*)smem) + ")          # the rest's store into R
    assert write < rest.index("__syncthreads();", write) < rest.index("tl::tma_store_2d")
    assert loop.index("tl::cp_async_wait<1>();") < loop.index("__syncthreads();")


def test_nvcc_accepts_the_early_release_loop():
    from tilelang.jit import nvcc

    try:
        nvcc.find_nvcc()
    except Exception:  # noqa: BLE001
        pytest.skip("no nvcc")
    art = tilelang.lower(_gemv(N=384, stages=3), "sm_90a", pass_configs=EARLY_RELEASE)
    info = nvcc.ptxas_info(art.source, "sm_90a", art.compile_flags)
    assert info and all(i.spill_stores == 0 for i in info.values() if hasattr(i, "spill_stores"))
    assert re.search(r"cp_async_wait<2>", art.source)


def _plain_schedule(loop):
    """The producer of tile k+S-1 issued before the wait for tile k, a barrier closing the body."""
    return (loop.index("tl::cp_async_gs") < loop.index("tl::cp_async_wait<")
            and loop.rstrip().rstrip("}").rstrip().endswith("__syncthreads();"))


def test_the_early_release_is_the_default_and_can_be_turned_off():
    default = _body(tilelang.lower(_gemv(), "sm_90a").source)
    assert default == _body(tilelang.lower(_gemv(), "sm_90a", pass_configs=EARLY_RELEASE).source)
    assert default[:default.index("for (int kn = 0;")].count("tl::cp_async_commit();") == 2
    off = _body(tilelang.lower(_gemv(), "sm_90a", pass_configs=PLAIN).source)
    assert off[:off.index("for (int kn = 0;")].count("tl::cp_async_commit();") == 1
    assert _plain_schedule(_loop(off))


def test_the_global_vector_load_is_issued_before_the_wait():
    """x's slice does not depend on the staged tile: its load starts the iteration and overlaps the
    wait (upstream's ptxas hoists it there; ours issued it after the refill, where every iteration
    then waited for it: 0.0297 -> 0.0264 ms on the H200 with the early release)."""
    loop = _loop(_body(tilelang.lower(_gemv(), "sm_90a").source))
    decl, load = loop.index("half x_frag[8];"), loop.index("*(uint4*)(x_frag + 0) = *(uint4*)(x + ")
    assert decl < load < loop.index("tl::cp_async_wait<1>();") < loop.index("*(uint4*)(a_frag")
    # the plain schedule keeps the statement order as written (the load after the register reads)
    off = _loop(_body(tilelang.lower(_gemv(), "sm_90a", pass_configs=PLAIN).source))
    assert off.index("*(uint4*)(a_frag") < off.index("*(uint4*)(x_frag + 0)")


def _gemv_variant(kind):
    """_gemv with the x copy placed where it may not move above the wait: after a computation
    ("after_compute"), into a fragment an earlier register read filled ("dst_touched"), or from a
    vector the body writes ("src_written"); or with A staged as float32 ("converting": its
    producer converts, loading through registers instead of cp.async)."""
    M = N = 1024
    staged = T.float32 if kind == "converting" else T.float16

    @T.prim_func
    def main(a: T.Tensor((M, N), T.float16), x: T.Tensor((N,), T.float16), o: T.Tensor((M,), T.float16)):
        with T.Kernel(M // 128, threads=256) as bm:
            acc = T.alloc_reducer(128, T.float32, replication="all")
            T.clear(acc)
            for kn in T.Pipelined(N // 128, num_stages=2):
                a_smem = T.alloc_shared((128, 128), staged)
                T.copy(a[bm * 128, kn * 128], a_smem)
                a_frag = T.alloc_fragment((128, 128), T.float16)
                x_frag = T.alloc_fragment(128, T.float16)
                T.copy(a_smem, a_frag)
                if kind == "after_compute":
                    for i, j in T.Parallel(128, 128):
                        a_frag[i, j] = a_frag[i, j] * 2
                if kind == "dst_touched":
                    T.copy(a_smem[0, :], x_frag)
                T.copy(x[kn * 128], x_frag)
                for i, j in T.Parallel(128, 128):
                    acc[i] += a_frag[i, j] * x_frag[j]
                if kind == "src_written":
                    if bm == 0:
                        for j in T.Parallel(128):
                            x[kn * 128 + j] = x_frag[j]
            T.finalize_reducer(acc)
            T.copy(acc, o[bm * 128])

    return main


@pytest.mark.parametrize("kind", ["after_compute", "dst_touched", "src_written"])
def test_the_global_load_stays_in_place_where_it_may_not_move(kind):
    loop = _loop(_body(tilelang.lower(_gemv_variant(kind), "sm_90a").source))
    assert loop.index("tl::cp_async_wait<1>();") < loop.index("= *(uint4*)(x + ")


def test_a_converting_producer_keeps_the_plain_schedule_by_default():
    """A float16 -> float32 producer loads through registers (no cp.async): nothing would be in
    flight during the rest of the body, so the default keeps the plain schedule; an explicit True
    still takes the early release."""
    main = _gemv_variant("converting")
    default = _body(tilelang.lower(main, "sm_90a").source)
    assert "tl::cp_async_gs" not in default
    loop = _loop(default)
    assert loop.rstrip().rstrip("}").rstrip().endswith("__syncthreads();")
    assert default[:default.index("for (int kn = 0;")].count("tl::cp_async_commit();") == 1
    forced = _body(tilelang.lower(main, "sm_90a", pass_configs=EARLY_RELEASE).source)
    assert forced[:forced.index("for (int kn = 0;")].count("tl::cp_async_commit();") == 2
