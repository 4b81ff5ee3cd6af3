"""``T.transpose(src, dst)``: ``dst[..., j, i] = src[..., i, j]`` for shared (or fragment) tiles.

It is the parallel loop a user would write, built here so that layout inference and the lowering
treat it like any ``T.Parallel``: the iterations are spread over the block's threads, reads and
writes go through each buffer's own layout (swizzle included).
"""

from __future__ import annotations

from tvm.tirx import is_buffer_var
from tvm.tirx.script import builder as T

from .loops import Parallel


def transpose(src, dst, annotations=None):
    """Transpose the last two dimensions of ``src`` into ``dst`` (whole buffers; leading
    dimensions must match)."""
    for name, buf in (("src", src), ("dst", dst)):
        if not is_buffer_var(buf):
            raise TypeError(f"T.transpose: {name} must be a whole buffer (a T.alloc_shared / T.alloc_fragment "
                            f"tile), got {type(buf).__name__}")
    s_shape, d_shape = [int(x) for x in src.shape], [int(x) for x in dst.shape]
    if len(s_shape) < 2 or s_shape[:-2] + [s_shape[-1], s_shape[-2]] != d_shape:
        raise ValueError(f"T.transpose: {src.name} has shape {s_shape}, so {dst.name} must have shape "
                         f"{s_shape[:-2] + s_shape[-2:][::-1]}, got {d_shape}")
    frames = Parallel(*s_shape).loop_frames()
    loop_vars = []

    def nest(k):
        if k == len(frames):
            idx = list(loop_vars)
            T.buffer_store(dst, src[tuple(idx)], idx[:-2] + [idx[-1], idx[-2]])
            return
        with frames[k] as v:
            loop_vars.append(v)
            nest(k + 1)

    nest(0)


__all__ = ["transpose"]
