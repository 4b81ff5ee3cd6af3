"""Layouts: fragments (registers) and shared-memory swizzles, plus the user-facing ``Layout``
objects that ``T.annotate_layout`` accepts."""

from __future__ import annotations

import inspect

import numpy as np
from tvm import ir, tirx

from .fragment import (Axis, LayoutError, UserLayoutError, default_fragment, drop_dim, mma_accumulator,
                       mma_operand_a, project)
from .fragment import Fragment as _AxisFragment
from .fragment import evaluate_index_expr, user_fragment
from .swizzle import CustomSharedLayout, SharedLayout


class Layout:
    """A shared-memory layout for ``T.annotate_layout``: ``T.Layout(shape, lambda i, j: [...])``
    maps a logical index to a physical one (row-major over the physical index space)."""

    kind = "custom"

    def __init__(self, shape=None, forward_fn=None):
        self.shape = tuple(shape) if shape is not None else None
        self.forward_fn = forward_fn

    def encode(self):
        """IR arguments: kind, then (for a custom layout) the input vars and output expressions."""
        if self.forward_fn is None:
            return [ir.StringImm(self.kind)]
        n = len(self.shape) if self.shape is not None else self.forward_fn.__code__.co_argcount
        names = list(self.forward_fn.__code__.co_varnames[:n])
        count = _output_count(self.forward_fn, names)
        # Each output index becomes ``let i = 0, j = 0 in expr`` over its own fresh variables:
        # the IR may hold neither free variables nor a variable defined twice.
        wrapped = []
        for k in range(count):
            variables = [tirx.Var(name, "int32") for name in names]
            out = self.forward_fn(*variables)
            expr = out[k] if isinstance(out, (list, tuple)) else out
            expr = tirx.IntImm("int32", expr) if isinstance(expr, int) else expr
            for var in reversed(variables):
                expr = tirx.Let(var, tirx.IntImm("int32", 0), expr)
            wrapped.append(expr)
        return [ir.StringImm(self.kind), tirx.IntImm("int32", n)] + wrapped


def _output_count(fn, names) -> int:
    out = fn(*[tirx.Var(name, "int32") for name in names])
    return len(out) if isinstance(out, (list, tuple)) else 1


def unpack_layout_expr(expr, n):
    """(variables, body) of an output index built by ``Layout.encode``."""
    variables = []
    for _ in range(n):
        variables.append(expr.var)
        expr = expr.body
    return variables, expr


class SwizzledLayout(Layout):
    kind = "swizzle"


class RowMajorLayout(Layout):
    kind = "row_major"


def make_swizzled_layout(buffer=None, k_major=True, allow_pad=True):
    """Ask for the XOR-swizzled shared layout on ``buffer`` (the default for gemm operands)."""
    return SwizzledLayout()


def make_linear_layout(buffer=None):
    return RowMajorLayout()


class Fragment(Layout):
    """A register-tile layout for ``T.annotate_layout`` (upstream's ``T.Fragment``)::

        T.Fragment((M, N), forward_fn=lambda i, j: (thread, register))
        T.Fragment((M, N), forward_thread_fn=lambda i, j: thread, forward_index_fn=lambda i, j: register)

    ``register`` may be a list (a multi-dimensional register index, flattened row-major) or left
    out (each thread numbers its elements in row-major order). With ``replicate=k`` every element
    is held by ``k`` threads: a function taking one more argument than the shape has dimensions
    gets the replica ``rep`` in ``[0, k)`` and places it itself; otherwise replica ``rep`` lives on
    thread ``thread + rep * T`` (``T``: the threads of one replica), like upstream's
    ``Fragment.replicate``. The layout is checked and resolved when the kernel is lowered
    (``build_user_fragment``), where the buffer and the block's thread count are known.

    ``Fragment(shape, num_threads, axes, name)`` still builds the compiler's own axis form
    (``tilelang.layout.fragment.Fragment``)."""

    kind = "fragment"

    def __new__(cls, shape=None, *args, **kwargs):
        if ("axes" in kwargs or "num_threads" in kwargs
                or (args and isinstance(args[0], (int, np.integer)) and not isinstance(args[0], bool))):
            return _AxisFragment(shape, *args, **kwargs)
        return super().__new__(cls)

    def __init__(self, shape, forward_fn=None, forward_thread_fn=None, replicate=1, forward_index_fn=None):
        super().__init__(_constant_shape(shape), forward_fn)
        if isinstance(replicate, bool) or not isinstance(replicate, (int, np.integer)) or replicate < 1:
            raise ValueError(f"T.Fragment replicate must be a positive integer, got {replicate!r}")
        if forward_fn is None and forward_thread_fn is None:
            raise TypeError("T.Fragment needs forward_fn (returning (thread, register index)) or forward_thread_fn")
        if forward_fn is not None and (forward_thread_fn is not None or forward_index_fn is not None):
            raise TypeError("T.Fragment takes either forward_fn or forward_thread_fn/forward_index_fn, not both")
        self.replicate = int(replicate)
        fn = forward_fn if forward_fn is not None else forward_thread_fn
        n = len(self.shape)
        self.variables = [tirx.Var(name, "int32") for name in _param_names(fn, n)]
        self.rep_var = tirx.Var("rep", "int32")
        # Replica placement: 0 none, 1 the function places ``rep``, 2 replicas outermost.
        self.rep_mode = 0 if self.replicate == 1 else (1 if _accepts(fn, n + 1) else 2)
        if self.rep_mode != 1 and not _accepts(fn, n):
            raise TypeError(f"T.Fragment: {_fn_name(fn)} must take {n} index argument(s) for shape "
                            f"{list(self.shape)}" + (" (plus rep)" if self.replicate > 1 else ""))
        args = self.variables + ([self.rep_var] if self.rep_mode == 1 else [])
        if forward_fn is not None:
            out = forward_fn(*args)
            if not isinstance(out, (list, tuple)) or len(out) < 2:
                raise TypeError(f"T.Fragment forward_fn must return (thread, register index), got {out!r}")
            thread, index = out[0], list(out[1:])
        else:
            thread = forward_thread_fn(*args)
            index = [] if forward_index_fn is None else forward_index_fn(*self.variables)
        seq = (list, tuple, ir.Array)
        index = list(index) if isinstance(index, seq) else [index]
        if len(index) == 1 and isinstance(index[0], seq):
            index = list(index[0])
        self.thread = _index_expr(thread, "thread")
        self.index = [_index_expr(e, "register index") for e in index]

    def encode(self):
        """IR arguments: kind, rank, shape, replicate, replica placement, register outputs, then the
        thread and register expressions, each ``let``-wrapped over its own fresh indices and ``rep``."""
        head = [ir.StringImm(self.kind), _imm(len(self.shape))] + [_imm(s) for s in self.shape]
        head += [_imm(self.replicate), _imm(self.rep_mode), _imm(len(self.index))]
        return head + [self._wrap(e) for e in [self.thread] + self.index]

    def _wrap(self, expr):
        from tilelang.transform.ir_utils import substitute

        bound = self.variables + [self.rep_var]
        fresh = [tirx.Var(v.name, "int32") for v in bound]
        expr = substitute(expr, dict(zip(bound, fresh)))
        for var in reversed(fresh):
            expr = tirx.Let(var, tirx.IntImm("int32", 0), expr)
        return expr

    def describe(self) -> str:
        index = ", ".join(map(str, self.index)) if self.index else "row-major per thread"
        rep = f", replicate {self.replicate}" if self.replicate > 1 else ""
        return f"T.Fragment {list(self.shape)}: thread {self.thread}, register {index}{rep}"

    def __repr__(self):
        return self.describe()


def build_user_fragment(args, num_threads: int, name: str = "T.Fragment") -> _AxisFragment:
    """Resolve the IR form of a ``T.Fragment`` (``args`` as written by ``Fragment.encode``) for a
    block of ``num_threads`` threads. Raises ``UserLayoutError`` (TL0201/TL0203)."""
    n = int(args[1].value)
    shape = tuple(int(a.value) for a in args[2:2 + n])
    replicate, rep_mode, n_index = (int(a.value) for a in args[2 + n:5 + n])
    outputs = [unpack_layout_expr(e, n + 1) for e in args[5 + n:]]
    grid = np.indices((replicate,) + shape, dtype=np.int64)
    full = (replicate,) + shape

    def evaluate(output, what):
        variables, expr = output
        try:
            value = evaluate_index_expr(expr, list(zip(variables, list(grid[1:]) + [grid[0]])))
        except ValueError as err:
            raise UserLayoutError("TL0201", f"the {what} cannot be computed at compile time: {err}") from None
        return np.broadcast_to(np.asarray(value, dtype=np.int64), full)

    thread = evaluate(outputs[0], "thread")
    if rep_mode == 2:
        thread = thread + (int(thread.max()) + 1) * grid[0]
    if n_index == 0:
        local = _row_major_ranks(thread[0])
    else:
        parts = [evaluate(o, "register index") for o in outputs[1:]]
        local = np.zeros(full, dtype=np.int64)
        for p in parts:
            if p.min() < 0:
                e = np.unravel_index(int(np.argmin(p)), full)[1:]
                raise UserLayoutError("TL0203", f"gives element {tuple(int(c) for c in e)} register index "
                                      f"{int(p.min())}")
            local = local * (int(p.max()) + 1) + p
        differ = np.nonzero((local != local[0:1]).reshape(replicate, -1).any(axis=0))[0]
        if len(differ):
            e = np.unravel_index(int(differ[0]), shape)
            raise UserLayoutError("TL0203", f"gives the replicas of element {tuple(int(c) for c in e)} different "
                                  "register indices (the register index may not depend on rep)")
        local = local[0]
    return user_fragment(shape, num_threads, thread, local, name)


def _row_major_ranks(thread):
    """Register of each element when every thread numbers its elements in row-major order."""
    flat = thread.reshape(-1)
    order = np.lexsort((np.arange(flat.size), flat))
    ranks = np.empty(flat.size, dtype=np.int64)
    ranks[order] = np.arange(flat.size) - np.searchsorted(flat[order], flat[order], side="left")
    return ranks.reshape(thread.shape)


def _constant_shape(shape):
    shape = shape if isinstance(shape, (list, tuple, ir.Array)) else (shape,)
    out = []
    for s in shape:
        value = getattr(s, "value", s)
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise TypeError(f"T.Fragment needs a constant positive shape, got {list(shape)}")
        out.append(int(value))
    return tuple(out)


def _param_names(fn, n):
    try:
        params = [p.name for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    names = params[:n] if len(params) >= n else []
    return names or [f"i{k}" for k in range(n)]


def _accepts(fn, n) -> bool:
    try:
        inspect.signature(fn).bind(*range(n))
        return True
    except TypeError:
        return False
    except ValueError:  # no signature (a builtin): let the call decide
        return True


def _fn_name(fn):
    return getattr(fn, "__name__", "the layout function")


def _index_expr(value, what):
    if isinstance(value, (bool, np.bool_)):
        value = int(value)
    if isinstance(value, (int, np.integer)):
        return tirx.IntImm("int32", int(value))
    from tilelang.transform.ir_utils import dtype_of

    if not isinstance(value, ir.Expr) or not dtype_of(value).startswith(("int", "uint", "bool")):
        raise TypeError(f"T.Fragment {what} must be an integer expression of the indices, got {value!r}")
    return value


def _imm(v):
    return tirx.IntImm("int32", int(v))


__all__ = ["Axis", "CustomSharedLayout", "Fragment", "Layout", "LayoutError", "SharedLayout", "UserLayoutError",
           "build_user_fragment", "default_fragment", "drop_dim", "make_linear_layout", "make_swizzled_layout",
           "mma_accumulator", "mma_operand_a", "project"]
