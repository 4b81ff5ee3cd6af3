"""The user-facing ``Layout``: a map from a logical index of ``input_shape`` to a physical index.

``Layout(shape, lambda i, j: [...])`` holds its forward index over shared placeholder variables
(``_i``, ``_j``, ... as upstream names them), simplified under the input ranges; two layouts built
from the same map are therefore structurally equal whatever the lambda's parameter names were.
The algebra upstream offers is here (``expand``, ``repeat``, ``is_equal``, the output shape and
the row-major linearised index). ``T.annotate_layout`` sends a layout into the IR with ``encode``;
the compiler reads it back in ``tilelang.transform.layout_inference``.
"""

from __future__ import annotations

import inspect

import numpy as np
import tvm
import tvm_ffi
from tvm import ir, tirx

from tilelang.tir_utils import substitute

_PLACEHOLDERS = tuple(tirx.Var("_" + chr(ord("i") + k), "int32") for k in range(16))
REPLICA = tirx.Var("_rep", "int32")


def placeholders(n: int) -> list:
    """The shared input variables of an ``n``-dimensional layout."""
    if n > len(_PLACEHOLDERS):
        raise ValueError(f"layouts have at most {len(_PLACEHOLDERS)} input dimensions, got {n}")
    return list(_PLACEHOLDERS[:n])


def as_index(value, what="layout index"):
    """An int32 index expression from a Python/numpy int or an integer PrimExpr."""
    if isinstance(value, (bool, np.bool_)):
        value = int(value)
    if isinstance(value, (int, np.integer)):
        return tirx.IntImm("int32", int(value))
    if isinstance(value, ir.Expr):
        return value
    raise TypeError(f"{what} must be an integer expression, got {value!r}")


def _shape_list(shape):
    shape = shape if isinstance(shape, (list, tuple, ir.Array)) else [shape]
    out = []
    for s in shape:
        value = getattr(s, "value", s)
        out.append(int(value) if isinstance(value, (int, np.integer)) else s)
    return out


def bound_analyzer(shape, variables, extra=()):
    ana = tvm.sym.Analyzer()
    for var, extent in list(zip(variables, shape)) + list(extra):
        ana.bind(var, ir.Range(0, extent))
    return ana


def extent_of(ana, expr):
    """Upper bound + 1 of a non-negative index expression (as upstream's output shape)."""
    bound = ana.const_int_bound(expr)
    if bound.max_value < (1 << 62) and bound.min_value > -(1 << 62):
        return int(bound.max_value) + 1
    return ana.simplify(ana.int_set(expr + 1).max_value)


_EXACT_LIMIT = 1 << 20


def _evaluate_outputs(shape, index):
    """Every output over the whole (constant, not too large) input domain, or None."""
    from .axes import evaluate_index_expr

    if not all(isinstance(s, int) for s in shape) or int(np.prod(shape, dtype=np.int64)) > _EXACT_LIMIT:
        return None
    grid = np.indices(shape, dtype=np.int64) if shape else np.zeros((0,), dtype=np.int64)
    env = list(zip(placeholders(len(shape)), list(grid)))
    try:
        return [np.broadcast_to(np.asarray(evaluate_index_expr(e, env)), tuple(shape)) for e in index]
    except ValueError:
        return None


def _fn_names(fn, n):
    try:
        params = [p.name for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    return params[:n] if len(params) >= n else [v.name for v in _PLACEHOLDERS[:n]]


class Layout:
    """A shared-memory layout for ``T.annotate_layout``: ``T.Layout(shape, lambda i, j: [...])`` maps
    a logical index to a physical one (stored row-major over the physical index space)."""

    kind = "custom"

    def __init__(self, shape=None, forward_fn=None):
        self.forward_fn = forward_fn
        if shape is None or forward_fn is None:  # a marker layout (make_swizzled_layout())
            self.shape, self.forward_index, self.names = (tuple(shape) if shape else None), None, None
            return
        shape = _shape_list(shape)
        out = forward_fn(*placeholders(len(shape)))
        out = list(out) if isinstance(out, (list, tuple, ir.Array)) else [out]
        self._set(shape, out, _fn_names(forward_fn, len(shape)))

    @classmethod
    def from_index(cls, input_shape, forward_index, names=None) -> Layout:
        """A layout from its forward index over ``placeholders(len(input_shape))``."""
        layout = Layout.__new__(cls)
        layout.forward_fn = None
        layout._set(_shape_list(input_shape), list(forward_index), names)
        return layout

    def _set(self, shape, index, names):
        self.shape = tuple(shape)
        variables = placeholders(len(shape))
        ana = bound_analyzer(shape, variables)
        self.forward_index = [ana.simplify(as_index(e, "T.Layout output")) for e in index]
        self.names = names or [v.name for v in variables]

    # ----- queries (upstream's names) ---------------------------------------------------
    def _require_index(self):
        if self.forward_index is None:
            raise ValueError(f"{type(self).__name__}() without a buffer has no index map; "
                             "pass the buffer (make_swizzled_layout(buf))")

    @property
    def index(self):
        self._require_index()
        return list(self.forward_index)

    def get_forward_index(self):
        return self.index

    def get_input_shape(self):
        self._require_index()
        return list(self.shape)

    def get_output_shape(self):
        """Per output, its largest value + 1 over the input domain (exact for constant shapes)."""
        self._require_index()
        exact = _evaluate_outputs(self.shape, self.forward_index)
        if exact is not None:
            return [int(v.max()) + 1 if v.size else 1 for v in exact]
        ana = bound_analyzer(self.shape, placeholders(len(self.shape)))
        return [extent_of(ana, e) for e in self.forward_index]

    def get_forward_vars(self):
        return placeholders(len(self.shape))

    def get_linearized_forward_index(self):
        """The row-major offset of the physical index within the output shape."""
        flat = tirx.IntImm("int32", 0)
        for expr, extent in zip(self.index, self.get_output_shape()):
            flat = flat * extent + expr
        return tvm.sym.Analyzer().simplify(flat)

    def map_forward_index(self, indices):
        """The physical index of logical ``indices`` (the last ``ndim`` of them; leading ones kept)."""
        indices = [as_index(i) for i in indices]
        n = len(self.shape)
        if len(indices) < n:
            raise ValueError(f"layout over {n} dimensions mapped with {len(indices)} indices")
        vmap = dict(zip(placeholders(n), indices[len(indices) - n:]))
        return indices[:len(indices) - n] + [fold(substitute(e, vmap)) for e in self.index]

    def __call__(self, *indices):
        return self.map_forward_index(list(indices))

    def injectivity_violation(self) -> str | None:
        """Two logical indices the forward map sends to one physical index, as a sentence (None
        when it is injective, or when the domain is symbolic or too large to enumerate)."""
        self._require_index()
        shape = list(self.shape)
        outs = _evaluate_outputs(shape, self.forward_index)
        if outs is None or not outs or not shape or 0 in shape:
            return None
        coords = np.stack([np.asarray(o).reshape(-1) for o in outs], axis=1)
        _, first, inverse = np.unique(coords, axis=0, return_index=True, return_inverse=True)
        owner = first[np.asarray(inverse).reshape(-1)]
        clash = np.nonzero(owner != np.arange(len(coords)))[0]
        if not clash.size:
            return None
        second = int(clash[0])
        a, b = (tuple(int(x) for x in np.unravel_index(k, shape)) for k in (int(owner[second]), second))
        physical = tuple(int(x) for x in coords[second])
        return f"logical coordinates {_tuple(a)} and {_tuple(b)} both map to physical coordinates {_tuple(physical)}"

    def is_equal(self, other) -> bool:
        """Same input shape, output shape and forward map (compared structurally, after simplification)."""
        if not isinstance(other, Layout) or (self.kind == "fragment") != (other.kind == "fragment"):
            return False
        if self.forward_index is None or other.forward_index is None:
            return type(self) is type(other) and self.forward_index is other.forward_index
        return (same_exprs(self.shape, other.shape)
                and same_exprs(self.get_output_shape(), other.get_output_shape())
                and same_exprs(self.forward_index, other.forward_index))

    # ----- algebra ----------------------------------------------------------------------
    def expand(self, leading_shape) -> Layout:
        """Prepend dimensions that pass through unchanged: ``[i, *L(j, k)]`` over ``[I, J, K]``."""
        if isinstance(leading_shape, (int, np.integer)) and not isinstance(leading_shape, bool):
            leading_shape = [int(leading_shape)]
        if not isinstance(leading_shape, (list, tuple, ir.Array)):
            raise TypeError(f"leading_shape must be an int or a sequence, got {type(leading_shape).__name__}")
        leading = _shape_list(leading_shape)
        if not leading:
            return self
        for k, extent in enumerate(leading):
            if isinstance(extent, int) and extent <= 0:
                raise ValueError(f"leading_shape[{k}] must be > 0, got {extent}")
            if not isinstance(extent, (int, ir.Expr)):
                raise TypeError(f"leading_shape[{k}] must be an int or PrimExpr, got {type(extent).__name__}")
        self._require_index()
        m, n = len(leading), len(self.shape)
        new_vars = placeholders(m + n)
        shifted = dict(zip(placeholders(n), new_vars[m:]))
        index = new_vars[:m] + [substitute(e, shifted) for e in self.forward_index]
        return Layout.from_index(leading + list(self.shape), index)

    def repeat(self, dim: int, factor: int) -> Layout:
        """Tile the layout ``factor`` times along input ``dim``; the copy number becomes a new leading
        output: ``L'(.., i, ..) = [i // extent, *L(.., i % extent, ..)]``."""
        if not isinstance(dim, int):
            raise TypeError(f"dim must be an int, got {type(dim).__name__}")
        if not isinstance(factor, int):
            raise TypeError(f"factor must be an int, got {type(factor).__name__}")
        if factor < 1:
            raise ValueError(f"factor must be >= 1, got {factor}")
        if factor == 1:
            return self
        self._require_index()
        n = len(self.shape)
        if n == 0:
            raise ValueError("cannot repeat a 0-dim layout")
        d = dim + n if dim < 0 else dim
        if not 0 <= d < n:
            raise ValueError(f"dim out of range: dim={dim}, ndim={n}")
        var, extent = placeholders(n)[d], self.shape[d]
        wrapped = {var: tirx.floormod(var, extent)}
        shape = list(self.shape)
        shape[d] = extent * factor
        index = [tirx.floordiv(var, extent)] + [substitute(e, wrapped) for e in self.forward_index]
        return Layout.from_index(shape, index)

    # ----- IR form ----------------------------------------------------------------------
    def encode(self):
        """IR arguments: kind, then (for an index map) the rank and each output index ``let``-wrapped
        over fresh input variables (the IR may hold neither free nor twice-defined variables)."""
        if self.forward_index is None or self.kind != "custom":
            return [ir.StringImm(self.kind)]
        n = len(self.shape)
        wrapped = []
        for expr in self.forward_index:
            fresh = [tirx.Var(name, "int32") for name in self.names]
            expr = substitute(expr, dict(zip(placeholders(n), fresh)))
            for var in reversed(fresh):
                expr = tirx.Let(var, tirx.IntImm("int32", 0), expr)
            wrapped.append(expr)
        return [ir.StringImm(self.kind), tirx.IntImm("int32", n)] + wrapped

    def __repr__(self):
        if self.forward_index is None:
            return f"{type(self).__name__}()"
        return f"Layout({list(self.shape)} -> {self.get_output_shape()}: {list(map(str, self.forward_index))})"


def _tuple(values) -> str:
    return "(" + ", ".join(str(v) for v in values) + ("," if len(values) == 1 else "") + ")"


def fold(expr):
    """``expr`` simplified; an expression of constants only (XOR included) becomes an IntImm."""
    from .axes import evaluate_index_expr

    try:
        return tirx.IntImm("int32", int(evaluate_index_expr(expr, [])))
    except (ValueError, TypeError, AttributeError):
        return tvm.sym.Analyzer().simplify(expr)


def same_exprs(a, b) -> bool:
    """Element-wise structural equality of two lists of ints / expressions."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        x, y = getattr(x, "value", x), getattr(y, "value", y)
        if isinstance(x, int) and isinstance(y, int):
            if x != y:
                return False
        elif isinstance(x, int) or isinstance(y, int) or not tvm_ffi.structural_equal(x, y):
            return False
    return True


def unpack_layout_expr(expr, n):
    """(variables, body) of an output index built by ``Layout.encode``."""
    variables = []
    for _ in range(n):
        variables.append(expr.var)
        expr = expr.body
    return variables, expr
