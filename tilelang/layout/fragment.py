"""Fragment layouts: which thread holds which element of a register tile.

A ``Fragment`` over a tile of ``shape`` is a set of axes. Each axis is either a *thread* axis
(a digit of the thread index: ``(tid // stride) % extent``) or a *local* axis (a digit of the
register index within a thread). Every axis contributes ``coef * value`` to the index of one tile
dimension; a thread axis that contributes to no dimension is a *replication* axis (all its
values hold the same elements). The axes of one dimension form a mixed-radix number system
(sorted by coefficient, each coefficient is the product of the smaller extents), so both
directions are closed-form:

* inverse, for code generation: ``index_d(tid, local) = sum coef * digit``;
* forward, for rewriting accesses: ``local(i, j, ...)`` and ``thread(i, j, ...)`` by digit
  extraction.

This covers the mma.sync accumulator and operand layouts, the default layout of a ``T.Parallel``
loop, and every layout derived from them by reductions and broadcasting.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np
from tvm import tirx

from tilelang.transform.ir_utils import i32, simplify

THREAD, LOCAL = "thread", "local"


@dataclass(frozen=True)
class Axis:
    name: str
    kind: str          # THREAD or LOCAL
    extent: int
    stride: int        # digit position: thread-index stride or register-index stride
    dim: int | None    # tile dimension it indexes; None: a replication (thread) axis
    coef: int = 1      # contribution to that dimension's index


class LayoutError(ValueError):
    """A layout that cannot be built or does not fit; the message is for the user."""


@dataclass(frozen=True)
class Fragment:
    shape: tuple
    num_threads: int
    axes: tuple
    name: str = "fragment"
    _tables: dict = field(default_factory=dict, compare=False, hash=False, repr=False)

    # ----- construction checks ---------------------------------------------------------
    def __post_init__(self):
        for d, extent in enumerate(self.shape):
            digits = sorted((a for a in self.axes if a.dim == d), key=lambda a: a.coef)
            expect = 1
            for a in digits:
                if a.coef != expect:
                    raise LayoutError(f"axes of dimension {d} are not a mixed-radix system: {digits}")
                expect *= a.extent
            if expect != extent:
                raise LayoutError(f"axes of dimension {d} cover {expect} values, the tile has {extent}")
        t = 1
        for a in sorted(self.thread_axes, key=lambda a: a.stride):
            if a.stride != t:
                raise LayoutError(f"thread axes do not tile the thread index: {self.thread_axes}")
            t *= a.extent
        if t != self.num_threads:
            raise LayoutError(f"thread axes cover {t} threads, the block has {self.num_threads}")
        n = 1
        for a in sorted(self.local_axes, key=lambda a: a.stride):
            if a.stride != n:
                raise LayoutError(f"local axes do not tile the register index: {self.local_axes}")
            n *= a.extent

    @property
    def thread_axes(self):
        return tuple(a for a in self.axes if a.kind == THREAD)

    @property
    def local_axes(self):
        return tuple(a for a in self.axes if a.kind == LOCAL)

    @property
    def local_size(self) -> int:
        return math.prod(a.extent for a in self.local_axes)

    @property
    def replication(self) -> int:
        return math.prod(a.extent for a in self.thread_axes if a.dim is None)

    def replica_index(self, tid):
        """Expression that is 0 for exactly one replica of every element."""
        expr = i32(0)
        scale = 1
        for a in self.thread_axes:
            if a.dim is None:
                expr = expr + _digit(tid, a) * scale
                scale *= a.extent
        return simplify(expr)

    # ----- code generation ---------------------------------------------------------------
    def index(self, tid, local) -> list:
        """Tile indices of register ``local`` of thread ``tid`` (expressions)."""
        out = [i32(0) for _ in self.shape]
        for a in self.axes:
            if a.dim is None or a.extent == 1:
                continue
            src = tid if a.kind == THREAD else local
            out[a.dim] = out[a.dim] + _digit(src, a) * a.coef
        return [simplify(e) for e in out]

    def local_of(self, indices) -> "tirx.PrimExpr":
        """Register index holding tile element ``indices`` (in any thread that holds it)."""
        expr = i32(0)
        for a in self.local_axes:
            if a.extent > 1:
                expr = expr + _digit(indices[a.dim], a, by_coef=True) * a.stride
        return simplify(expr)

    def thread_of(self, indices, replica=0):
        expr = i32(0)
        for a in self.thread_axes:
            if a.dim is not None and a.extent > 1:
                expr = expr + _digit(indices[a.dim], a, by_coef=True) * a.stride
        return simplify(expr)

    # ----- numeric view, for checks and hover --------------------------------------------
    def owners(self) -> np.ndarray:
        """``owners[tid, local]`` = flat tile index held there (computed by enumeration)."""
        if "owners" not in self._tables:
            tids = np.arange(self.num_threads)[:, None]
            locs = np.arange(max(self.local_size, 1))[None, :]
            flat = np.zeros((self.num_threads, max(self.local_size, 1)), dtype=np.int64)
            strides = _row_major_strides(self.shape)
            for a in self.axes:
                if a.dim is None:
                    continue
                src = tids if a.kind == THREAD else locs
                flat = flat + ((src // a.stride) % a.extent) * a.coef * strides[a.dim]
            self._tables["owners"] = flat
        return self._tables["owners"]

    def holds(self, tid: int, flat: int) -> bool:
        return bool((self.owners()[tid] == flat).any())

    def describe(self) -> str:
        parts = []
        for a in sorted(self.thread_axes, key=lambda a: a.stride):
            where = "replicated" if a.dim is None else f"dim {a.dim} x{a.coef}"
            parts.append(f"tid/{a.stride}%{a.extent} -> {where}")
        for a in sorted(self.local_axes, key=lambda a: a.stride):
            parts.append(f"reg/{a.stride}%{a.extent} -> dim {a.dim} x{a.coef}")
        return (f"{self.name} {list(self.shape)} over {self.num_threads} threads, "
                f"{self.local_size} register(s)/thread, replication {self.replication}: " + "; ".join(parts))

    def same_as(self, other: "Fragment") -> bool:
        return (self.shape == other.shape and self.num_threads == other.num_threads
                and np.array_equal(self.owners(), other.owners()))

    def renamed(self, name: str) -> "Fragment":
        return replace(self, name=name, _tables={})


def _row_major_strides(shape):
    strides, s = [], 1
    for extent in reversed(shape):
        strides.append(s)
        s *= extent
    return list(reversed(strides))


def _digit(value, axis: Axis, by_coef: bool = False):
    div = axis.coef if by_coef else axis.stride
    if isinstance(value, int):
        return (value // div) % axis.extent
    e = value
    if div != 1:
        e = tirx.floordiv(e, i32(div))
    return tirx.floormod(e, i32(axis.extent))


# ----- constructors ------------------------------------------------------------------------
def _build(shape, num_threads, axes, name):
    axes = [a for a in axes if a.extent > 1]  # a digit with one value carries no information
    return Fragment(tuple(int(s) for s in shape), int(num_threads), tuple(axes), name)


def mma_accumulator(M, N, warp_m, warp_n, num_threads, name="mma accumulator"):
    """The m16n8 accumulator layout of ``T.gemm`` (see src/tl/gemm_sm80.h)."""
    WM, WN = M // warp_m, N // warp_n
    MI, NI = WM // 16, WN // 8
    warps = warp_m * warp_n
    axes = [
        Axis("lane_c", THREAD, 4, 1, 1, 2), Axis("lane_r", THREAD, 8, 4, 0, 1),
        Axis("warp_m", THREAD, warp_m, 32, 0, WM), Axis("warp_n", THREAD, warp_n, 32 * warp_m, 1, WN),
        Axis("c2", LOCAL, 2, 1, 1, 1), Axis("h", LOCAL, 2, 2, 0, 8),
        Axis("ni", LOCAL, NI, 4, 1, 8), Axis("mi", LOCAL, MI, 4 * NI, 0, 16),
    ]
    if num_threads > 32 * warps:
        axes.append(Axis("idle", THREAD, num_threads // (32 * warps), 32 * warps, None))
    return _build((M, N), num_threads, axes, name)


def mma_operand_a(M, K, warp_m, warp_n, num_threads, name="mma A operand"):
    """Register A operand of ``T.gemm`` (rows split over warp_m, replicated over warp_n)."""
    WM = M // warp_m
    MI, KI = WM // 16, K // 16
    axes = [
        Axis("lane_c", THREAD, 4, 1, 1, 2), Axis("lane_r", THREAD, 8, 4, 0, 1),
        Axis("warp_m", THREAD, warp_m, 32, 0, WM), Axis("warp_n", THREAD, warp_n, 32 * warp_m, None),
        Axis("c2", LOCAL, 2, 1, 1, 1), Axis("h", LOCAL, 2, 2, 0, 8), Axis("kh", LOCAL, 2, 4, 1, 8),
        Axis("ki", LOCAL, KI, 8, 1, 16), Axis("mi", LOCAL, MI, 8 * KI, 0, 16),
    ]
    warps = warp_m * warp_n
    if num_threads > 32 * warps:
        axes.append(Axis("idle", THREAD, num_threads // (32 * warps), 32 * warps, None))
    return _build((M, K), num_threads, axes, name)


def default_fragment(shape, num_threads, vector=1, name="parallel"):
    """Spread a tile over threads: vectors of ``vector`` elements along the last dimension,
    consecutive threads on consecutive vectors, then rows; leftover threads replicate."""
    shape = [int(s) for s in shape] or [1]
    axes, t_left, t_stride, l_stride = [], num_threads, 1, 1
    local_later = []
    for d in reversed(range(len(shape))):
        extent, coef = shape[d], 1
        if d == len(shape) - 1 and vector > 1 and extent % vector == 0:
            axes.append(Axis(f"v{d}", LOCAL, vector, l_stride, d, 1))
            l_stride *= vector
            extent //= vector
            coef = vector
        t = math.gcd(extent, t_left)
        if t > 1:
            axes.append(Axis(f"t{d}", THREAD, t, t_stride, d, coef))
            t_stride *= t
            t_left //= t
            coef *= t
            extent //= t
        if extent > 1:
            local_later.append((d, extent, coef))
    for d, extent, coef in reversed(local_later):
        axes.append(Axis(f"l{d}", LOCAL, extent, l_stride, d, coef))
        l_stride *= extent
    if t_left > 1:
        axes.append(Axis("rep", THREAD, t_left, t_stride, None))
    return _build(shape, num_threads, axes, name)


def drop_dim(frag: Fragment, dim: int, keep_unit: bool = False, name=None) -> Fragment:
    """The layout of a reduction's result: dimension ``dim`` removed (or kept with extent 1).
    Threads that held different elements of the reduced dimension become replicas."""
    axes, l_stride = [], 1
    for a in sorted(frag.axes, key=lambda a: (a.kind, a.stride)):
        if a.dim == dim:
            if a.kind == THREAD:
                axes.append(replace(a, dim=None, coef=1))
            continue
        new_dim = a.dim
        if a.dim is not None and a.dim > dim and not keep_unit:
            new_dim = a.dim - 1
        if a.kind == LOCAL:
            axes.append(replace(a, dim=new_dim, stride=l_stride))
            l_stride *= a.extent
        else:
            axes.append(replace(a, dim=new_dim))
    shape = list(frag.shape)
    if keep_unit:
        shape[dim] = 1
    else:
        shape.pop(dim)
    return _build(shape or [1], frag.num_threads, axes, name or f"{frag.name} reduced over dim {dim}")


def project(frag: Fragment, dims: list, name=None) -> Fragment:
    """The layout of a buffer indexed by a subset ``dims`` of a loop's variables (broadcast)."""
    axes, l_stride = [], 1
    remap = {d: k for k, d in enumerate(dims)}
    for a in sorted(frag.axes, key=lambda a: (a.kind, a.stride)):
        if a.dim in remap:
            if a.kind == LOCAL:
                axes.append(replace(a, dim=remap[a.dim], stride=l_stride))
                l_stride *= a.extent
            else:
                axes.append(replace(a, dim=remap[a.dim]))
        elif a.kind == THREAD:
            axes.append(replace(a, dim=None, coef=1))
    shape = [frag.shape[d] for d in dims] or [1]
    return _build(shape, frag.num_threads, axes, name or f"{frag.name} projected on {dims}")
