"""Annotations: ``T.annotate_layout``, ``T.use_swizzle``, ``T.sync_threads`` and friends."""

from __future__ import annotations

from tvm import ir, tirx

from tilelang.layout import Fragment  # noqa: F401 - re-exported as T.Fragment

from ._ops import as_expr, emit


def use_swizzle(panel_size=8, order="row", enable=True):
    """Rasterise thread blocks in panels of ``panel_size`` so neighbours share L2 tiles."""
    if not enable:
        return
    emit("use_swizzle", [int(panel_size), str(order)])


def annotate_layout(layout_map: dict):
    """Force layouts: ``{buffer: layout}`` where layout is a ``tilelang.layout`` object: ``T.Layout``
    or a swizzle for shared buffers, ``T.Fragment`` for fragments."""
    from tilelang.layout import Layout

    for buf, layout in layout_map.items():
        if not isinstance(layout, Layout):
            raise TypeError(f"T.annotate_layout expects tilelang layouts, got {type(layout).__name__} for {buf.name}")
        scope = str(buf.scope())
        if (scope.startswith("shared") or scope == "global") and layout.kind == "custom" \
                and layout.forward_index is not None:
            # Two elements at one address would silently alias: reject the map here, at the user's line.
            clash = layout.injectivity_violation()
            if clash:
                kind = "global tensor" if scope == "global" else "shared buffer"
                raise ValueError(f"Invalid layout for {kind} `{buf.name}`: the forward map must be injective; "
                                 f"{clash} (layout {layout}). Check the layout passed to T.annotate_layout.")
        emit("annotate_layout", [tirx.BufferLoad(buf, [0] * len(buf.shape))] + layout.encode())


def print(obj=None, msg: str = "", warp_group_id: int = 0, warp_id: int = 0):  # noqa: A001 - T.print
    """Print a value (every thread), a buffer (each element once) or, with no value, just ``msg``
    (every thread) from the device.

    Printing only reads: it never changes what the kernel computes."""
    from tvm.tirx import is_buffer_var

    from .tile import READ, _to_region

    if obj is None:
        return tirx.call_extern("int32", "tl::print_msg", ir.StringImm(msg or "T.print"))

    scalar = getattr(obj, "scalar", None)
    obj = scalar if scalar is not None else obj
    if is_buffer_var(obj) or isinstance(obj, ir.TensorRegion):
        emit("print", [_to_region(obj, READ, what="print"), ir.StringImm(msg or _name(obj))])
        return None
    value = as_expr(obj)
    return tirx.call_extern("int32", "tl::print_value", ir.StringImm(msg or "value"), value)


def _name(obj):
    return getattr(obj, "name", None) or getattr(getattr(obj, "source", None), "name", "buffer")


def sync_threads():
    """Block-wide barrier (``__syncthreads()``)."""
    return tirx.call_extern("int32", "__syncthreads")


def annotate_padding(padding_map):
    return None


L2_HIT_RATIO_ATTR = "tl.l2_hit_ratio"   # AttrStmt: node = the tensor's name, value = the ratio


def annotate_l2_hit_ratio(l2_hit_ratio_map):
    """``{tensor: hit_ratio}``: keep that fraction of the tensor's bytes resident in L2 while the
    kernel runs. The launcher sets a CUDA access-policy window over each tensor (hits persisting,
    misses streaming; the persisting-L2 limit raised to the window) around the launch and resets
    both afterwards (``KernelArtifact.l2_persist``)."""
    from functools import partial

    from tvm.script import tirx as _T
    from tvm.tirx import is_buffer_var

    for buf, ratio in l2_hit_ratio_map.items():
        buf = getattr(buf, "scalar", None) or buf
        if not is_buffer_var(buf):
            raise TypeError(f"T.annotate_l2_hit_ratio expects kernel tensors as keys, got {type(buf).__name__}")
        if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0.0 <= float(ratio) <= 1.0:
            raise ValueError(f"T.annotate_l2_hit_ratio: the hit ratio of '{buf.name}' must be a number in "
                             f"[0, 1], got {ratio!r}")
        # an attribute over the rest of the kernel body; tilelang.engine.lower reads it
        frame = _T.attr(ir.StringImm(str(buf.name)), L2_HIT_RATIO_ATTR, tirx.FloatImm("float32", float(ratio)))
        frame.add_callback(partial(frame.__exit__, None, None, None))
        frame.__enter__()
    return None


SAFE_VALUE_ATTR = "tl.safe_value"


def annotate_safe_value(safe_value_map):
    """``{tensor: value}``: what a ``T.copy`` (or element copy) reads where it reaches outside
    ``tensor`` (default 0); an attribute over the rest of the kernel body."""
    from functools import partial

    from tvm.script import tirx as _T

    for buf, value in safe_value_map.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            value = as_expr(value)
        elif isinstance(value, int):
            value = tirx.const(value, "int32" if -2**31 <= value < 2**31 else "int64")
        else:
            value = tirx.const(value, "float32")
        frame = _T.attr(buf, SAFE_VALUE_ATTR, value)
        frame.add_callback(partial(frame.__exit__, None, None, None))
        frame.__enter__()


NON_RESTRICT_MARKER = "__tl_non_restrict"


def annotate_restrict_buffers(*buffers):
    """Kernel tensors that may alias each other: their pointer parameters lose ``__restrict__``
    (every tensor parameter has it by default)."""
    from tvm.tirx import is_buffer_var
    from tvm.tirx.script.builder import ir as builder

    names = []
    for buf in buffers:
        buf = getattr(buf, "scalar", None) or buf
        if not is_buffer_var(buf):
            raise TypeError(f"T.annotate_restrict_buffers expects kernel tensors, got {type(buf).__name__}")
        names.append(str(buf.name))
    if names:   # a marker statement; tilelang.codegen.cuda reads and drops it
        builder.evaluate(tirx.call_extern("void", NON_RESTRICT_MARKER, *[ir.StringImm(n) for n in names]))
    return None


def no_set_max_nreg():
    return None


def disable_warp_group_reg_alloc():
    return None
