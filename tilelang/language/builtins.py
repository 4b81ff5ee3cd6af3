"""TVMScript statements and helpers upstream's ``T`` re-exports.

* ``T.attr(node, key, value)``: an ``AttrStmt`` frame (``with T.attr(...):``) around its body.
* ``T.let(var, value)``: binds ``var`` (declared ``v = T.int32()``) to ``value`` for the rest of
  the enclosing scope (a ``Bind`` statement); ``T.let(var, value, body)`` is the expression.
* ``for b in T.thread_binding(extent, thread="blockIdx.x"):``: a loop bound to a launch axis,
  TVM's spelling of ``T.Kernel``'s bindings; it opens the same launch frame as ``T.Kernel``, so
  the compiler sees one kernel either way. The range starts at 0; nested bindings of
  ``blockIdx.*`` then ``threadIdx.*`` must enclose the whole body, as ``T.Kernel`` does. Inside
  ``T.Kernel`` it names the kernel's own variable: ``tx = T.thread_binding(0, n, thread=...)``, or
  ``for tx in T.thread_binding(n, thread=...)`` (the body once, under ``tx < n`` when ``n`` is
  less than the launch extent). ``T.thread_binding(n, "threadIdx.x")`` spells the same.
* ``T.match_buffer(handle, shape, dtype, ...)``: a buffer over a ``T.handle`` parameter.
* ``T.align_up(x, y)``: ``x`` rounded up to a multiple of ``y`` (``ceildiv(x, y) * y``).
* ``T.annotate_pass_configs({...})`` / ``T.annotate_compile_flags([...])``: kernel-level pass
  configs and nvcc flags, kept as the PrimFunc attributes ``tilelang_pass_configs`` and
  ``tilelang_compile_flags``. ``tilelang.compile``/``tilelang.lower`` merge them with the
  caller's: a pass config given to ``compile`` wins over the kernel's; flags are appended.
* ``T.annotate_min_blocks_per_sm(n)``: the kernel is declared ``__launch_bounds__(threads, n)``
  (nvcc then limits registers so that ``n`` blocks fit on one SM); an attribute statement
  ``tl.min_blocks_per_sm`` in the kernel body carries it to the generated source.
"""

from __future__ import annotations

import re

from tvm.script import tirx as _T
from tvm.tirx.script.builder import ir as _builder

from tilelang.frontend.builder import LOOP_BINDERS

from .math import ceildiv

attr = _T.attr
match_buffer = _T.match_buffer
PASS_CONFIGS_ATTR = "tilelang_pass_configs"
COMPILE_FLAGS_ATTR = "tilelang_compile_flags"
MIN_BLOCKS_ATTR = "tl.min_blocks_per_sm"


class thread_binding:  # noqa: N801 - upstream's lower-case loop name
    """``for tx in T.thread_binding(128, thread="threadIdx.x"):`` (a loop spec for the front end)."""

    tl_loop_spec = True

    def __new__(cls, start, stop=None, thread=None, *, annotations=None):
        # Inside `with T.Kernel(...)` the axis is already launched: `kr = T.thread_binding(0, n,
        # thread="threadIdx.x")` names the kernel's own variable, as upstream's front end does, and
        # `for tx in T.thread_binding(n, ...)` runs its body once with `tx` that variable (the
        # front end's `for` asks `bound_axis` for the guard when n is less than the launch extent).
        from .kernel import current_kernel

        start, stop, thread = _binding_args(start, stop, thread)
        ctx = current_kernel()
        if ctx is not None and isinstance(thread, str):
            kind, _, axis = thread.partition(".")
            axes, extents = {"threadIdx": (ctx.thread_vars, ctx.threads),
                             "blockIdx": (ctx.block_vars, ctx.blocks)}.get(kind, (None, None))
            k = "xyz".find(axis) if len(axis) == 1 else -1
            if axes is not None and 0 <= k < len(axes):
                ctx.axis_requests[axes[k]] = (start, stop, thread, extents[k])
                return axes[k]
        return super().__new__(cls)

    def __init__(self, start, stop=None, thread=None, *, annotations=None):
        start, stop, thread = _binding_args(start, stop, thread)
        if not (isinstance(start, int) and start == 0):
            raise ValueError(f"T.thread_binding starts at 0 here (a launch axis), got start {start}")
        if not isinstance(thread, str) or not thread.startswith(("blockIdx.", "threadIdx.")):
            raise ValueError(f"T.thread_binding binds blockIdx.x/y/z or threadIdx.x/y/z, got thread={thread!r}")
        if annotations:
            raise ValueError("T.thread_binding takes no annotations here (a launch axis has none)")
        self.extent, self.thread = stop, thread

    def loop_frames(self):
        return [_builder.launch_thread(self.thread, self.extent)]


def _binding_args(start, stop, thread):
    """``(start, stop, thread)`` of any of TVM's spellings: ``(n, thread=t)``, ``(n, t)``,
    ``(a, b, thread=t)``, ``(a, b, t)``."""
    if thread is None and isinstance(stop, str):
        stop, thread = None, stop
    if stop is None:
        start, stop = 0, start
    return start, stop, thread


def bound_axis(var):
    """For ``for tx in T.thread_binding(n, thread=...)`` inside a kernel (the builder's ``for``
    over the launched variable that ``thread_binding`` returned): ``None`` when ``var`` is no such
    variable, else ``(condition,)`` with the guard ``var < n`` (``None`` where ``n`` is the launch
    extent). Raises ``ValueError`` for a range the launch does not cover."""
    from tvm import tirx

    from .kernel import current_kernel

    ctx = current_kernel()
    if ctx is None or not isinstance(var, tirx.Var) or var not in ctx.axis_requests:
        return None
    start, stop, thread, launched = ctx.axis_requests[var]
    if not (isinstance(start, int) and start == 0):
        raise ValueError(f"for ... in T.thread_binding({start}, {stop}, thread={thread!r}): inside T.Kernel the "
                         f"range must start at 0 (it is the kernel's own {thread})")
    if isinstance(stop, int) and isinstance(launched, int):
        if stop > launched:
            raise ValueError(f"for ... in T.thread_binding({stop}, thread={thread!r}): the kernel launches "
                             f"{launched} along {thread}, fewer than the {stop} asked for")
        return (None,) if stop == launched else (var < stop,)
    from tvm import arith

    return (None,) if arith.Analyzer().can_prove_equal(stop, launched) else (var < stop,)


LOOP_BINDERS.append(bound_axis)


def let(v, value, body=None):
    """Bind ``v`` to ``value`` from here to the end of the enclosing scope; with ``body``, the
    expression ``body`` with ``v`` bound to ``value`` (a ``Let`` expression)."""
    if body is not None:
        from tvm import tirx

        return tirx.Let(v, value, body)
    return _builder.bind(value, var=v)


def align_up(x, y):
    """``x`` rounded up to the next multiple of ``y``."""
    return ceildiv(x, y) * y


def annotate_pass_configs(configs: dict) -> None:
    """Pass configs of this kernel (``{PassConfigKey.TL_ENABLE_FAST_MATH: True}``); a config the
    caller passes to ``tilelang.compile`` overrides the same key here."""
    if not isinstance(configs, dict):
        raise TypeError(f"T.annotate_pass_configs takes a dict of pass configs, got {type(configs).__name__}")
    _builder.func_attr({PASS_CONFIGS_ATTR: {str(getattr(k, "value", k)): v for k, v in configs.items()}})


def annotate_compile_flags(flags) -> None:
    """nvcc flags of this kernel (``["--use_fast_math"]`` or one string), added to the caller's."""
    if isinstance(flags, str):
        flags = [flags]
    if not all(isinstance(flag, str) for flag in flags):
        raise TypeError(f"T.annotate_compile_flags takes a string or a list of strings, got {flags!r}")
    _builder.func_attr({COMPILE_FLAGS_ATTR: list(flags)})


def annotate_min_blocks_per_sm(n: int):
    """Ask nvcc to fit at least ``n`` blocks of this kernel on one SM (``__launch_bounds__``);
    an attribute statement over the rest of the kernel body."""
    if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
        raise ValueError(f"T.annotate_min_blocks_per_sm takes a positive int, got {n!r}")
    return _T.attr(0, MIN_BLOCKS_ATTR, n)


def with_min_blocks_per_sm(source: str, func) -> str:
    """``source`` with the kernel's ``__launch_bounds__(threads)`` given its second argument when
    ``func`` annotates one (``T.annotate_min_blocks_per_sm``); otherwise ``source`` unchanged."""
    from tvm import tirx

    from tilelang.tir_utils import walk_stmts

    found = []

    def visit(stmt):
        if isinstance(stmt, tirx.AttrStmt) and stmt.attr_key == MIN_BLOCKS_ATTR:
            found.append(stmt.value)

    walk_stmts(func.body, visit)
    if not found:
        return source
    return re.sub(r"__launch_bounds__\((\d+)\)", rf"__launch_bounds__(\1, {int(found[0])})", source)


def kernel_pass_configs(func) -> dict:
    """The pass configs a kernel annotates (``T.annotate_pass_configs``), as a plain dict (the
    engine normalizes them as it does the caller's)."""
    attrs = getattr(func, "attrs", None)
    if attrs is None or PASS_CONFIGS_ATTR not in attrs:
        return {}
    return {str(key): _plain(value) for key, value in attrs[PASS_CONFIGS_ATTR].items()}


def kernel_compile_flags(func) -> list:
    """The nvcc flags a kernel annotates (``T.annotate_compile_flags``)."""
    attrs = getattr(func, "attrs", None)
    if attrs is None or COMPILE_FLAGS_ATTR not in attrs:
        return []
    return [str(flag) for flag in attrs[COMPILE_FLAGS_ATTR]]


def _plain(value):
    """An attribute value back as Python (bool/int/float/str; lists and dicts of them)."""
    if isinstance(value, (bool, int, float, str)):
        return value
    if hasattr(value, "items"):
        return {str(k): _plain(v) for k, v in value.items()}
    if hasattr(value, "dtype") and hasattr(value, "value"):  # an IntImm/FloatImm
        return bool(value.value) if str(value.dtype) == "bool" else value.value
    if hasattr(value, "__iter__"):
        return [_plain(v) for v in value]
    return value
