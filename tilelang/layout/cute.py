"""CuTe layout algebra (``tilelang.layout.cute``), with upstream TileLang's Python API.

Contract:
- An *IntTuple* is a Python ``int``, a non-constant integer ``PrimExpr``, a ``ScaledBasis``
  (``v@path``: the value ``v`` placed at coordinate ``path``) or a (nested) ``tuple`` of them;
  constant ``IntImm`` inputs are normalised to ``int``. ``from_python`` / ``to_python`` wrap and
  unwrap the ``IntTuple`` object, which adds and multiplies with CuTe's rules.
- ``Layout(shape, stride)`` is an immutable pair of congruent IntTuples. ``layout(coord)`` takes a
  linear index (CuTe ``idx2crd``: mode 0 fastest, the last mode extends past its extent) or a
  hierarchical coordinate, and returns ``int`` / ``PrimExpr`` (integer strides) or a coordinate
  ``tuple`` (``ScaledBasis`` strides). Layouts, swizzles and composed layouts compare with
  ``tvm.ir.structural_equal`` (they hand TVM an FFI value encoding their structure).
- The algebra follows CuTe (``layout.hpp`` / pycute): ``coalesce``, ``filter``, ``composition``
  (``ScaledBasis`` right-hand sides route into the left-hand mode they name), ``complement``,
  ``right_inverse`` / ``left_inverse``, ``logical_divide``, ``logical/tiled/blocked_product``,
  ``size`` / ``cosize`` / ``coshape`` / ``rank`` / ``congruent`` / ``compatible``, ``restrict``.
  Static arithmetic folds to ``int``; dynamic terms stay ``PrimExpr`` (``x*1 -> x``, ``0+x -> x``).
- ``Layout.from_tilelang`` / ``from_tilelang_hierarchical`` / ``ComposedLayout.from_tilelang``
  recover a CuTe view of a ``tilelang.layout.Layout`` (constant extents) by evaluating it over its
  whole domain: an affine layout congruent to the input shape, optionally behind a
  ``Swizzle(b, m, s)`` and an offset; ``None`` when the map has no such form.
"""

from __future__ import annotations

import math
import re

import numpy as np
import tvm_ffi
from tvm import ir, tirx

__all__ = [
    "ComposedLayout", "E", "IntTuple", "Layout", "ScaledBasis", "Swizzle", "blocked_product", "coalesce",
    "compatible", "complement", "composition", "congruent", "cosize", "coshape", "filter", "flatten",
    "flatten_to_tuple", "from_python", "left_inverse", "logical_divide", "logical_product", "make_column_major_layout",
    "make_identity_layout", "make_layout", "make_row_major_layout", "product", "rank", "restrict", "right_inverse",
    "size", "tiled_product", "to_python",
]


class CuteError(ValueError):
    """A layout-algebra request that CuTe rejects (shape mismatch, unsupported dynamic case)."""


# ----------------------------------------------------------------------------------------------
# Scalars: int folding, PrimExpr for dynamic terms
# ----------------------------------------------------------------------------------------------
def _analyzer():
    import tvm

    return tvm.sym.Analyzer()


def _scalar(v):
    """Normalise an integer leaf: IntImm/numpy -> int, PrimExpr kept."""
    if isinstance(v, bool):
        raise TypeError("a layout extent/stride cannot be a bool")
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, tirx.IntImm):
        return int(v.value)
    if isinstance(v, tirx.PrimExpr):
        return v
    raise TypeError(f"expected an integer or PrimExpr, got {type(v).__name__}: {v!r}")


def _is_int(v, value=None):
    return isinstance(v, int) and (value is None or v == value)


def _mul(a, b):
    if isinstance(a, ScaledBasis) and isinstance(b, ScaledBasis):
        raise CuteError(f"cannot multiply two ScaledBasis values {a} * {b}")
    if isinstance(b, ScaledBasis):
        return ScaledBasis(_mul(a, b.value), b.mode)
    if isinstance(a, ScaledBasis):
        return ScaledBasis(_mul(a.value, b), a.mode)
    if isinstance(a, tuple) or isinstance(b, tuple):
        if isinstance(a, tuple) and isinstance(b, tuple):
            raise CuteError(f"cannot multiply two tuples {a} * {b}")
        return tuple(_mul(x, b) for x in a) if isinstance(a, tuple) else tuple(_mul(a, y) for y in b)
    if _is_int(a) and _is_int(b):
        return a * b
    if _is_int(a, 0) or _is_int(b, 0):
        return 0
    if _is_int(a, 1):
        return b
    if _is_int(b, 1):
        return a
    return a * b


def _sadd(a, b):
    if _is_int(a) and _is_int(b):
        return a + b
    if _is_int(a, 0):
        return b
    if _is_int(b, 0):
        return a
    return a + b


def _ssub(a, b):
    if _is_int(a) and _is_int(b):
        return a - b
    if _is_int(b, 0):
        return a
    return a - b


def _div(a, b):
    if _is_int(a) and _is_int(b):
        return a // b
    if _is_int(b, 1):
        return a
    return tirx.floordiv(a, b)


def _mod(a, b):
    if _is_int(a) and _is_int(b):
        return a % b
    if _is_int(b, 1):
        return 0
    return tirx.floormod(a, b)


def _ceil_div(a, b):
    if _is_int(a) and _is_int(b):
        return -(-a // b)
    if _is_int(b, 1):
        return a
    return tirx.floordiv(a + b - 1, b)


def _abs(v):
    if isinstance(v, ScaledBasis):
        return ScaledBasis(_abs(v.value), v.mode)
    if _is_int(v):
        return abs(v)
    return tirx.abs(v)


def _eq(a, b) -> bool:
    """Provable equality of two leaves (ints, PrimExprs, ScaledBasis)."""
    if isinstance(a, ScaledBasis) or isinstance(b, ScaledBasis):
        return isinstance(a, ScaledBasis) and isinstance(b, ScaledBasis) and a.mode == b.mode and _eq(a.value, b.value)
    if _is_int(a) and _is_int(b):
        return a == b
    return bool(_analyzer().can_prove_equal(a, b))


def _min(a, b):
    if _is_int(a) and _is_int(b):
        return min(a, b)
    ana = _analyzer()
    if ana.can_prove(a <= b):
        return a
    if ana.can_prove(b <= a):
        return b
    raise CuteError(f"cannot order the dynamic extents {a} and {b}")


# ----------------------------------------------------------------------------------------------
# ScaledBasis and IntTuple values
# ----------------------------------------------------------------------------------------------
class ScaledBasis:
    """``value@mode``: ``value`` placed at the (nested) coordinate path ``mode`` (outermost first)."""

    __slots__ = ("_value", "_mode")

    def __init__(self, value, mode):
        if isinstance(mode, (int, np.integer)):
            mode = (int(mode),)
        mode = tuple(int(m) for m in mode)
        if not mode or any(m < 0 for m in mode):
            raise ValueError(f"a ScaledBasis mode must be a non-empty path of indices >= 0, got {mode}")
        self._value = _norm(value)
        self._mode = mode

    @property
    def value(self):
        return self._value

    @property
    def mode(self) -> tuple:
        return self._mode

    def __mul__(self, other):
        return _mul(self, _norm(other))

    def __rmul__(self, other):
        return _mul(_norm(other), self)

    def __eq__(self, other):
        return isinstance(other, ScaledBasis) and self._mode == other._mode and _leaf_same(self._value, other._value)

    def __hash__(self):
        return hash(("ScaledBasis", self._mode, str(self._value)))

    def __str__(self):
        return _fmt(self._value) + "".join(f"@{m}" for m in reversed(self._mode))

    def __repr__(self):
        return f"ScaledBasis({_fmt(self._value)}, {self._mode})"


def E(mode) -> ScaledBasis:
    """The unit basis ``1@mode`` (CuTe ``E<mode...>``)."""
    return ScaledBasis(1, mode)


def _leaf_same(a, b) -> bool:
    if _is_int(a) and _is_int(b):
        return a == b
    if _is_int(a) or _is_int(b):
        return False
    if isinstance(a, (ScaledBasis, tuple)) or isinstance(b, (ScaledBasis, tuple)):
        return a == b
    return tvm_ffi.structural_equal(a, b)


def _norm(v):
    """A Python IntTuple from user input (lists -> tuples, IntImm -> int)."""
    if isinstance(v, IntTuple):
        return v.value
    if isinstance(v, ScaledBasis):
        return v
    if isinstance(v, (list, tuple, ir.Array)):
        return tuple(_norm(x) for x in v)
    return _scalar(v)


def _as_arith(v):
    """ScaledBasis -> its arithmetic tuple (``v@(1,0)`` -> ``(0, (v,))``); others unchanged."""
    if isinstance(v, ScaledBasis):
        out = v.value
        for m in reversed(v.mode):
            out = (0,) * m + (out,)
        return out
    return v


def _add(a, b):
    """CuTe IntTuple addition: scalars add, tuples add leaf-wise (the shorter zero-padded)."""
    a, b = _as_arith(a), _as_arith(b)
    if isinstance(a, tuple) or isinstance(b, tuple):
        if _is_int(a, 0):
            return b
        if _is_int(b, 0):
            return a
        if not (isinstance(a, tuple) and isinstance(b, tuple)):
            raise CuteError(f"cannot add a scalar and a tuple: {_fmt(a)} + {_fmt(b)}")
        n = max(len(a), len(b))
        a, b = a + (0,) * (n - len(a)), b + (0,) * (n - len(b))
        return tuple(_add(x, y) for x, y in zip(a, b))
    return _sadd(a, b)


def _fmt(v) -> str:
    if isinstance(v, tuple):
        return "(" + ",".join(_fmt(x) for x in v) + ")"
    return str(v)


def _ffi(v):
    """FFI encoding of an IntTuple (for structural equality)."""
    if isinstance(v, tuple):
        return [_ffi(x) for x in v]
    if isinstance(v, ScaledBasis):
        return ["E", _ffi(v.value), list(v.mode)]
    return v


class IntTuple:
    """A CuTe IntTuple value with CuTe's ``+`` / ``*``; ``to_python`` unwraps it."""

    __slots__ = ("_value",)

    def __init__(self, value):
        self._value = _norm(value)

    @property
    def value(self):
        return self._value

    def __add__(self, other):
        return IntTuple(_add(self._value, _norm(other)))

    def __radd__(self, other):
        return IntTuple(_add(_norm(other), self._value))

    def __mul__(self, other):
        return IntTuple(_mul(self._value, _norm(other)))

    def __rmul__(self, other):
        return IntTuple(_mul(_norm(other), self._value))

    def __eq__(self, other):
        return isinstance(other, IntTuple) and tvm_ffi.structural_equal(self, other)

    def __hash__(self):
        return hash(str(self))

    def __tvm_ffi_object__(self):
        return tvm_ffi.convert(["IntTuple", _ffi(self._value)])

    def __str__(self):
        return _fmt(self._value)

    def __repr__(self):
        return f"IntTuple({self})"

    @staticmethod
    def parse(text: str) -> IntTuple:
        return IntTuple(_Parser(text).whole_int_tuple())


def from_python(value) -> IntTuple:
    """Wrap a Python int / PrimExpr / ScaledBasis / nested sequence as an ``IntTuple``."""
    return IntTuple(value)


def to_python(t):
    """The plain Python value (int, PrimExpr, ScaledBasis, nested tuple) of an IntTuple."""
    return t.value if isinstance(t, IntTuple) else _norm(t)


def product(shape):
    """Product of the leaves of a shape (``int`` when static, else ``PrimExpr``)."""
    shape = _norm(shape)
    if not isinstance(shape, tuple):
        return shape
    out = 1
    for leaf in _leaves(shape):
        out = _mul(out, leaf)
    return out


def _leaves(v) -> list:
    if isinstance(v, tuple):
        return [x for e in v for x in _leaves(e)]
    return [v]


def flatten_to_tuple(value) -> tuple:
    """The leaves of an IntTuple as a flat tuple."""
    return tuple(_leaves(_norm(value)))


def _profile_same(a, b) -> bool:
    if isinstance(a, tuple) != isinstance(b, tuple):
        return False
    return not isinstance(a, tuple) or (len(a) == len(b) and all(_profile_same(x, y) for x, y in zip(a, b)))


def congruent(a, b) -> bool:
    """Same hierarchical profile (tuple nesting), whatever the leaf values."""
    a = a.shape if isinstance(a, Layout) else _norm(a)
    b = b.shape if isinstance(b, Layout) else _norm(b)
    return _profile_same(a, b)


def compatible(a, b) -> bool:
    """Shape ``a`` is compatible with ``b``: equal size, and each scalar of ``a`` covers a subtree of
    ``b`` of the same size (directional; dynamic sizes are compared by provable value)."""
    a = a.shape if isinstance(a, Layout) else _norm(a)
    b = b.shape if isinstance(b, Layout) else _norm(b)
    if isinstance(a, tuple):
        return isinstance(b, tuple) and len(a) == len(b) and all(compatible(x, y) for x, y in zip(a, b))
    return _eq(a, product(b))


# ----------------------------------------------------------------------------------------------
# Layout
# ----------------------------------------------------------------------------------------------
def _crd2idx(coord, shape, stride):
    if isinstance(coord, tuple):
        if not isinstance(shape, tuple):
            if len(coord) == 1:
                return _crd2idx(coord[0], shape, stride)
            raise CuteError(f"coordinate {_fmt(coord)} is not congruent to shape {_fmt(shape)}")
        if len(coord) != len(shape):
            raise CuteError(f"coordinate {_fmt(coord)} has {len(coord)} modes, shape {_fmt(shape)} {len(shape)}")
        out = 0
        for c, s, d in zip(coord, shape, stride):
            out = _add(out, _crd2idx(c, s, d))
        return out
    if isinstance(shape, tuple):
        out, rest = 0, coord
        for k, (s, d) in enumerate(zip(shape, stride)):
            if k + 1 == len(shape):
                c = rest
            else:
                extent = product(s)
                c, rest = _mod(rest, extent), _div(rest, extent)
            out = _add(out, _crd2idx(c, s, d))
        return out
    return _as_arith(_mul(coord, stride))


def _compact(shape, row_major=False):
    leaves = _leaves(shape)
    order = list(reversed(range(len(leaves)))) if row_major else list(range(len(leaves)))
    strides = [None] * len(leaves)
    current = 1
    for k in order:
        strides[k] = 0 if _is_int(leaves[k], 1) else current
        current = _mul(current, leaves[k])
    it = iter(strides)

    def rebuild(s):
        return tuple(rebuild(x) for x in s) if isinstance(s, tuple) else next(it)

    return rebuild(shape)


class Layout:
    """An immutable CuTe layout ``shape:stride`` (see the module docstring)."""

    __slots__ = ("_shape", "_stride")

    def __init__(self, shape, stride=None):
        shape = _norm(shape)
        stride = _compact(shape) if stride is None else _norm(stride)
        if not _profile_same(shape, stride):
            raise CuteError(f"layout shape {_fmt(shape)} and stride {_fmt(stride)} are not congruent")
        if any(isinstance(s, ScaledBasis) for s in _leaves(shape)):
            raise CuteError(f"a layout shape cannot hold a ScaledBasis: {_fmt(shape)}")
        self._shape, self._stride = shape, stride

    @property
    def shape(self):
        return self._shape

    @property
    def stride(self):
        return self._stride

    def __getitem__(self, idx: int) -> Layout:
        if not isinstance(self._shape, tuple):
            if idx in (0, -1):
                return self
            raise IndexError(f"mode {idx} of the rank-1 layout {self}")
        return Layout(self._shape[idx], self._stride[idx])

    def __len__(self):
        return rank(self)

    def __call__(self, coord):
        return _crd2idx(_norm(coord), self._shape, self._stride)

    def with_shape(self, shape) -> Layout:
        """This layout re-read over ``shape`` (``composition(self, make_layout(shape))``)."""
        return composition(self, make_layout(shape))

    def __eq__(self, other):
        return isinstance(other, Layout) and tvm_ffi.structural_equal(self, other)

    def __hash__(self):
        return hash(str(self))

    def __tvm_ffi_object__(self):
        return tvm_ffi.convert(["Layout", _ffi(self._shape), _ffi(self._stride)])

    def __str__(self):
        return f"{_fmt(self._shape)}:{_fmt(self._stride)}"

    def __repr__(self):
        return f"Layout({self})"

    @staticmethod
    def parse(text: str) -> Layout:
        """Inverse of ``str``: ``"(4,(2,2)):(1,(4,8))"``, ``"(128,64):(1@0,1@1)"``."""
        return _Parser(text).whole_layout()

    @staticmethod
    def from_tilelang(layout) -> Layout | None:
        """The plain affine layout (congruent to the input shape) computing ``layout``'s linearised
        index, or ``None`` when it is not affine (a swizzle, a nonzero base, a non-linear map)."""
        table = _tilelang_table(layout, strict=False)
        if table is None:
            return None
        found = _affine_decode(table)
        if found is None or found[0] != 0:
            return None
        return found[1]

    @staticmethod
    def from_tilelang_hierarchical(layout) -> Layout | None:
        """A basis-strided layout computing every output of ``layout`` (output ``k`` on axis
        ``E(k)``); ``None`` when some output is not affine or one input mode feeds two outputs."""
        return _hierarchical_decode(layout)

    def to_tilelang(self):
        """A ``tilelang.layout.Layout`` over the top-level mode sizes; its outputs are the result
        (a scalar, or the coordinate of basis-strided layouts, flattened)."""
        from .layout import Layout as TLLayout

        shape = self._shape if isinstance(self._shape, tuple) else (self._shape,)

        def forward(*coords):
            value = self(tuple(coords) if isinstance(self._shape, tuple) else coords[0])
            return list(_leaves(value))

        return TLLayout([product(s) for s in shape], forward)


def rank(layout) -> int:
    shape = layout.shape if isinstance(layout, (Layout, ComposedLayout)) else _norm(layout)
    return len(shape) if isinstance(shape, tuple) else 1


def size(layout):
    """Domain size of a layout / composed layout, or the product of a shape."""
    if isinstance(layout, (Layout, ComposedLayout)):
        return product(layout.shape)
    return product(layout)


def flatten(layout: Layout) -> Layout:
    """The layout with its shape/stride flattened to one level (a scalar layout stays scalar)."""
    if not isinstance(layout.shape, tuple):
        return layout
    return Layout(tuple(_leaves(layout.shape)), tuple(_leaves(layout.stride)))


def _from_modes(shapes, strides) -> Layout:
    """Layout of a mode list: ``1:0`` when empty, scalar when one mode, else a flat tuple."""
    if not shapes:
        return Layout(1, 0)
    if len(shapes) == 1:
        return Layout(shapes[0], strides[0])
    return Layout(tuple(shapes), tuple(strides))


def coalesce(layout: Layout, max_extent=None) -> Layout:
    """Merge contiguous modes and drop size-1 ones; the function is unchanged (CuTe coalesce)."""
    rs, rd = [], []
    for s, d in zip(_leaves(layout.shape), _leaves(layout.stride)):
        if _is_int(s, 1):
            continue
        if rs and _eq(_mul(rs[-1], rd[-1]), d):
            merged = _mul(rs[-1], s)
            if max_extent is None or not _is_int(merged) or merged <= max_extent:
                rs[-1] = merged
                continue
        rs.append(s)
        rd.append(d)
    return _from_modes(rs, rd)


def filter(layout: Layout) -> Layout:  # noqa: A001 - CuTe's name
    """``coalesce`` after dropping stride-0 (broadcast) and size-1 modes."""
    keep = [(s, d) for s, d in zip(_leaves(layout.shape), _leaves(layout.stride))
            if not _is_int(d, 0) and not _is_int(s, 1)]
    return coalesce(_from_modes([s for s, _ in keep], [d for _, d in keep]))


def _static_leaves(layout, what):
    shapes, strides = _leaves(layout.shape), _leaves(layout.stride)
    if not all(_is_int(x) for x in shapes + strides):
        raise CuteError(f"{what} needs a static layout, got {layout}")
    return shapes, strides


def right_inverse(layout: Layout) -> Layout:
    """``R`` with ``layout(R(i)) == i`` for ``i < size(R)`` (CuTe right_inverse)."""
    shapes, strides = _static_leaves(layout, "right_inverse")
    rstrides, acc = [], 1
    for s in shapes:
        rstrides.append(acc)
        acc *= s
    # Follow the stride chain 1, s*1, ... through the modes (stride-0 / size-1 modes never join).
    rs, rd, current = [], [], 1
    modes = [(d, s, r) for d, s, r in zip(strides, shapes, rstrides) if s != 1 and d != 0]
    while True:
        nxt = next(((d, s, r) for d, s, r in modes if abs(d) == current), None)
        if nxt is None or nxt[0] < 0:
            break
        d, s, r = nxt
        rs.append(s)
        rd.append(r)
        current = s * d
    return coalesce(_from_modes(rs, rd))


def left_inverse(layout: Layout) -> Layout:
    """``L`` with ``L(layout(i)) == i`` over the domain (CuTe left_inverse); codomain gaps before the
    first stride get a stride-0 mode, gaps between modes extend the lower mode."""
    c = coalesce(layout)
    shapes, strides = _static_leaves(c, "left_inverse")
    rstrides, acc = [], 1
    for s in shapes:
        rstrides.append(acc)
        acc *= s
    items = sorted((d, s, r) for d, s, r in zip(strides, shapes, rstrides) if d != 0 and s != 1)
    rs, rd = [], []
    if items and items[0][0] != 1:
        rs.append(items[0][0])
        rd.append(0)
    for k, (d, s, r) in enumerate(items):
        rs.append(items[k + 1][0] // d if k + 1 < len(items) else s)
        rd.append(r)
    return coalesce(_from_modes(rs, rd))


def _basis_get(layout: Layout, path) -> Layout:
    for m in path:
        if not isinstance(layout.shape, tuple):
            if m == 0:
                continue
            raise CuteError(f"basis path {path} leaves the rank-1 layout {layout}")
        layout = layout[m]
    return layout


def composition(lhs: Layout, rhs: Layout) -> Layout:
    """``R`` with ``R(i) == lhs(rhs(i))``, congruent to ``rhs`` (CuTe composition)."""
    if not isinstance(rhs, Layout):
        rhs = make_layout(rhs)
    rshape, rstride = rhs.shape, rhs.stride
    if isinstance(rshape, tuple):
        subs = [composition(lhs, Layout(s, d)) for s, d in zip(rshape, rstride)]
        return Layout(tuple(x.shape for x in subs), tuple(x.stride for x in subs))
    if _is_int(rstride, 0):
        return Layout(rshape, 0)
    if isinstance(rstride, ScaledBasis):
        return composition(_basis_get(lhs, rstride.mode), Layout(rshape, rstride.value))
    # Peel the coalesced lhs (fewer divisibility conflicts); a trailing size-1 mode is kept so that
    # indices past the domain extend along the same stride as ``lhs`` itself does.
    merged = coalesce(lhs)
    shapes, strides = _leaves(merged.shape), _leaves(merged.stride)
    if shapes == [1]:  # every mode has size 1: coalesce's 1:0 dropped the stride
        shapes, strides = [], []
    last_shape, last_stride = _leaves(lhs.shape)[-1], _leaves(lhs.stride)[-1]
    if _is_int(last_shape, 1):
        shapes, strides = shapes + [1], strides + [last_stride]
    rs, rd = [], []
    rest_shape, rest_stride = rshape, rstride
    for s, d in zip(shapes[:-1], strides[:-1]):
        if _is_int(s) and _is_int(rest_stride) and s % rest_stride and rest_stride % s:
            raise CuteError(f"composition {lhs} o {rhs}: stride {rest_stride} does not divide nor is "
                            f"divided by the mode extent {s}")
        q = _div(s, rest_stride)
        new_shape = _min(1 if _is_int(q) and q < 1 else q, rest_shape)
        if not _is_int(new_shape, 1):
            rs.append(new_shape)
            rd.append(_mul(rest_stride, d))
        rest_shape = _div(rest_shape, new_shape)
        rest_stride = _ceil_div(rest_stride, s)
    if not _is_int(rest_shape, 1) or not rs:
        rs.append(rest_shape)
        rd.append(_mul(rest_stride, strides[-1]))
    return _from_modes(rs, rd)


def complement(layout: Layout, cotarget=1) -> Layout:
    """The layout addressing what ``layout`` leaves out of ``[0, cotarget)`` (CuTe complement)."""
    cotarget = _norm(cotarget)
    shapes, strides = _leaves(layout.shape), _leaves(layout.stride)
    pairs = [(d, s) for s, d in zip(shapes, strides) if not _is_int(d, 0) and not _is_int(s, 1)]
    if any(isinstance(d, ScaledBasis) for d, _ in pairs):
        raise CuteError(f"complement of a ScaledBasis-strided layout {layout} is not supported")
    if not all(_is_int(d) and _is_int(s) for d, s in pairs):
        if len(pairs) > 1:
            raise CuteError(f"complement with dynamic strides/extents needs a rank-1 layout, got {layout}")
    else:
        pairs.sort()
    rs, rd, current = [], [], 1
    for d, s in pairs:
        rs.append(_div(d, current))
        rd.append(current)
        current = _mul(s, d)
    rs.append(_ceil_div(cotarget, current))
    rd.append(current)
    return coalesce(Layout(tuple(rs), tuple(rd)))


def _concat(layouts) -> Layout:
    return Layout(tuple(x.shape for x in layouts), tuple(x.stride for x in layouts))


def logical_divide(layout: Layout, tiler: Layout) -> Layout:
    """``(tile, rest)``: ``composition(layout, (tiler, complement(tiler, size(layout))))``."""
    return composition(layout, _concat([tiler, complement(tiler, size(layout))]))


def logical_product(block: Layout, tiler: Layout) -> Layout:
    """``(block, complement(block, size(block)*cosize(tiler)) o tiler)``."""
    rest = composition(complement(block, _mul(size(block), cosize(tiler))), tiler)
    return _concat([block, rest])


def tiled_product(block: Layout, tiler: Layout) -> Layout:
    """``logical_product`` with a rest mode of rank >= 2 unpacked into top-level modes."""
    result = logical_product(block, tiler)
    rest = result[1]
    if isinstance(rest.shape, tuple) and len(rest.shape) >= 2:
        return Layout((block.shape,) + rest.shape, (block.stride,) + rest.stride)
    return result


def _append(layout: Layout, r: int) -> Layout:
    shape = layout.shape if isinstance(layout.shape, tuple) else (layout.shape,)
    stride = layout.stride if isinstance(layout.stride, tuple) else (layout.stride,)
    pad = r - len(shape)
    return Layout(shape + (1,) * pad, stride + (0,) * pad)


def blocked_product(block: Layout, tiler: Layout) -> Layout:
    """Mode ``i`` of the result is ``(block_i, rest_i)`` (ranks padded with ``1:0``)."""
    r = max(rank(block), rank(tiler))
    if r == 1:
        return logical_product(block, tiler)
    result = logical_product(_append(block, r), _append(tiler, r))
    b, t = result[0], result[1]
    return Layout(tuple((b.shape[i], t.shape[i]) for i in range(r)),
                  tuple((b.stride[i], t.stride[i]) for i in range(r)))


def coshape(layout: Layout):
    """Codomain extent: ``1 + sum (shape-1)*|stride|`` (per axis for ScaledBasis strides)."""
    acc = 0
    for s, d in zip(_leaves(layout.shape), _leaves(layout.stride)):
        acc = _add(acc, _as_arith(_mul(_ssub(s, 1), _abs(d))))

    def plus_one(v):
        return tuple(plus_one(x) for x in v) if isinstance(v, tuple) else _sadd(v, 1)

    return plus_one(acc)


def cosize(layout: Layout):
    """``size(coshape(layout))``."""
    return product(coshape(layout))


def make_layout(shape, stride=None) -> Layout:
    """``make_layout(shape, stride=None)`` (compact column-major by default; static size-1 modes get
    stride 0), or ``make_layout([layout, ...])`` concatenating layouts as top-level modes."""
    if isinstance(shape, (list, tuple)) and shape and all(isinstance(x, Layout) for x in shape):
        if stride is not None:
            raise CuteError("make_layout([layouts]) takes no stride")
        return _concat(shape)
    if isinstance(shape, Layout):
        return shape
    return Layout(shape, stride)


def make_column_major_layout(shape) -> Layout:
    return Layout(shape, _compact(_norm(shape)))


def make_row_major_layout(shape) -> Layout:
    shape = _norm(shape)
    return Layout(shape, _compact(shape, row_major=True))


def make_identity_layout(shape) -> Layout:
    """Each leaf's stride is the unit basis of its (nested) position: ``layout(i)`` is the coordinate."""
    shape = _norm(shape)

    def basis(s, path):
        if isinstance(s, tuple):
            return tuple(basis(x, path + (k,)) for k, x in enumerate(s))
        return E(path)

    stride = basis(shape, ()) if isinstance(shape, tuple) else E(0)
    return Layout(shape, stride)


def restrict(layout: Layout, region):
    """``(offset, sublayout)`` of the sub-box ``region`` (one ``Range`` per top-level mode):
    ``layout(mins + c) == offset + sublayout(c)``."""
    import tvm

    n = rank(layout)
    region = list(region)
    if len(region) != n:
        raise tvm.error.InternalError(f"restrict: the region has {len(region)} ranges, the layout {layout} "
                                      f"has rank {n}")
    mins = tuple(_scalar(r.min) for r in region)
    extents = [_scalar(r.extent) for r in region]
    if isinstance(layout.shape, tuple):
        offset = layout(mins)
        subs = [layout[i].with_shape(extents[i]) for i in range(n)]
        return offset, _concat(subs)
    return layout(mins[0]), layout.with_shape(extents[0])


# ----------------------------------------------------------------------------------------------
# Swizzle and ComposedLayout
# ----------------------------------------------------------------------------------------------
class Swizzle:
    """CuTe ``Swizzle<b, m, s>``: ``x ^ ((x & (((1<<b)-1) << (m+s))) >> s)``."""

    __slots__ = ("b_bits", "m_base", "s_shift")

    def __init__(self, b_bits: int, m_base: int, s_shift: int):
        self.b_bits, self.m_base, self.s_shift = int(b_bits), int(m_base), int(s_shift)
        if self.b_bits < 0 or self.m_base < 0:
            raise ValueError(f"Swizzle bits must be >= 0, got {self}")

    @property
    def is_swizzled(self) -> bool:
        return self.b_bits > 0

    def __call__(self, x):
        if not self.is_swizzled:
            return x
        yyy = ((1 << self.b_bits) - 1) << (self.m_base + self.s_shift)
        if isinstance(x, (int, np.integer, np.ndarray)):
            return x ^ ((x & yyy) >> self.s_shift)
        return tirx.bitwise_xor(x, tirx.shift_right(tirx.bitwise_and(x, yyy), self.s_shift))

    def recast(self, old_bits: int, new_bits: int) -> Swizzle:
        """The same swizzle over elements of ``new_bits`` instead of ``old_bits``."""
        if not self.is_swizzled or old_bits == new_bits:
            return self
        shift = int(math.log2(old_bits)) - int(math.log2(new_bits))
        return Swizzle(self.b_bits, self.m_base + shift, self.s_shift)

    def to_swizzle_mode(self):
        from .swizzle import SwizzleMode

        if not self.is_swizzled:
            return SwizzleMode.NONE
        modes = {1: SwizzleMode.SWIZZLE_32B, 2: SwizzleMode.SWIZZLE_64B, 3: SwizzleMode.SWIZZLE_128B}
        if self.m_base != 4 or self.s_shift != 3 or self.b_bits not in modes:
            raise CuteError(f"{self} is not a TMA/wgmma swizzle (Sw<1..3,4,3> in bytes)")
        return modes[self.b_bits]

    def __eq__(self, other):
        return isinstance(other, Swizzle) and (self.b_bits, self.m_base, self.s_shift) == (
            other.b_bits, other.m_base, other.s_shift)

    def __hash__(self):
        return hash((self.b_bits, self.m_base, self.s_shift))

    def __tvm_ffi_object__(self):
        return tvm_ffi.convert(["Swizzle", self.b_bits, self.m_base, self.s_shift])

    def __str__(self):
        return f"Sw<{self.b_bits},{self.m_base},{self.s_shift}>"

    __repr__ = __str__

    @staticmethod
    def parse(text: str) -> Swizzle:
        m = re.fullmatch(r"\s*Sw<\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*>\s*", text)
        if m is None:
            raise ValueError(f"cannot parse a swizzle from {text!r} (expected 'Sw<b,m,s>')")
        return Swizzle(*map(int, m.groups()))


def _recast_layout(layout: Layout, old_bits: int, new_bits: int) -> Layout:
    """Re-express ``layout`` in ``new_bits`` units: the unit-stride mode is scaled, other strides too."""
    if old_bits == new_bits:
        return layout
    if old_bits > new_bits:
        r = old_bits // new_bits

        def leaf(s, d):
            return (_mul(s, r), d) if _is_int(d, 1) else (s, _mul(d, r))
    else:
        r = new_bits // old_bits

        def leaf(s, d):
            return (_div(s, r), d) if _is_int(d, 1) else (s, _div(d, r))

    def walk(s, d):
        if isinstance(s, tuple):
            pairs = [walk(x, y) for x, y in zip(s, d)]
            return tuple(p[0] for p in pairs), tuple(p[1] for p in pairs)
        return leaf(s, d)

    shape, stride = walk(layout.shape, layout.stride)
    return Layout(shape, stride)


class ComposedLayout:
    """``swizzle(offset + layout(c))`` (CuTe ``ComposedLayout<Swizzle, offset, Layout>``)."""

    __slots__ = ("swizzle", "offset", "layout")

    def __init__(self, swizzle: Swizzle, offset, layout: Layout):
        self.swizzle, self.offset, self.layout = swizzle, _norm(offset), layout

    @property
    def shape(self):
        return self.layout.shape

    @property
    def stride(self):
        return self.layout.stride

    def __call__(self, coord):
        return self.swizzle(_sadd(self.offset, self.layout(coord)))

    def recast(self, old_bits: int, new_bits: int) -> ComposedLayout:
        """The same map over ``new_bits``-wide elements (m_base moves by log2(old/new))."""
        offset = self.offset
        if _is_int(offset):
            offset = offset * old_bits // new_bits
        return ComposedLayout(self.swizzle.recast(old_bits, new_bits), offset,
                              _recast_layout(self.layout, old_bits, new_bits))

    def __tvm_ffi_object__(self):
        return tvm_ffi.convert(["ComposedLayout", self.swizzle.__tvm_ffi_object__(), _ffi(self.offset),
                                self.layout.__tvm_ffi_object__()])

    def __str__(self):
        return f"{self.swizzle} o {_fmt(self.offset)} o {self.layout}"

    def __repr__(self):
        return f"ComposedLayout({self})"

    @staticmethod
    def from_tilelang(layout, buffer=None) -> ComposedLayout | None:
        """Recover ``Swizzle o offset o affine`` from a TileLang layout (linearised index, element
        units); with ``buffer`` the result is recast to bytes. ``None`` when no swizzle over an affine
        layout reproduces it; raises when an extent is not constant."""
        table = _tilelang_table(layout, strict=True)
        if table is None:
            return None
        found = _swizzle_decode(table)
        if found is None:
            return None
        swz, offset, affine = found
        result = ComposedLayout(swz, offset, affine)
        if buffer is not None:
            from .swizzle import _buffer_of

            bits = tvm_ffi.dtype(str(_buffer_of(buffer).dtype)).bits
            if bits != 8:
                result = result.recast(bits, 8)
        return result


# ----------------------------------------------------------------------------------------------
# Decoding TileLang layouts
# ----------------------------------------------------------------------------------------------
def _tilelang_outputs(layout, strict: bool):
    from .layout import _evaluate_outputs

    index = getattr(layout, "forward_index", None)
    shape = getattr(layout, "shape", None)
    if index is None or shape is None:
        raise TypeError(f"expected a tilelang.layout.Layout with an index map, got {layout!r}")
    shape = [_scalar(s) for s in shape]
    if not all(_is_int(s) for s in shape):
        if strict:
            raise CuteError(f"layout extents must be constant to decode a swizzle, got {list(layout.shape)}")
        return None, None
    outs = _evaluate_outputs(shape, list(index))
    if outs is None:
        if strict:
            raise CuteError(f"cannot evaluate the layout {layout!r} over its domain (non-index arithmetic, or "
                            "the domain is too large)")
        return None, None
    return shape, [np.asarray(o, dtype=np.int64) for o in outs]


def _tilelang_table(layout, strict: bool):
    shape, outs = _tilelang_outputs(layout, strict)
    if outs is None:
        return None
    extents = [int(o.max()) + 1 if o.size else 1 for o in outs]
    flat = np.zeros(tuple(shape), dtype=np.int64)
    for o, ext in zip(outs, extents):
        flat = flat * ext + o
    return flat


def _decompose_1d(f: np.ndarray):
    """Modes ``[(extent, stride)]`` with ``f(x) == sum`` over ``idx2crd(x)``; None if none fits."""
    n = len(f)
    if n == 1:
        return [(1, 0)]
    modes, block = [], 1
    while block < n:
        d = int(f[block])
        limit = n // block
        k = 1
        while k < limit and int(f[block * k]) == k * d:
            k += 1
        while k > 1 and limit % k:
            k -= 1
        if k < 2:
            return None
        modes.append((k, d))
        block *= k
    x = np.arange(n, dtype=np.int64)
    rebuilt, rest = np.zeros(n, dtype=np.int64), x.copy()
    for k, d in modes:
        rebuilt += (rest % k) * d
        rest //= k
    return modes if np.array_equal(rebuilt, f) else None


def _affine_modes(table: np.ndarray):
    """``(offset, [modes per input dim])`` of a separable affine table, or None."""
    offset = int(table.flat[0])
    rel = table - offset
    per_dim, model = [], np.zeros_like(rel)
    for axis, n in enumerate(rel.shape):
        idx = [0] * rel.ndim
        idx[axis] = slice(None)
        f = rel[tuple(idx)]
        shape = [1] * rel.ndim
        shape[axis] = n
        model = model + f.reshape(shape)
        per_dim.append(f)
    if not np.array_equal(model, rel):
        return None
    out = []
    for f in per_dim:
        modes = _decompose_1d(f)
        if modes is None:
            return None
        out.append(modes)
    return offset, out


def _mode_layout(modes):
    if len(modes) == 1:
        return modes[0]
    return tuple(k for k, _ in modes), tuple(d for _, d in modes)


def _affine_decode(table: np.ndarray):
    found = _affine_modes(table)
    if found is None:
        return None
    offset, dims = found
    pairs = [_mode_layout(m) for m in dims]
    return offset, Layout(tuple(p[0] for p in pairs), tuple(p[1] for p in pairs))


def _swizzle_decode(table: np.ndarray):
    plain = _affine_decode(table)
    if plain is not None:
        return Swizzle(0, 0, 0), plain[0], plain[1]
    if table.size == 0 or int(table.min()) < 0:
        return None
    width = int(table.max()).bit_length()
    for b in range(1, width + 1):
        for s in range(b, width + 1):
            for m in range(0, width - b - s + 1):
                swz = Swizzle(b, m, s)
                found = _affine_decode(swz(table))
                if found is not None:
                    return swz, found[0], found[1]
    return None


def _boundaries(modes):
    out, acc = [1], 1
    for k, _ in modes:
        acc *= k
        out.append(acc)
    return out


def _refine(modes, points):
    """Strides of ``modes`` re-cut at the (finer) cumulative extents ``points``."""
    bounds = _boundaries(modes)
    strides = []
    for lo in points[:-1]:
        j = max(i for i in range(len(modes)) if bounds[i] <= lo)
        strides.append(modes[j][1] * (lo // bounds[j]))
    return strides


def _hierarchical_decode(layout):
    shape, outs = _tilelang_outputs(layout, strict=False)
    if outs is None:
        return None
    per_axis = []
    for o in outs:
        found = _affine_modes(np.broadcast_to(o, tuple(shape)))
        if found is None or found[0] != 0:
            return None
        per_axis.append(found[1])
    shapes, strides = [], []
    for dim, n in enumerate(shape):
        axis_modes = [pa[dim] for pa in per_axis]
        points = sorted({p for m in axis_modes for p in _boundaries(m)})
        if any(b % a for a, b in zip(points, points[1:])):
            return None
        refined = [_refine(m, points) for m in axis_modes]
        extents, leaf_strides = [], []
        for i in range(len(points) - 1):
            extents.append(points[i + 1] // points[i])
            hits = [(k, r[i]) for k, r in enumerate(refined) if r[i] != 0]
            if len(hits) > 1:
                return None
            leaf_strides.append(ScaledBasis(hits[0][1], hits[0][0]) if hits else 0)
        if not extents:
            extents, leaf_strides = [1], [0]
        if len(extents) == 1:
            shapes.append(extents[0])
            strides.append(leaf_strides[0])
        else:
            shapes.append(tuple(extents))
            strides.append(tuple(leaf_strides))
    return Layout(tuple(shapes), tuple(strides))


# ----------------------------------------------------------------------------------------------
# Parsing the str() forms
# ----------------------------------------------------------------------------------------------
class _Parser:
    def __init__(self, text: str):
        self.text, self.pos = re.sub(r"\s+", "", text), 0

    def fail(self, what):
        raise ValueError(f"cannot parse {what} from {self.text!r} at position {self.pos}")

    def peek(self):
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def int_tuple(self):
        if self.peek() == "(":
            self.pos += 1
            items = [self.int_tuple()]
            while self.peek() == ",":
                self.pos += 1
                items.append(self.int_tuple())
            if self.peek() != ")":
                self.fail("an IntTuple")
            self.pos += 1
            return tuple(items)
        m = re.match(r"-?\d+", self.text[self.pos:])
        if m is None:
            self.fail("an IntTuple")
        self.pos += m.end()
        value = int(m.group())
        path = []
        while self.peek() == "@":
            self.pos += 1
            m = re.match(r"\d+", self.text[self.pos:])
            if m is None:
                self.fail("a basis index")
            self.pos += m.end()
            path.append(int(m.group()))
        return ScaledBasis(value, tuple(reversed(path))) if path else value

    def whole_int_tuple(self):
        out = self.int_tuple()
        if self.pos != len(self.text):
            self.fail("an IntTuple")
        return out

    def whole_layout(self) -> Layout:
        shape = self.int_tuple()
        if self.peek() != ":":
            self.fail("a layout ('shape:stride')")
        self.pos += 1
        stride = self.int_tuple()
        if self.pos != len(self.text):
            self.fail("a layout")
        return Layout(shape, stride)
