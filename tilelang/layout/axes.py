"""Fragment layouts in the compiler's axis form: which thread holds which element of a register tile.

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

from tilelang.tir_utils import i32, simplify

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
class AxisFragment:
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

    def same_as(self, other: "AxisFragment") -> bool:
        return (self.shape == other.shape and self.num_threads == other.num_threads
                and np.array_equal(self.owners(), other.owners()))

    def renamed(self, name: str) -> "AxisFragment":
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
    return AxisFragment(tuple(int(s) for s in shape), int(num_threads), tuple(axes), name)


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


def mma_operand_a(M, K, warp_m, warp_n, num_threads, name="mma A operand", elem_bytes=2):
    """Register A operand of ``T.gemm`` (rows split over warp_m, replicated over warp_n), the
    ``gemm_rs`` layout of src/tl/gemm_sm80.h: with ``P = 4 // elem_bytes`` elements per 32-bit
    register (2 for 16-bit, 4 for 8-bit, 1 for tf32), lane ``(r % 8) * 4 + (k % 4P) / P`` holds
    ``P`` consecutive k of each 16 x 8P mma step."""
    P = max(1, 4 // int(elem_bytes))
    WM = M // warp_m
    MI, KI = WM // 16, K // (8 * P)
    axes = [
        Axis("lane_c", THREAD, 4, 1, 1, P), Axis("lane_r", THREAD, 8, 4, 0, 1),
        Axis("warp_m", THREAD, warp_m, 32, 0, WM), Axis("warp_n", THREAD, warp_n, 32 * warp_m, None),
        Axis("cp", LOCAL, P, 1, 1, 1), Axis("h", LOCAL, 2, P, 0, 8), Axis("kh", LOCAL, 2, 2 * P, 1, 4 * P),
        Axis("ki", LOCAL, KI, 4 * P, 1, 8 * P), Axis("mi", LOCAL, MI, 4 * P * KI, 0, 16),
    ]
    warps = warp_m * warp_n
    if num_threads > 32 * warps:
        axes.append(Axis("idle", THREAD, num_threads // (32 * warps), 32 * warps, None))
    return _build((M, K), num_threads, axes, name)


def wgmma_accumulator(M, N, warpgroups, num_threads, name="wgmma accumulator", warpgroups_n=1):
    """The wgmma accumulator layout (src/tl/gemm_sm90.h): ``warpgroups`` warpgroups split M and
    ``warpgroups_n`` split N (warpgroup ``wm + warpgroups * wn``), each thread holds
    ``MI * NW / 2`` elements (``NW = N / warpgroups_n``); warp ``w`` of a warpgroup owns rows
    ``16w..16w+15`` of each 64-row block."""
    MW, NW = M // warpgroups, N // warpgroups_n
    MI, NJ = MW // 64, NW // 8
    axes = [
        Axis("lane_c", THREAD, 4, 1, 1, 2), Axis("lane_r", THREAD, 8, 4, 0, 1),
        Axis("warp", THREAD, 4, 32, 0, 16), Axis("warpgroup", THREAD, warpgroups, 128, 0, MW),
        Axis("warpgroup_n", THREAD, warpgroups_n, 128 * warpgroups, 1, NW),
        Axis("c2", LOCAL, 2, 1, 1, 1), Axis("h", LOCAL, 2, 2, 0, 8),
        Axis("j", LOCAL, NJ, 4, 1, 8), Axis("mi", LOCAL, MI, 4 * NJ, 0, 64),
    ]
    return _build((M, N), num_threads, axes, name)


def wgmma_operand_a(M, K, warpgroups, num_threads, name="wgmma A operand", warpgroups_n=1, elem_bytes=2):
    """Register A operand of wgmma: for 16-bit operands the accumulator layout with N = K
    (element order per 16-wide k-step), so a converted accumulator feeds the next wgmma unchanged;
    for tf32 (``elem_bytes`` 4, one element per register, 8-wide k-steps) the same layout in
    32-bit words: lane ``(r % 8) * 4 + k % 4`` holds columns ``k`` and ``k + 4`` of rows ``r`` and
    ``r + 8``. Replicated over the ``warpgroups_n`` warpgroups splitting N (each needs its M
    warpgroup's whole rows)."""
    P = 2 if int(elem_bytes) == 2 else 1          # elements per 32-bit register
    MW = M // warpgroups
    MI, KI = MW // 64, K // (8 * P)
    axes = [
        Axis("lane_c", THREAD, 4, 1, 1, P), Axis("lane_r", THREAD, 8, 4, 0, 1),
        Axis("warp", THREAD, 4, 32, 0, 16), Axis("warpgroup", THREAD, warpgroups, 128, 0, MW),
        Axis("warpgroup_n", THREAD, warpgroups_n, 128 * warpgroups, None),
        Axis("c2", LOCAL, P, 1, 1, 1), Axis("h", LOCAL, 2, P, 0, 8), Axis("kh", LOCAL, 2, 2 * P, 1, 4 * P),
        Axis("ki", LOCAL, KI, 4 * P, 1, 8 * P), Axis("mi", LOCAL, MI, 4 * P * KI, 0, 64),
    ]
    return _build((M, K), num_threads, axes, name)


def default_fragment(shape, num_threads, vector=1, name="parallel", last_threads=None):
    """Spread a tile over threads: vectors of ``vector`` elements along the last dimension,
    consecutive threads on consecutive vectors, then rows; leftover threads replicate.
    ``last_threads`` caps the threads along the last dimension (its other vectors then lie in
    each thread's registers, ``last_threads`` vectors apart)."""
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
        cap = t_left if last_threads is None or d != len(shape) - 1 else min(t_left, int(last_threads))
        t = math.gcd(extent, cap)
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


def drop_dim(frag: AxisFragment, dim: int, keep_unit: bool = False, name=None) -> AxisFragment:
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


def project(frag: AxisFragment, dims: list, name=None) -> AxisFragment:
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


# ----- user layouts: ``T.Fragment`` ----------------------------------------------------------
# A user gives the forward maps, element -> thread and element -> register (see
# ``tilelang.layout.Fragment``). They are evaluated over the whole (constant) tile with numpy, the
# result is checked to be a layout at all (every element on ``replicate`` distinct threads, dense
# registers, threads inside the block), and the axis form above is recovered from the table, so
# every consumer (loops, copies, reductions, hovers) works on it unchanged. A map that is one to
# one but not a digit map of the thread and register indices is refused: like upstream, whose
# inverse must be an affine iterator map, we need the closed-form inverse ``index(tid, reg)``.

class UserLayoutError(LayoutError):
    """A ``T.Fragment`` that is not a usable layout; ``code`` is the diagnostic code."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


_NP_BINARY = {
    "Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Min": np.minimum, "Max": np.maximum,
    "BitwiseAnd": np.bitwise_and, "BitwiseOr": np.bitwise_or, "BitwiseXor": np.bitwise_xor,
    "LShift": np.left_shift, "RShift": np.right_shift, "EQ": np.equal, "NE": np.not_equal,
    "LT": np.less, "LE": np.less_equal, "GT": np.greater, "GE": np.greater_equal,
    "And": np.logical_and, "Or": np.logical_or,
}


def evaluate_index_expr(expr, env: list):
    """Evaluate an integer TIR expression elementwise over numpy arrays; ``env`` is a list of
    ``(var, array)``. Raises ``ValueError`` on anything that is not index arithmetic."""
    if isinstance(expr, (bool, int, np.integer)):
        return np.int64(expr)
    name = type(expr).__name__
    if name == "IntImm":
        return np.int64(expr.value)
    if name == "Var":
        for var, value in env:
            if var.same_as(expr):
                return value
        raise ValueError(f"'{expr}' is not an index of the layout")
    if name in _NP_BINARY:
        return _NP_BINARY[name](evaluate_index_expr(expr.a, env), evaluate_index_expr(expr.b, env))
    if name in ("FloorDiv", "FloorMod", "Div", "Mod"):
        a, b = evaluate_index_expr(expr.a, env), evaluate_index_expr(expr.b, env)
        if np.any(np.asarray(b) == 0):
            raise ValueError(f"division by zero in '{expr}'")
        if name == "FloorDiv":
            return np.floor_divide(a, b)
        if name == "FloorMod":
            return np.mod(a, b)
        q = np.sign(a) * np.sign(b) * (np.abs(a) // np.abs(b))   # truncating division
        return q if name == "Div" else a - b * q
    if name == "Not":
        return np.logical_not(evaluate_index_expr(expr.a, env))
    if name == "BitwiseNot":
        return np.invert(evaluate_index_expr(expr.a, env))
    if name == "Cast":
        return np.asarray(evaluate_index_expr(expr.value, env)).astype(np.int64)
    if name == "Select":
        return np.where(evaluate_index_expr(expr.condition, env), evaluate_index_expr(expr.true_value, env),
                        evaluate_index_expr(expr.false_value, env))
    if name == "Let":
        return evaluate_index_expr(expr.body, [(expr.var, evaluate_index_expr(expr.value, env))] + list(env))
    if name == "Call" and str(getattr(expr.op, "name", "")).endswith("if_then_else"):
        c, t, f = (evaluate_index_expr(a, env) for a in expr.args)
        return np.where(c, t, f)
    raise ValueError(f"'{expr}' is not integer index arithmetic on the layout's indices")


def user_fragment(shape, num_threads: int, thread, local, name: str = "T.Fragment") -> AxisFragment:
    """The axis form of a user layout given as tables: ``thread[r, *idx]`` is the thread of
    replica ``r`` of element ``idx`` and ``local[*idx]`` its register. Raises ``UserLayoutError``
    (TL0201: does not fit the kernel; TL0203: not a one-to-one thread/register map)."""
    shape = tuple(int(s) for s in shape)
    numel = math.prod(shape)
    thread = np.asarray(thread, dtype=np.int64)
    R = thread.shape[0]
    th = np.broadcast_to(thread, (R,) + shape).reshape(R, numel)
    loc = np.broadcast_to(np.asarray(local, dtype=np.int64), shape).reshape(numel)

    def at(e):
        return "(" + ", ".join(str(int(c)) for c in np.unravel_index(int(e), shape)) + ")"

    def where(k):
        r, e = divmod(int(k), numel)
        return f"element {at(e)}" + (f" (replica {r})" if R > 1 else "")

    if th.min() < 0:
        k = int(np.argmin(th))
        raise UserLayoutError("TL0201", f"maps {where(k)} to thread {int(th.flat[k])}")
    if th.max() >= num_threads:
        k = int(np.argmax(th))
        raise UserLayoutError("TL0201", f"maps {where(k)} to thread {int(th.flat[k])}, but the kernel runs "
                              f"{num_threads} threads")
    if loc.min() < 0:
        e = int(np.argmin(loc))
        raise UserLayoutError("TL0203", f"gives element {at(e)} register index {int(loc[e])}")
    used, size = int(th.max()) + 1, int(loc.max()) + 1
    if num_threads % used:
        raise UserLayoutError("TL0201", f"uses threads 0..{used - 1}, which does not divide the kernel's "
                              f"{num_threads} threads (the remaining threads would replicate the layout)")
    slots = (th * size + loc[None, :]).reshape(-1)
    counts = np.bincount(slots, minlength=used * size)
    if counts.max() > 1:
        s = int(np.argmax(counts))
        a, b = (int(k) for k in np.nonzero(slots == s)[0][:2])
        t, reg = divmod(s, size)
        if a % numel == b % numel:
            raise UserLayoutError("TL0203", f"puts {where(a)} and {where(b)} on the same thread {t}: every "
                                  f"element must be held by exactly replicate={R} distinct threads")
        raise UserLayoutError("TL0203", f"puts {where(a)} and {where(b)} in the same register {reg} of thread {t}")
    if counts.min() == 0:
        per_thread = counts.reshape(used, size).sum(axis=1)
        t = int(np.argmin(per_thread))
        if per_thread[t] == 0:
            why = f"thread {t} holds no element (threads 0..{used - 1} must all hold elements)"
        elif per_thread.min() != per_thread.max():
            why = (f"thread {t} holds {int(per_thread[t])} element(s) but thread {int(np.argmax(per_thread))} holds "
                   f"{int(per_thread.max())}: every thread must hold the same number")
        else:
            t, reg = divmod(int(np.argmin(counts)), size)
            why = f"thread {t} leaves register {reg} unused: register indices must be 0..{int(per_thread[t]) - 1}"
        raise UserLayoutError("TL0203", why)
    table = np.empty(used * size, dtype=np.int64)
    table[slots] = np.tile(np.arange(numel, dtype=np.int64), R)
    table = table.reshape(used, size)
    frag = _axis_form(shape, num_threads, used, table, name)
    if frag is None:
        raise UserLayoutError("TL0203", "is one to one, but not a digit (mixed-radix) map of the thread and "
                              "register indices, so each thread's elements have no closed form; use splits "
                              "and products of the indices (i % a, i // a * b), like upstream layouts")
    return frag


def _axis_form(shape, num_threads, used, table, name):
    """Axes reproducing ``table[tid, reg]`` (flat element) for ``tid < used``, or None."""
    coords = np.stack(np.unravel_index(table, shape), axis=-1) if shape else np.zeros(table.shape + (0,), np.int64)
    if coords[0, 0].any():
        return None  # in axis form thread 0, register 0 holds element 0
    axes = []
    for kind, values in ((THREAD, coords[:, 0]), (LOCAL, coords[0, :])):
        digits = _digits(values)
        if digits is None:
            return None
        for k, (stride, extent, dim, coef) in enumerate(digits):
            if kind == LOCAL and dim is None:
                return None
            label = ("t" if kind == THREAD else "r") + str(k) if dim is not None else "rep"
            axes.append(Axis(label, kind, extent, stride, dim, coef))
    if num_threads > used:
        axes.append(Axis("idle", THREAD, num_threads // used, used, None))
    try:
        frag = _build(shape, num_threads, axes, name)
    except LayoutError:
        return None
    if not np.array_equal(frag.owners()[:used], table):
        return None
    return frag


def _digits(values):
    """Split ``values[x]`` (tile coordinates as a function of an index ``x``) into digits of
    ``x``: [(stride, extent, dim or None, coef)], each digit stepping one dimension (or none)."""
    n, out, stride = len(values), [], 1
    while stride < n:
        delta = values[stride]
        nz = np.nonzero(delta)[0]
        if len(nz) > 1 or (len(nz) == 1 and delta[nz[0]] < 0):
            return None
        run = 1
        while run * stride < n and np.array_equal(values[run * stride], run * delta):
            run += 1
        if run < 2 or (n // stride) % run:
            return None
        out.append((stride, run, int(nz[0]) if len(nz) else None, int(delta[nz[0]]) if len(nz) else 1))
        stride *= run
    return out
