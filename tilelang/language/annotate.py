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
        emit("annotate_layout", [tirx.BufferLoad(buf, [0] * len(buf.shape))] + layout.encode())


def print(obj, msg: str = "", warp_group_id: int = 0, warp_id: int = 0):  # noqa: A001 - T.print
    """Print a value (every thread) or a buffer (each element once) from the device.

    Printing only reads: it never changes what the kernel computes."""
    from tvm.tirx import is_buffer_var

    from .tile import READ, _to_region

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


def annotate_l2_hit_ratio(ratio_map):
    return None


def annotate_safe_value(safe_value_map):
    return None


def annotate_restrict_buffers(*buffers):
    return None


def no_set_max_nreg():
    return None


def disable_warp_group_reg_alloc():
    return None
