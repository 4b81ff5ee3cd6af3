"""``T.Kernel`` and thread/block accessors.

``T.Kernel(gx, gy, threads=128)`` is a plain Python context manager (no extent at all: a grid of
one block, yielding ``()``): entering it opens TVM
``launch_thread`` frames for blockIdx.x/y/z and threadIdx.x/y/z and yields the block indices.
The innermost open kernel is remembered so ``T.get_thread_binding`` and the tile ops can find the
thread variables and the block size.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tvm.tirx.script.builder import ir as builder

_BLOCK_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z")
_THREAD_TAGS = ("threadIdx.x", "threadIdx.y", "threadIdx.z")


@dataclass
class KernelContext:
    """What the front end knows about the kernel being parsed."""

    blocks: list = field(default_factory=list)
    block_vars: list = field(default_factory=list)
    threads: list = field(default_factory=list)
    thread_vars: list = field(default_factory=list)

    @property
    def num_threads(self) -> int:
        total = 1
        for t in self.threads:
            total *= int(t)
        return total


_STACK: list[KernelContext] = []


def current_kernel() -> KernelContext | None:
    return _STACK[-1] if _STACK else None


class Kernel:
    """Launch a grid of thread blocks: ``with T.Kernel(gx, gy, threads=128) as (bx, by):``."""

    tl_kernel_launch = True  # the front end's marker: an eager signature ends at the first launch

    def __init__(self, *blocks, threads=128, cluster_dims=None, prelude=None, is_cpu=False):
        if len(blocks) == 1 and isinstance(blocks[0], (list, tuple)):
            blocks = tuple(blocks[0])
        self._no_grid = not blocks  # upstream's ``T.Kernel(threads=...)``: a grid of one block
        if self._no_grid:
            blocks = (1,)
        if not 1 <= len(blocks) <= 3:
            raise ValueError(f"T.Kernel takes 0 to 3 grid extents, got {len(blocks)}")
        if threads is None:
            threads = 128
        if isinstance(threads, int):
            threads = [threads]
        threads = list(threads)
        if not 1 <= len(threads) <= 3:
            raise ValueError(f"threads must be an int or a tuple of 1 to 3 ints, got {threads}")
        for t in threads:
            if not isinstance(t, int) or t <= 0:
                raise ValueError(f"threads must be positive integers known at compile time, got {t!r}")
        if threads[0] * (threads[1] if len(threads) > 1 else 1) * (threads[2] if len(threads) > 2 else 1) > 1024:
            raise ValueError(f"a thread block holds at most 1024 threads, got {threads}")
        self.blocks = list(blocks)
        self.threads = threads
        self.cluster_dims = cluster_dims
        self._frames = []
        self._ctx = None

    def __enter__(self):
        ctx = KernelContext(blocks=self.blocks, threads=self.threads)
        for tag, extent in zip(_BLOCK_TAGS, self.blocks):
            frame = builder.launch_thread(tag, extent)
            ctx.block_vars.append(frame.__enter__())
            self._frames.append(frame)
        for tag, extent in zip(_THREAD_TAGS, self.threads):
            frame = builder.launch_thread(tag, extent)
            ctx.thread_vars.append(frame.__enter__())
            self._frames.append(frame)
        _STACK.append(ctx)
        self._ctx = ctx
        if self._no_grid:
            return ()
        if len(ctx.block_vars) == 1:
            return ctx.block_vars[0]
        return tuple(ctx.block_vars)

    def __exit__(self, exc_type, exc, tb):
        _STACK.pop()
        for frame in reversed(self._frames):
            frame.__exit__(exc_type, exc, tb)
        self._frames = []
        return False


def _require_kernel(what: str) -> KernelContext:
    ctx = current_kernel()
    if ctx is None:
        raise RuntimeError(f"{what} must be used inside `with T.Kernel(...)`")
    return ctx


def get_thread_binding(dim: int = 0):
    """The threadIdx variable of dimension ``dim`` of the enclosing kernel."""
    ctx = _require_kernel("T.get_thread_binding")
    if dim >= len(ctx.thread_vars):
        raise IndexError(f"the kernel has {len(ctx.thread_vars)} thread dimension(s), asked for {dim}")
    return ctx.thread_vars[dim]


def get_thread_bindings():
    return list(_require_kernel("T.get_thread_bindings").thread_vars)


def get_block_binding(dim: int = 0):
    ctx = _require_kernel("T.get_block_binding")
    if dim >= len(ctx.block_vars):
        raise IndexError(f"the kernel has {len(ctx.block_vars)} grid dimension(s), asked for {dim}")
    return ctx.block_vars[dim]


def get_block_bindings():
    return list(_require_kernel("T.get_block_bindings").block_vars)


def get_thread_extent(dim: int = 0) -> int:
    return int(_require_kernel("T.get_thread_extent").threads[dim])
