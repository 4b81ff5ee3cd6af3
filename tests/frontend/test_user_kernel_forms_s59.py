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
