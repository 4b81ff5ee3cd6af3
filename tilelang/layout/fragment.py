"""The user-facing ``Fragment`` (upstream's ``T.Fragment``): a register-tile layout given by
functions of the element index, and ``build_user_fragment``, which turns its IR form into the
compiler's axis form (``tilelang.layout.axes.AxisFragment``) once the block's thread count is
known. Besides the IR form the class offers upstream's layout algebra over the shared placeholder
variables of ``tilelang.layout.layout``: ``is_equal``, ``repeat``, ``replicate``,
``get_thread_size``, ``map_forward_thread``.

The axis form itself lives in ``tilelang.layout.axes``; the names the compiler passes import from
this module (``LOCAL``, ``THREAD``, ``wgmma_accumulator`` ...) are re-exported from there.
"""

from __future__ import annotations

import inspect

import numpy as np
from tvm import ir, tirx

from tilelang.tir_utils import dtype_of, substitute

from .axes import (LOCAL, THREAD, Axis, LayoutError, UserLayoutError, default_fragment, drop_dim,  # noqa: F401
                   evaluate_index_expr, mma_accumulator, mma_operand_a, project, user_fragment,
                   wgmma_accumulator, wgmma_operand_a)
from .axes import AxisFragment as _AxisFragment
from .layout import REPLICA, Layout, bound_analyzer, fold, placeholders, same_exprs, unpack_layout_expr


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
        self.forward_fn = forward_fn
        self.shape = _constant_shape(shape)
        if isinstance(replicate, bool) or not isinstance(replicate, (int, np.integer)) or replicate < 1:
            raise ValueError(f"T.Fragment replicate must be a positive integer, got {replicate!r}")
        if forward_fn is None and forward_thread_fn is None:
            raise TypeError("T.Fragment needs forward_fn (returning (thread, register index)) or forward_thread_fn")
        if forward_fn is not None and (forward_thread_fn is not None or forward_index_fn is not None):
            raise TypeError("T.Fragment takes either forward_fn or forward_thread_fn/forward_index_fn, not both")
        self.replicate_size = int(replicate)
        fn = forward_fn if forward_fn is not None else forward_thread_fn
        n = len(self.shape)
        self.variables = [tirx.Var(name, "int32") for name in _param_names(fn, n)]
        self.rep_var = tirx.Var("rep", "int32")
        # Replica placement: 0 none, 1 the function places ``rep``, 2 replicas outermost.
        self.rep_mode = 0 if self.replicate_size == 1 else (1 if _accepts(fn, n + 1) else 2)
        if self.rep_mode != 1 and not _accepts(fn, n):
            raise TypeError(f"T.Fragment: {_fn_name(fn)} must take {n} index argument(s) for shape "
                            f"{list(self.shape)}" + (" (plus rep)" if self.replicate_size > 1 else ""))
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
        self.names = [v.name for v in self.variables]
        self.index_exprs = [_index_expr(e, "register index") for e in index]

    def encode(self):
        """IR arguments: kind, rank, shape, replicate, replica placement, register outputs, then the
        thread and register expressions, each ``let``-wrapped over its own fresh indices and ``rep``."""
        head = [ir.StringImm(self.kind), _imm(len(self.shape))] + [_imm(s) for s in self.shape]
        head += [_imm(self.replicate_size), _imm(self.rep_mode), _imm(len(self.index_exprs))]
        return head + [self._wrap(e) for e in [self.thread] + self.index_exprs]

    def _wrap(self, expr):
        bound = self.variables + [self.rep_var]
        fresh = [tirx.Var(v.name, "int32") for v in bound]
        expr = substitute(expr, dict(zip(bound, fresh)))
        for var in reversed(fresh):
            expr = tirx.Let(var, tirx.IntImm("int32", 0), expr)
        return expr

    @classmethod
    def from_exprs(cls, shape, thread, index, replicate=1) -> "Fragment":
        """A fragment from its thread and register expressions over ``placeholders`` and ``REPLICA``."""
        frag = Layout.__new__(cls)
        frag.forward_fn = None
        frag.shape = _constant_shape(shape)
        frag.replicate_size = int(replicate)
        frag.variables = placeholders(len(frag.shape))
        frag.names = [v.name for v in frag.variables]
        frag.rep_var = REPLICA
        frag.rep_mode = 1 if frag.replicate_size > 1 else 0
        frag.thread = _index_expr(thread, "thread")
        frag.index_exprs = [_index_expr(e, "register index") for e in index]
        return frag

    # ----- upstream's queries, over the shared placeholders ---------------------------------
    def _canonical(self, expr):
        vmap = dict(zip(self.variables, placeholders(len(self.shape))))
        vmap[self.rep_var] = REPLICA
        ana = bound_analyzer(self.shape, placeholders(len(self.shape)), [(REPLICA, self.replicate_size)])
        return ana.simplify(substitute(expr, vmap))

    @property
    def forward_index(self):
        return [self._canonical(e) for e in self.index_exprs]

    @property
    def forward_thread(self):
        """The thread of element ``placeholders`` and replica ``REPLICA``."""
        thread = self._canonical(self.thread)
        if self.rep_mode == 2:
            thread = thread + self._threads_per_replica() * REPLICA
        return thread

    def _thread_table(self, thread):
        grid = np.indices((self.replicate_size,) + self.shape, dtype=np.int64)
        env = list(zip(placeholders(len(self.shape)), list(grid[1:]))) + [(REPLICA, grid[0])]
        return np.broadcast_to(np.asarray(evaluate_index_expr(thread, env)), grid.shape[1:])

    def _threads_per_replica(self) -> int:
        return int(self._thread_table(self._canonical(self.thread)).max()) + 1

    def get_thread_size(self) -> int:
        """Threads the layout spans, replicas included."""
        return int(self._thread_table(self.forward_thread).max()) + 1

    def get_output_shape(self):
        if not self.index_exprs:
            return [int(np.prod(self.shape)) // max(1, self.get_thread_size() // self.replicate_size)]
        return Layout.from_index(self.shape, self.forward_index).get_output_shape()

    def map_forward_thread(self, indices, rep=0):
        """The thread holding logical ``indices`` (replica ``rep``)."""
        vmap = dict(zip(placeholders(len(self.shape)), [_index_expr(i, "index") for i in indices]))
        vmap[REPLICA] = _index_expr(rep, "replica")
        return fold(substitute(self.forward_thread, vmap))

    def is_equal(self, other) -> bool:
        """Same shape, replication, thread map and register map."""
        if not isinstance(other, Fragment):
            return False
        return (self.shape == other.shape and self.replicate_size == other.replicate_size
                and same_exprs([self.forward_thread], [other.forward_thread])
                and same_exprs(self.forward_index, other.forward_index))

    # ----- upstream's algebra ---------------------------------------------------------------
    def repeat(self, repeats, repeat_on_thread: bool = False, lower_dim_first: bool = True) -> "Fragment":
        """Tile the fragment ``repeats[d]`` times along each dimension; the copies go to further
        threads (``repeat_on_thread``) or to further registers of the same threads."""
        repeats = [int(r) for r in (repeats if isinstance(repeats, (list, tuple)) else [repeats])]
        n = len(self.shape)
        if len(repeats) != n or min(repeats) < 1:
            raise ValueError(f"repeat needs one positive factor per dimension ({n}), got {repeats}")
        variables = placeholders(n)
        wrap = {v: tirx.floormod(v, e) for v, e in zip(variables, self.shape)}
        order = list(reversed(range(n))) if lower_dim_first else list(range(n))
        copy, stride = tirx.IntImm("int32", 0), 1
        for d in order:
            copy = copy + stride * tirx.floordiv(variables[d], self.shape[d])
            stride *= repeats[d]
        thread = substitute(self.forward_thread, wrap)
        index = [substitute(e, wrap) for e in self.forward_index]
        shape = [e * r for e, r in zip(self.shape, repeats)]
        if repeat_on_thread:
            thread = thread + self.get_thread_size() // self.replicate_size * copy
        elif len(index) != 1:
            raise ValueError("repeat on registers needs a one-dimensional register index (forward_index_fn)")
        else:
            index = [index[0] + self.get_output_shape()[0] * copy]
        return Fragment.from_exprs(shape, thread, index, self.replicate_size)

    def replicate(self, factor: int) -> "Fragment":
        """Every element on ``factor`` times as many threads: copy ``r`` on thread ``t + r * T``."""
        factor = int(factor)
        if factor < 1:
            raise ValueError(f"replicate factor must be >= 1, got {factor}")
        threads = self.get_thread_size() // self.replicate_size
        inner = substitute(self.forward_thread, {REPLICA: tirx.floormod(REPLICA, self.replicate_size)})
        thread = inner + threads * self.replicate_size * tirx.floordiv(REPLICA, self.replicate_size)
        return Fragment.from_exprs(self.shape, thread, self.forward_index, self.replicate_size * factor)

    def describe(self) -> str:
        index = ", ".join(map(str, self.index_exprs)) if self.index_exprs else "row-major per thread"
        rep = f", replicate {self.replicate_size}" if self.replicate_size > 1 else ""
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
    if not isinstance(value, ir.Expr) or not dtype_of(value).startswith(("int", "uint", "bool")):
        raise TypeError(f"T.Fragment {what} must be an integer expression of the indices, got {value!r}")
    return value


def _imm(v):
    return tirx.IntImm("int32", int(v))


def replicated_fragment(shape, num_threads: int, name: str = "replicated") -> _AxisFragment:
    """The compiler's form of a fully replicated tile: every thread holds all of it, row-major in
    its registers (a small fragment that every iteration of a larger loop reads)."""
    shape = tuple(int(s) for s in shape) or (1,)
    axes, stride = [], 1
    for d in reversed(range(len(shape))):
        if shape[d] > 1:
            axes.append(Axis(f"l{d}", LOCAL, shape[d], stride, d, 1))
            stride *= shape[d]
    if num_threads > 1:
        axes.append(Axis("rep", THREAD, int(num_threads), 1, None))
    return _AxisFragment(shape, int(num_threads), tuple(axes), name)


def make_gemm_fragment_8x8() -> Fragment:
    """The 8x8 tile of an mma/ldmatrix operand: row ``i`` on threads ``4i..4i+3``, two columns each."""
    i, j = placeholders(2)
    return Fragment.from_exprs((8, 8), tirx.floordiv(j, 2) + 4 * i, [tirx.floormod(j, 2)])


def make_gemm_fragment_8x8_transposed() -> Fragment:
    """``make_gemm_fragment_8x8`` with rows and columns exchanged."""
    i, j = placeholders(2)
    return Fragment.from_exprs((8, 8), tirx.floordiv(i, 2) + 4 * j, [tirx.floormod(i, 2)])


def make_fully_replicated_layout_fragment(buffer, threads: int) -> Fragment:
    """Every one of ``threads`` threads holds the whole ``buffer`` (row-major in its registers)."""
    shape = list(buffer) if isinstance(buffer, (list, tuple)) else list(getattr(buffer, "buffer", buffer).shape)
    shape = _constant_shape(shape)
    flat = tirx.IntImm("int32", 0)
    for var, extent in zip(placeholders(len(shape)), shape):
        flat = flat * extent + var
    return Fragment.from_exprs(shape, REPLICA, [flat], int(threads))
