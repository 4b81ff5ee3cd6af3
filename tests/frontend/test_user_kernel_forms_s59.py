"""Forms that upstream's 0.1.15 accepts and ours refused (session 59): a T.Parallel loop reading a
copied fragment at a constant offset (``x[i, j + 8]`` of a (32, 24) fragment in a (32, 16)
loop). Each kernel is lowered and its CUDA compiled with nvcc."""

import re

import tilelang
import tilelang.language as T
from tilelang.jit import nvcc


def _lowered(func, arch="sm_90a"):
    art = tilelang.lower(func, arch)
    assert nvcc.compile_cubin(art.source, art.arch, art.compile_flags)[:4] == b"\x7fELF"
    return art


def _shifted_read(offset, width=24):
    @T.prim_func
    def main(X: T.Tensor((128, width), T.float32), Y: T.Tensor((128, 16), T.float32)):
        with T.Kernel(4, threads=128) as bx:
            x_frag = T.alloc_fragment((32, width), T.float32)
            y_frag = T.alloc_fragment((32, 16), T.float32)
            T.copy(X[bx * 32:(bx + 1) * 32, :], x_frag)
            for i, j in T.Parallel(32, 16):
                y_frag[i, j] = x_frag[i, j + offset] * 2
            T.copy(y_frag, Y[bx * 32:(bx + 1) * 32, :])

    return main


def test_a_copied_fragment_read_at_a_constant_offset():
    """The copy places ``x_frag``; the loop runs each iteration on the threads holding the element
    it reads (``_loop_from_known``), and ``y_frag`` follows the loop. Before, the loop waited for
    ``y_frag`` and the copy out placed it first (TL0203, then TL0201)."""
    src = _lowered(_shifted_read(8)).source
    reads = re.findall(r"y_frag\[\(?v_?\d*\)?\] = \(x_frag\[\((v_?\d*) \+ (\d+)\)\]", src)
    assert reads and all(int(k) > 0 for _, k in reads), src   # a register offset: no shuffle, no shared staging
    _lowered(_shifted_read(0, width=16))     # (the plain form, unchanged)


def _split_mixes_bwd():
    """The shape of DeepSeek TileKernels' (and rtp-llm's vendored) mHC pre-split-mixes backward: an
    annotated fragment ``o`` (each row on one thread) filled by three T.Parallel loops over column
    blocks of it, from fragments copied in; its column sums accumulated by T.reduce_sum."""
    TB, M = 32, 4
    M2, M3 = M * M, 2 * M + M * M
    n = T.dynamic("n")

    @T.prim_func
    def main(g1: T.Tensor[(n, M), T.float32], g2: T.Tensor[(n, M), T.float32], x: T.Tensor[(n, M3), T.float32],
             out: T.Tensor[(n, M3), T.float32], base_grad: T.Tensor[(M3,), T.float32]):
        with T.Kernel(1) as pid:
            g1_frag = T.alloc_fragment((TB, M), T.float32)
            g2_frag = T.alloc_fragment((TB, M), T.float32)
            x_frag = T.alloc_fragment((TB, M3), T.float32)
            o_frag = T.alloc_fragment((TB, M3), T.float32)
            T.annotate_layout({o_frag: T.Fragment((TB, M3), lambda i, j: (i % 32, i // 32 * M3 + j))})
            base_frag = T.alloc_fragment(M3, T.float32)
            T.clear(base_frag)
            for t in T.serial(T.ceildiv(n, TB)):
                T.copy(g1[t * TB, 0], g1_frag)
                T.copy(g2[t * TB, 0], g2_frag)
                T.copy(x[t * TB, 0], x_frag)
                for i, j in T.Parallel(TB, M):
                    o_frag[i, j] = g1_frag[i, j] * x_frag[i, j]
                for i, j in T.Parallel(TB, M):
                    o_frag[i, j + M] = g2_frag[i, j]
                for i, j in T.Parallel(TB, M2):
                    o_frag[i, j + 2 * M] = x_frag[i, j]
                T.reduce_sum(o_frag, base_frag, dim=0, clear=False)
                T.copy(o_frag, out[t * TB, 0])
            T.copy(base_frag, base_grad)

    return main


def test_column_blocks_of_an_annotated_fragment():
    """The first loop (over 4 of o's 24 columns) takes its layout from the annotated ``o`` at once
    instead of waiting for the fragments it reads, and ``x`` (same shape, same index) takes ``o``'s
    layout: each row's 24 values in one thread's registers, so every column block is a register
    offset (TL0201 before: the copy had given ``x`` a default layout first)."""
    src = _lowered(_split_mixes_bwd()).source
    assert "o_frag[(v_2 + 4)] = g2_frag[v_2];" in src and "o_frag[(v_3 + 8)] = x_frag[v_3];" in src
