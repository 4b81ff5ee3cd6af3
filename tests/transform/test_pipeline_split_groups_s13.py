"""``pipeline._lower_split_groups`` pinned on CPU (the CUDA source): in a two-stage loop whose
producers' tiles are touched at different places (an attention body), each producer is a cp.async
group of its own, waited for just before its first reader and reissued right after its last one;
a loop whose one consumer reads every tile keeps the one-group-per-iteration form."""

import re

import tilelang
import tilelang.language as T
from tilelang.jit import nvcc


def _body(func, target="sm_80"):
    src = tilelang.lower(func, target=target, pass_configs={"tl.enable_pipeline_split_groups": True}).source
    return src[src.find('extern "C" __global__ void __launch'):]


def _attention(stages, tail=None, n=16, blocks=1):
    """``tail``: None, or statements after V's last reader: "registers" (a rescale of the output
    fragment) or "shared" (the output kept in a shared tile the next iteration reads first);
    ``n``: the trip count (K and V have n * 64 rows), a T.dynamic for a symbolic one; ``blocks``:
    the grid (every block computes the same tile)."""
    @T.prim_func
    def k(Q: T.Tensor((64, 64), "float16"), K: T.Tensor((n * 64, 64), "float16"),
          V: T.Tensor((n * 64, 64), "float16"), O: T.Tensor((64, 64), "float32")):
        with T.Kernel(blocks, threads=128):
            q = T.alloc_shared((64, 64), "float16")
            ks = T.alloc_shared((64, 64), "float16")
            vs = T.alloc_shared((64, 64), "float16")
            keep = T.alloc_shared((64, 64), "float32")
            s = T.alloc_fragment((64, 64), "float32")
            p = T.alloc_fragment((64, 64), "float16")
            o = T.alloc_fragment((64, 64), "float32")
            T.copy(Q, q)
            T.clear(o)
            if tail == "shared":
                T.clear(keep)
            for i in T.Pipelined(n, num_stages=stages):
                if tail == "shared":
                    T.copy(keep, o)          # reads what the previous iteration's tail wrote
                T.copy(K[i * 64:(i + 1) * 64, :], ks)
                T.clear(s)
                T.gemm(q, ks, s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                for a, b in T.Parallel(64, 64):
                    s[a, b] = T.exp2(s[a, b])
                T.copy(s, p)
                T.copy(V[i * 64:(i + 1) * 64, :], vs)
                T.gemm(p, vs, o, policy=T.GemmWarpPolicy.FullRow)
                if tail == "shared":
                    T.copy(o, keep)
                elif tail == "registers":
                    for a, b in T.Parallel(64, 64):      # registers only, after the last reissue
                        o[a, b] = o[a, b] * 0.5
            T.copy(o, O)
    return k


def test_attention_loop_gets_a_group_per_producer():
    src = _body(_attention(2))
    head, loop = src.split("for (int i = 0; i < 16; ++i)", 1)
    # prologue: K0, V0, K1, V1, each committed
    assert head.count("tl::cp_async_commit();") == 4
    # in the loop: K(i) waited for before the first gemm, V(i) before the second, each with the
    # 3 later groups (V(i), K(i+1), V(i+1) / K(i+1), V(i+1), K(i+2)) still in flight
    assert loop.count("tl::cp_async_wait<3>();") == 2
    assert loop.count("tl::cp_async_commit();") == 2
    # the next K tile (i + 2) is issued right after the first gemm, into the stage just read
    first_gemm = loop.index("gemm_ss")
    k_issue = loop.index("if (i < 14)")
    second_wait = loop.rindex("tl::cp_async_wait<3>();")
    assert first_gemm < k_issue < second_wait
    assert "__syncthreads();\n    if (i < 14)" in loop
    assert loop.count("if (i < 14)") == 2
    assert "tl::cp_async_wait<0>();" in loop.split("\n  }\n", 1)[1] or src.count("cp_async_wait<0>") == 1


def test_per_tile_groups_by_default_in_a_grid_of_one_wave():
    """Unset (session 31): a two-stage attention loop in a grid of at most one wave (each block's
    load latency is the kernel's) takes per-tile groups; in a grid of many waves it keeps one group
    per iteration; False never takes them."""
    def body(blocks, **configs):
        src = tilelang.lower(_attention(2, blocks=blocks), target="sm_80", pass_configs=configs).source
        return src[src.find('extern "C" __global__ void __launch'):]

    keyed = _body(_attention(2))
    assert body(1) == keyed
    assert body(132) == _body(_attention(2, blocks=132))
    many = body(4096)
    assert "tl::cp_async_wait<3>();" not in many and "tl::cp_async_wait<1>();" in many
    assert "tl::cp_async_wait<3>();" not in body(1, **{"tl.enable_pipeline_split_groups": False})


def test_single_consumer_loop_keeps_one_group_per_iteration():
    @T.prim_func
    def gemm(A: T.Tensor((128, 512), "float16"), B: T.Tensor((512, 128), "float16"),
             C: T.Tensor((128, 128), "float32")):
        with T.Kernel(1, threads=128):
            a = T.alloc_shared((128, 32), "float16")
            b = T.alloc_shared((32, 128), "float16")
            c = T.alloc_fragment((128, 128), "float32")
            T.clear(c)
            for k in T.Pipelined(16, num_stages=2):
                T.copy(A[:, k * 32:(k + 1) * 32], a)
                T.copy(B[k * 32:(k + 1) * 32, :], b)
                T.gemm(a, b, c)
            T.copy(c, C)

    src = _body(gemm)
    assert "tl::cp_async_wait<1>();" in src
    assert not re.search(r"cp_async_wait<[23]>", src)


def test_one_stage_attention_loop_refills_each_tile_after_its_last_use():
    """num_stages=1 (session 14): K(i), V(i) issued before the loop; K(i+1) right after the first
    gemm, V(i+1) right after the second, each waited for (one group after it in flight) just before
    its reader (by default too since session 25: attention_schedule marks the loop); with the config
    False the loop issues both tiles at the top of each iteration instead."""
    src = _body(_attention(1))
    head, loop = src.split("for (int i = 0; i < 16; ++i)", 1)
    assert head.count("tl::cp_async_commit();") == 2
    assert loop.count("tl::cp_async_wait<1>();") == 2
    assert loop.count("if (i < 15)") == 2
    first_gemm, second_gemm = loop.index("gemm_ss"), loop.index("gemm_rs")
    k_issue = loop.index("if (i < 15)")
    v_issue = loop.index("if (i < 15)", k_issue + 1)
    assert first_gemm < k_issue < second_gemm < v_issue
    plain = tilelang.lower(_attention(1), target="sm_80",
                           pass_configs={"tl.enable_pipeline_split_groups": False}).source
    assert "if (i < 15)" not in plain


def test_iteration_ends_with_a_barrier_only_where_its_tail_races_with_the_next_head():
    """After V's reissue the body's last statements (a softmax's row statistics, say) touch only
    registers: no barrier closes the iteration (deepseek_v4's sparse attention); where they write
    a shared buffer the next iteration reads before its first barrier, one does."""
    def loop_end(func):
        # (with the early release off: its schedule, the default here, opens each iteration with
        # the barrier instead; gathered copies, deepseek_v4's, take this one by default)
        src = tilelang.lower(func, target="sm_80", pass_configs={"tl.enable_pipeline_split_groups": True,
                                                                 "tl.enable_pipeline_early_release": False}).source
        loop = src.split("for (int i = 0; i < 16; ++i)", 1)[1]
        assert loop.count("tl::cp_async_wait<3>();") == 2          # one group per tile
        return loop[:loop.index("\n  }\n")].rstrip().splitlines()[-1].strip()

    assert loop_end(_attention(2, tail="registers")) != "__syncthreads();"
    assert loop_end(_attention(2, tail="shared")) == "__syncthreads();"


def test_tail_peel_reissues_unconditionally_and_runs_the_last_stages_apart():
    """The tail peel (``tl.enable_pipeline_tail_peel``; by default where gathered copies are among the
    producers): the first n - S iterations reissue with no ``if (i < n - S)``
    (ptxas may then hoist a gathered copy's index loads above the barrier before the reissue);
    the last S run in a loop of their own that commits empty groups, as the guarded issue did."""
    configs = {"tl.enable_pipeline_split_groups": True, "tl.enable_pipeline_tail_peel": True}
    src = tilelang.lower(_attention(2), target="sm_80", pass_configs=configs).source
    body = src[src.find('extern "C" __global__ void __launch'):]
    main, tail = body.split("for (int i = 0; i < 14; ++i)", 1)[1].split("for (int i_tail = 14; i_tail < 16; ++i_tail)", 1)
    assert "if (i < 14)" not in main and main.count("cp_async_gs<16>") == 2
    assert main.count("tl::cp_async_wait<3>();") == 2 and main.count("tl::cp_async_commit();") == 2
    tail = tail[:tail.index("tl::cp_async_wait<0>();")]
    assert "cp_async_gs" not in tail and tail.count("tl::cp_async_commit();") == 2
    # (stage i_tail % 2 of V: the analyzer knows i_tail is 14 or 15 and folds it to 4096 * i_tail - 45056)
    assert tail.count("tl::cp_async_wait<3>();") == 2 and "((i_tail * 4096) - 45056)" in tail
    assert nvcc.compile_cubin(src, "sm_80", [])


def test_tail_peel_with_a_symbolic_trip_count():
    """n iterations, n unknown: the main loop runs max(n - 2, 0), the peeled one the rest (all of
    them when n < 2)."""
    configs = {"tl.enable_pipeline_split_groups": True, "tl.enable_pipeline_tail_peel": True,
               "tl.enable_pipeline_early_release": False}
    src = tilelang.lower(_attention(2, n=T.dynamic("n")), target="sm_80", pass_configs=configs).source
    assert "for (int i = 0; i < max((n - 2), 0); ++i)" in src
    assert "for (int i_tail = max((n - 2), 0); i_tail < (max((n - 2), 0) + min(2, n)); ++i_tail)" in src
    assert nvcc.compile_cubin(src, "sm_80", [])
