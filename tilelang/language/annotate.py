"""Annotations: ``T.annotate_layout``, ``T.use_swizzle``, ``T.sync_threads`` and friends."""

from __future__ import annotations

from tvm import ir, tirx

from ._ops import as_expr, emit


def use_swizzle(panel_size=8, order="row", enable=True):
    """Rasterise thread blocks in panels of ``panel_size`` so neighbours share L2 tiles."""
    if not enable:
        return
    emit("use_swizzle", [int(panel_size), str(order)])


def annotate_layout(layout_map: dict):
    """Force layouts: ``{buffer: layout}`` where layout is a ``tilelang.layout`` object."""
    from tilelang.layout import Layout

    for buf, layout in layout_map.items():
        if not isinstance(layout, Layout):
            raise TypeError(f"T.annotate_layout expects tilelang layouts, got {type(layout).__name__} for {buf.name}")
        emit("annotate_layout", [tirx.BufferLoad(buf, [0] * len(buf.shape)), layout.encode()])


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
