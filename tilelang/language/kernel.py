"""``T.Kernel`` and thread/block accessors.

``T.Kernel(gx, gy, threads=128)`` is a plain Python context manager (no extent at all: a grid of
one block, yielding ``()``): entering it opens TVM
``launch_thread`` frames for blockIdx.x/y/z and threadIdx.x/y/z and yields the block indices.
The innermost open kernel is remembered so ``T.get_thread_binding`` and the tile ops can find the
thread variables and the block size.

``_normalize_threads`` is upstream's block-shape check (``[x, y, z]``, every extent positive).
``T.ClusterKernel(..., cluster_dims=(x, y, z))`` (or ``T.Kernel(cluster_dims=...)``) records the
cluster shape as the PrimFunc attribute ``tl.cluster_dims``; the kernel is then compiled with
``__cluster_dims__`` (a plain launch honours it) and automatic warp specialisation keeps its own
cluster and persistent-grid plans off.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tvm import tirx
from tvm.tirx.script.builder import ir as builder

CLUSTER_ATTR = "tl.cluster_dims"   # PrimFunc attribute of a T.ClusterKernel: "x,y,z"
_BLOCK_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z")
_THREAD_TAGS = ("threadIdx.x", "threadIdx.y", "threadIdx.z")


@dataclass
class KernelContext:
    """What the front end knows about the kernel being parsed."""

    blocks: list = field(default_factory=list)
    block_vars: list = field(default_factory=list)
    threads: list = field(default_factory=list)
    thread_vars: list = field(default_factory=list)
    cluster_dims: list = field(default_factory=lambda: [1, 1, 1])   # T.ClusterKernel's shape
    # T.thread_binding(n, thread=...) inside the kernel: the launched variable -> the extent asked for
    axis_requests: dict = field(default_factory=dict)

    @property
    def num_threads(self) -> int:
        total = 1
        for t in self.threads:
            total *= int(t)
        return total


_STACK: list[KernelContext] = []


def current_kernel() -> KernelContext | None:
    return _STACK[-1] if _STACK else None


def _normalize_threads(threads) -> list:
    """A block shape as ``[x, y, z]`` (missing dimensions 1; ``None`` is 128 threads).

    Raises ``ValueError`` for another type, more than three extents or an extent that is not
    positive (a block of no threads would launch and silently write nothing)."""
    if threads is None:
        threads = 128
    if isinstance(threads, bool):
        raise ValueError(f"threads must be an integer or a list of integers, got {threads!r}")
    if isinstance(threads, int):
        out = [threads, 1, 1]
    elif isinstance(threads, (list, tuple)):
        if not 1 <= len(threads) <= 3:
            raise ValueError(f"threads must be an int or a tuple of 1 to 3 ints, got {threads}")
        out = list(threads) + [1] * (3 - len(threads))
    else:
        raise ValueError(f"threads must be an integer or a list of integers, got {type(threads).__name__}")
    if any(isinstance(t, int) and t <= 0 for t in out):
        raise ValueError(f"threads must be positive, got {threads}")
    return out


def _normalize_cluster_dims(cluster_dims) -> list:
    """A cluster shape as ``[x, y, z]`` of positive ints (at most 16 blocks, the sm_90 limit
    with the non-portable size opt-in; 8 without it)."""
    if isinstance(cluster_dims, int):
        dims = [cluster_dims, 1, 1]
    elif isinstance(cluster_dims, (list, tuple)) and 1 <= len(cluster_dims) <= 3:
        dims = list(cluster_dims) + [1] * (3 - len(cluster_dims))
    else:
        raise ValueError(f"cluster_dims must be an int or a list of 1 to 3 ints, got {cluster_dims!r}")
    if not all(isinstance(d, int) and d > 0 for d in dims):
        raise ValueError(f"cluster_dims must be positive integers, got {cluster_dims!r}")
    if dims[0] * dims[1] * dims[2] > 16:
        raise ValueError(f"a cluster holds at most 16 blocks, got {cluster_dims!r}")
    return dims


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
        full = _normalize_threads(threads)
        if threads is None or isinstance(threads, int):
            threads = [full[0]]
        threads = list(threads)
        for t in threads:
            if not isinstance(t, int):
                raise ValueError(f"threads must be positive integers known at compile time, got {t!r}")
        if full[0] * full[1] * full[2] > 1024:
            raise ValueError(f"a thread block holds at most 1024 threads, got {threads}")
        self.blocks = list(blocks)
        self.threads = threads
        self.cluster_dims = _normalize_cluster_dims(cluster_dims) if cluster_dims is not None else None
        if prelude is not None and not isinstance(prelude, str):
            raise TypeError(f"T.Kernel(prelude=...) takes CUDA source text (str), got {type(prelude).__name__}")
        self.prelude = prelude
        self._frames = []
        self._ctx = None

    def __enter__(self):
        ctx = KernelContext(blocks=self.blocks, threads=self.threads, cluster_dims=list(self.cluster_dims or [1, 1, 1]))
        if self.cluster_dims is not None and self.cluster_dims != [1, 1, 1]:
            # a PrimFunc attribute, carried to the generated source as __cluster_dims__
            try:
                builder.func_attr({CLUSTER_ATTR: ",".join(str(d) for d in self.cluster_dims)})
            except Exception:   # (TVM's message names frames; say what the user can do)
                raise ValueError("T.ClusterKernel (cluster_dims) must be opened directly in the prim_func body, "
                                 "not inside a loop, branch or another frame") from None
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
        if self.prelude:    # CUDA text ahead of the kernel (upstream's prelude=): as T.import_source
            from tilelang.language.intrinsics import import_source
            import_source(self.prelude)
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
    """The threadIdx variable of dimension ``dim`` of the enclosing kernel; 0 for a dimension the
    launch leaves at one thread (``T.get_thread_binding(1)`` of ``threads=32``: threadIdx.y is 0,
    as with upstream, which binds all three)."""
    ctx = _require_kernel("T.get_thread_binding")
    return _binding(ctx.thread_vars, dim, "thread")


def _binding(variables, dim, what):
    if not 0 <= dim < 3:
        raise IndexError(f"T.get_{what}_binding({dim}): CUDA has {what} dimensions 0, 1 and 2")
    if dim >= len(variables):
        return tirx.IntImm("int32", 0)
    return variables[dim]


def get_thread_bindings():
    return list(_require_kernel("T.get_thread_bindings").thread_vars)


def get_block_binding(dim: int = 0):
    ctx = _require_kernel("T.get_block_binding")
    return _binding(ctx.block_vars, dim, "block")


def get_block_bindings():
    return list(_require_kernel("T.get_block_bindings").block_vars)


def get_thread_extent(dim: int = 0) -> int:
    threads = _require_kernel("T.get_thread_extent").threads
    return int(threads[dim]) if dim < len(threads) else 1


def ClusterKernel(*blocks, cluster_dims, threads=None, prelude=None):  # noqa: N802 - upstream's name
    """``T.Kernel`` whose blocks run in thread block clusters of shape ``cluster_dims`` (sm_90+);
    each grid extent must be a multiple of the cluster's."""
    return Kernel(*blocks, threads=threads, cluster_dims=cluster_dims, prelude=prelude)


def get_thread_extents() -> list:
    return [int(t) for t in _normalize_threads(list(_require_kernel("T.get_thread_extents").threads))]


def get_block_extent(dim: int = 0):
    return _require_kernel("T.get_block_extent").blocks[dim]


def get_block_extents() -> list:
    return list(_require_kernel("T.get_block_extents").blocks)


# ----- thread block clusters: the launch's shape, in block-index arithmetic -------------------
def get_cluster_dims() -> list:
    """The enclosing kernel's cluster shape ``[x, y, z]`` (``[1, 1, 1]`` without clusters)."""
    return list(_require_kernel("T.get_cluster_dims").cluster_dims)


def get_cluster_size() -> int:
    """The number of blocks a cluster of the enclosing kernel holds."""
    x, y, z = get_cluster_dims()
    return x * y * z


def get_cluster_id(dim: int = 0):
    """The index along ``dim`` of the cluster this block belongs to: its block index divided by
    the cluster's extent there (the block index itself without clusters; 0 past the grid's dims)."""
    ctx = _require_kernel("T.get_cluster_id")
    block = _binding(ctx.block_vars, dim, "block")
    width = ctx.cluster_dims[dim]
    return block if width == 1 or isinstance(block, tirx.IntImm) else tirx.floordiv(block, tirx.IntImm("int32", width))


def get_cluster_ids() -> list:
    """``get_cluster_id`` along every launched grid dimension."""
    return [get_cluster_id(d) for d in range(len(_require_kernel("T.get_cluster_ids").block_vars))]


def get_cluster_extent(dim: int = 0):
    """The number of clusters along ``dim``: the grid extent there over the cluster's, rounded up."""
    ctx = _require_kernel("T.get_cluster_extent")
    extent = ctx.blocks[dim] if dim < len(ctx.blocks) else 1
    width = ctx.cluster_dims[dim]
    if isinstance(extent, int):
        return -(-extent // width)
    return tirx.floordiv(extent + (width - 1), width) if width > 1 else extent


def get_cluster_extents() -> list:
    """``get_cluster_extent`` along the three dimensions."""
    return [get_cluster_extent(d) for d in range(3)]

