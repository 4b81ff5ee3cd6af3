"""``tl.enable_atomic_line_staging`` (on by default since session 27, ``transform/atomic_staging.py``): a whole float32
fragment added into a float32 global tensor with a tile ``T.atomic_add`` goes through a per-warp
shared-memory region and comes back row-contiguously as ``red.global.add.v4.f32``, so each warp
instruction adds whole 128-byte lines (attention backward's dQ, session 25). With the key false the
CUDA keeps the in-place column-pair adds (``tl::atomic_addx2``).

The numerics check replays the generated CUDA's index expressions for every thread: each
(thread, register) of the fragment lands on the same dQ element as the in-place lowering's, once,
through a staging word of its own warp."""

import re

import pytest

import tilelang
import tilelang.language as T
from test_bwd_schedule import bwd_kernel

KEY = "tl.enable_atomic_line_staging"
SM90 = "cuda -arch=sm_90a"


def dq_kernel(rows=32, dim=128, threads=256, seq=256):
    """A gemm's 32 x 128 accumulator added into rows of a [B, S, H, D] tensor (sink_gqa_bwd's dQ:
    8 warps, 2 along the rows, 4 along the columns)."""

    @T.prim_func
    def f(A: T.Tensor((rows, 64), T.float16), B: T.Tensor((64, dim), T.float16),
          dQ: T.Tensor((4, seq, 2, dim), T.float32)):
        with T.Kernel(8, threads=threads) as bx:
            a = T.alloc_shared((rows, 64), T.float16)
            b = T.alloc_shared((64, dim), T.float16)
            c = T.alloc_fragment((rows, dim), T.float32)
            T.copy(A, a)
            T.copy(B, b)
            T.clear(c)
            T.gemm(a, b, c)
            T.atomic_add(dQ[1, bx * rows:(bx + 1) * rows, 1, :], c)

    return f


def source(func, target=SM90, **configs):
    return tilelang.compile(func, target=target, pass_configs=configs).get_kernel_source()


def _eval(expr, tx, **env):
    py = expr.replace("((int)threadIdx.x)", str(tx)).replace("((int)blockIdx.x)", "0").replace(" / ", " // ")
    return eval(py, {}, env)    # (fully parenthesised C integer arithmetic on non-negative values)


def _staged_map(src, threads=256):
    """{(thread, register): dQ offset} and the 128-byte lines each warp instruction touched,
    replayed from the staged CUDA round by round (a loop over w storing registers into the
    staging words, optionally under a condition on w, then a loop over j of packed adds; at
    block 0, where no bounds guard holds back an add)."""
    writes = re.findall(r"for \(int (w\w*) = 0; \1 < (\d+); \+\+\1\) \{\s*(?:if \((.*?)\) \{\s*)?"
                        r"\*\(float2\*\)\(\(\(float\*\)smem\) \+ (.*?)\) = \*\(float2\*\)\(c \+ \(\1 \* 2\)\);", src)
    reads = re.findall(r"for \(int (j\w*) = 0; \1 < (\d+); \+\+\1\) \{[^}]*?tl::atomic_addx4\(\(&\(dQ\[(.*?)\]\)\), "
                       r"\(&\(\(\(float\*\)smem\)\[(.*?)\]\)\)\);", src)
    assert writes and len(writes) == len(reads)
    owner, out, lines = {}, {}, []
    for rnd, ((w, n, cond, addr), (j, m, dst_e, at_e)) in enumerate(zip(writes, reads)):
        stage = {}
        for tx in range(threads):
            for v in range(int(n)):
                if cond and not _eval(cond, tx, **{w: v}):
                    continue
                at = _eval(addr, tx, **{w: v})
                for lane in range(2):
                    assert owner.setdefault(at + lane, tx // 32) == tx // 32     # one warp's words only
                    stage[at + lane] = (tx, 2 * v + lane)
        for i in range(int(m)):
            for warp in range(threads // 32):
                touched = set()
                for tx in range(warp * 32, warp * 32 + 32):
                    dst, at = _eval(dst_e, tx, **{j: i}), _eval(at_e, tx, **{j: i})
                    assert at % 4 == 0 and dst % 4 == 0
                    for k in range(4):
                        held = stage.pop(at + k)      # written in this round, read once
                        assert held[0] // 32 == warp and held not in out
                        out[held] = dst + k
                    touched |= {(dst + k) * 4 // 128 for k in range(4)}
                lines.append(len(touched))
        assert not stage        # every staged word was added
    return out, lines


def _inplace_map(src, threads=256):
    loop = re.search(r"for \(int w = 0; w < (\d+); \+\+w\) \{[^}]*?tl::atomic_addx2\(\(&\(dQ\[(.*?)\]\)\), "
                     r"\(&\(c\[\(w \* 2\)\]\)\)\);", src)
    assert loop
    return {(tx, 2 * w + k): _eval(loop.group(2), tx, w=w) + k
            for tx in range(threads) for w in range(int(loop.group(1))) for k in range(2)}


def test_staged_adds_are_whole_lines_through_a_warp_region():
    src = source(dq_kernel(), **{KEY: True})
    assert "atomic_addx2" not in src and src.count("tl::atomic_addx4((&(dQ[") == 1
    assert src.count("__syncwarp();") == 2
    staged = src[src.index("tl::gemm_ss<"):]
    assert "__syncthreads" not in staged and "named_barrier" not in staged     # no block barrier added
    _, lines = _staged_map(src)
    assert set(lines) == {4}        # 32 lanes x 16 bytes: 4 whole 128-byte lines per instruction


def test_staged_adds_land_where_the_in_place_adds_do():
    staged, _ = _staged_map(source(dq_kernel(), **{KEY: True}))
    inplace = _inplace_map(source(dq_kernel(), **{KEY: False}))
    assert len(inplace) == 32 * 128 and staged == inplace


def test_a_wgmma_accumulator_goes_in_rounds_of_register_rows():
    # 64 x 128 over one warpgroup: 16 x 128 floats a warp, staged 8 rows at a time (2 rounds)
    kw = dict(rows=64, dim=128, threads=128)
    src = source(dq_kernel(**kw), **{KEY: True})
    assert src.count("__syncwarp();") == 4 and "atomic_addx2" not in src
    staged, lines = _staged_map(src, threads=128)
    inplace = _inplace_map(source(dq_kernel(**kw), **{KEY: False}), threads=128)
    assert len(inplace) == 64 * 128 and staged == inplace and set(lines) == {4}


def test_the_warp_specialised_backward_keeps_its_barriers_and_block_pair():
    # upstream's bhsd backward with a tile dQ atomic: the consumers' named barriers and the pair
    # of blocks per SM stay; only the dQ adds change
    plain = source(bwd_kernel(tile_atomic=True), **{KEY: False})
    staged = source(bwd_kernel(tile_atomic=True), **{KEY: True})
    assert staged.count("tl::atomic_addx4((&(dQ[") == 1 and "tl::atomic_addx2((&(dQ[" not in staged
    for text in ("named_barrier_sync", "__syncthreads", "__launch_bounds__(256, 2)"):
        assert staged.count(text) == plain.count(text), text


def test_on_by_default_and_false_keeps_the_in_place_adds():
    assert source(dq_kernel()) == source(dq_kernel(), **{KEY: True})
    plain = source(dq_kernel(), **{KEY: False})
    assert "__syncwarp" not in plain and "atomic_addx4" not in plain and plain.count("tl::atomic_addx2(") == 1


def test_rows_past_the_tensor_are_guarded_per_vector():
    # 250 rows: the last tile overhangs; the guard is on each packed add, never on the __syncwarp
    src = source(dq_kernel(seq=250), **{KEY: True})
    reads = src[src.index("for (int j = 0;"):]
    # (the simplifier may halve both sides of ``row < 250``)
    guarded = r"if \(.*< (250|125)\) \{\s*(int cse\w* = .*;\s*)*tl::atomic_addx4"
    assert re.search(guarded, reads[:reads.index("__syncwarp")])
    assert src.count("__syncwarp();") == 2


@pytest.mark.parametrize("dim", [96, 64])
def test_runs_narrower_than_a_line_are_staged_in_vectors(dim):
    """GQA backward's dQ (24 columns a warp) and 16 columns a warp: the staged rows are whole
    16-byte vectors, not whole lines; each element still lands where the in-place adds put it,
    with half the instructions (128 floats each, against 64) and under 60 % of the line touches
    (the in-place column pairs touch 8 lines an instruction; 24 columns: 204 against 384)."""
    src = source(dq_kernel(dim=dim), **{KEY: True})
    assert "atomic_addx2" not in src and src.count("__syncwarp();") == 2
    staged, lines = _staged_map(src)
    inplace = _inplace_map(source(dq_kernel(dim=dim), **{KEY: False}))
    assert len(inplace) == 32 * dim and staged == inplace
    assert len(lines) == len(inplace) // 128 and sum(lines) < 0.6 * (len(inplace) // 64 * 8)


def test_what_does_not_fit_keeps_the_in_place_adds():
    # sm_80 (no vector red): scalar atomics as before; 8 columns per warp: a quarter line
    src = source(dq_kernel(), target="cuda -arch=sm_80", **{KEY: True})
    assert "__syncwarp" not in src and "tl::atomic_add((&(dQ[" in src
    src = source(dq_kernel(dim=32, threads=256), **{KEY: True})
    assert "__syncwarp" not in src and "atomic_addx2" in src
