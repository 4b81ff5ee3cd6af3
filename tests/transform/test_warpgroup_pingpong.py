"""The two consumer warpgroups of an attention loop taking turns at the tensor cores
(``tl.enable_warpgroup_pingpong``; ``warp_specialize._Pingpong``: by default in the paired causal
schedule only). The named-barrier
protocol is checked by running the barrier operations of the generated CUDA, warpgroup by
warpgroup, through a model of ``bar.sync`` / ``bar.arrive`` (a phase completes at 256 threads,
whoever brought them) under adversarial schedules: no deadlock, and every completed phase has
128 threads of each warpgroup, over persistent grids of several tiles."""

import itertools
import random
import re
import sys
from pathlib import Path

import pytest

import tilelang

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
import flash_attention as fa  # noqa: E402

KEY = {"tl.enable_warpgroup_pingpong": True}
_OP = re.compile(r"tl::named_barrier_(sync|arrive)\((.+), 256\);")
_GUARD = re.compile(r"if \(\(\(\(int\)threadIdx.x\) >> 7\) == ([01])\) \{")


def _source(causal, configs):
    func = fa.flashattn.get_prim_func(2, 4, 1024, 128, causal, 1, "bhsd", block_M=128, block_N=128, num_stages=2,
                                      threads=256)
    return tilelang.lower(func, "sm_90a", pass_configs=configs).source


def _ops(lines, wg):
    """(op, barrier id) of the named-barrier statements in ``lines`` that warpgroup ``wg`` runs
    (each under ``if (warpgroup == w) { ... } [else { ... }]`` or unguarded)."""
    out, guard = [], None
    for ln in lines:
        g = _GUARD.search(ln)
        if g:
            guard = int(g.group(1))
            continue
        if ln.strip() == "} else {" and guard is not None:
            guard = 1 - guard
            continue
        m = _OP.search(ln)
        if m and (guard is None or guard == wg):
            out.append((m.group(1), int(m.group(2))))
        if ln.strip() == "}":
            guard = None
    return out


def _tile_program(src, wg, iterations, epilogue_barriers=True):
    """The barrier operations warpgroup ``wg`` runs for one tile of ``iterations`` KV steps."""
    body = src[src.index("for (int tile_it = 0;"):]
    lines = body.splitlines()[1:]
    k_at = next(i for i, ln in enumerate(lines) if "for (int k = 1;" in ln)
    depth, k_end = 0, None
    for i in range(k_at, len(lines)):
        depth += lines[i].count("{") - lines[i].count("}")
        if depth == 0:
            k_end = i
            break
    pre, loop, post = _ops(lines[:k_at], wg), _ops(lines[k_at + 1:k_end], wg), _ops(lines[k_end + 1:], wg)
    ops = pre + loop * (iterations - 1) + post
    return [op for op in ops if epilogue_barriers or op[1] != 1]


def _run(programs, pick):
    """Run both warpgroups' operation lists; ``pick(runnable)`` chooses who steps next."""
    pos, count, who, phase = [0, 0], {}, {}, {}
    waiting = [None, None]      # (barrier, phase it waits to complete)
    while True:
        runnable = [w for w in (0, 1) if pos[w] < len(programs[w])
                    and (waiting[w] is None or phase.get(waiting[w][0], 0) > waiting[w][1])]
        for w in (0, 1):
            if waiting[w] is not None and phase.get(waiting[w][0], 0) > waiting[w][1]:
                waiting[w] = None
        if not runnable:
            assert all(pos[w] == len(programs[w]) for w in (0, 1)) and waiting == [None, None], \
                f"deadlock at {pos} waiting {waiting}"
            return
        w = pick(runnable)
        op, bar = programs[w][pos[w]]
        pos[w] += 1
        count[bar] = count.get(bar, 0) + 128
        who.setdefault(bar, []).append(w)
        if op == "sync":
            waiting[w] = (bar, phase.get(bar, 0))
        if count[bar] == 256:
            assert sorted(who[bar]) == [0, 1], f"barrier {bar} completed with warpgroups {who[bar]} alone"
            count[bar], who[bar] = 0, []
            phase[bar] = phase.get(bar, 0) + 1


def _schedules():
    yield lambda r: r[-1]                       # warpgroup 1 runs ahead whenever it can
    yield lambda r: r[0]                        # warpgroup 0 does
    for seed in range(20):
        rng = random.Random(seed)
        yield lambda r, rng=rng: rng.choice(r)


@pytest.mark.parametrize("causal", [False, True])
def test_the_turns_complete_every_phase_with_both_warpgroups(causal):
    src = _source(causal, KEY)
    assert "tl::named_barrier_arrive" in src
    for tiles, iterations, epi in itertools.product((1, 3), (1, 2, 5), (True, False)):
        programs = [sum((_tile_program(src, w, iterations, epi) for _ in range(tiles)), []) for w in (0, 1)]
        for pick in _schedules():
            _run(programs, pick)


def test_without_the_persistent_handshake_a_warpgroup_could_complete_a_phase_alone():
    """The check above can fail: drop ``finish``'s hand back through B_1 and the epilogue's
    barriers, and warpgroup 1, running ahead, arrives twice on B_0 (the last turn of a tile, the
    start of the next) before warpgroup 0 took the first."""
    src = _source(False, KEY)
    programs = []
    for w in (0, 1):
        ops = _tile_program(src, w, 2, epilogue_barriers=False)
        b1 = max(b for _, b in ops)
        tail_from = len(ops) - (2 if w == 0 else 1)     # finish: [sync B0, arrive B1] / [sync B1]
        assert ops[tail_from:] == ([("sync", b1 - 1), ("arrive", b1)] if w == 0 else [("sync", b1)])
        programs.append(ops[:-1] * 2)     # without the last of finish: B_1's hand back / its wait
    with pytest.raises(AssertionError, match="alone|deadlock"):
        _run(programs, lambda r: r[-1])


def test_each_turn_wraps_the_gemm_issues():
    src = _source(True, KEY)
    loop = src[src.index("for (int k = 1;"):]
    loop = loop[:loop.index("tl::wgmma_wait<1")]
    sync = loop.index("tl::named_barrier_sync(")
    assert sync < loop.index("wgmma_gemm_ss_async") < loop.index("wgmma_gemm_rs_async") < \
        loop.index("tl::named_barrier_arrive(")
    assert loop.index("tl::mbarrier_wait") < sync         # K's wait is outside the turn
    assert _source(True, {"tl.enable_warpgroup_pingpong": False}).count("named_barrier_arrive") == 0


def test_by_default_only_the_paired_causal_schedule_takes_turns():
    """Session 38 on the H200: causal 1-2 % faster with the turns, non-causal up to 2 % slower."""
    assert _source(True, {}) == _source(True, KEY)
    assert _source(False, {}) == _source(False, {"tl.enable_warpgroup_pingpong": False})
    assert _source(False, {}) != _source(False, KEY)
