"""TMA boxes: the tensor map of a shared tile copied to or from a global tensor, and the box loads.

``box_spec`` decides whether the Tensor Memory Accelerator can move a (rows, columns) tile of a
16- or 8-bit global tensor, cut into swizzle slabs (or, unswizzled, one row of any tensor-map type:
``warp_specialize._row_spec``), and returns the ``KernelArtifact.tensormaps`` entry (dims, byte strides, box,
swizzle) the launcher encodes, or a sentence saying why not. Asked by warp specialisation (the
producer's loads: ``copy_spec``, ``tile_loads``), by the copy lowering
(TMA stores of an epilogue tile: ``tma_box_spec``) and, before the tile exists, by
``stage_epilogue``. Device code names map j as ``TL_TMAP(j)`` (``tmap``; ``codegen.cuda`` appends
the ``__grid_constant__ CUtensorMap`` parameters).
"""

from __future__ import annotations

import dataclasses

from tvm import tirx

from tilelang.language.dtypes import nbytes
from tilelang.layout import SharedLayout
from tilelang.tir_utils import const_int, evaluate_extern, i32, seq
from tilelang.transform.kernel import LoweringError, decode_region, op_name


def copy_spec(lw, stmt, index) -> dict | str:
    """The tensor map of one whole-tile global-to-shared copy of a warp-specialised loop's
    producer, or why it cannot be a TMA box (``tma_box_spec``, any box layout: ``box_layout``)."""
    if op_name(stmt) == "im2col":
        return "T.im2col is gathered by the threads (no TMA im2col tensor map yet)"
    return tma_box_spec(lw, decode_region(stmt.value.args[0]), decode_region(stmt.value.args[1]), index,
                        plain=True)


def box_layout(layout, tile_name: str, plain: bool) -> tuple | str:
    """(slab width in columns, swizzled) of the boxes that fill a shared tile laid out as
    ``layout``, or why TMA cannot. Always the slab layout of the wgmma operands (one box per
    swizzle slab); with ``plain``, also a tile the wgmma operands do not read: in the XOR
    swizzle of 32, 64 or 128-byte rows (``make_swizzled_layout`` of a packed tile: byte for
    byte the one slab a box of that swizzle writes), or row-major with rows of at most 256
    elements and a multiple of 16 bytes (one box, no swizzle)."""
    if not isinstance(layout, SharedLayout) or len(layout.shape) != 2:
        return f"'{tile_name}' is not a 2-D tile in a swizzled or row-major layout"
    if layout.slab and layout.group > 1:
        return layout.slab_width, True
    row = layout.ld * layout.elem_bytes
    if plain and not layout.slab and layout.swizzle and row in (32, 64, 128) and layout.group == row // 16:
        return layout.ld, True
    if plain and layout.group <= 1 and row % 16 == 0 and layout.ld <= 256:
        return layout.ld, False
    return f"'{tile_name}' is not in the swizzled wgmma operand layout"


def tma_box_spec(lw, src, dst, index, plain: bool = False, stages: bool = False) -> dict | str:
    """The tensor map whose box is the shared tile ``dst`` at ``src`` in a global tensor (a TMA
    load, or a TMA store read the other way), or why there is none (``box_layout``). ``dst`` is
    the whole tile, or with ``stages`` (a caller that issues the boxes at the stage's offset:
    ``user_ws._boxes``) one (rows, columns) stage of it (``stage_slice``)."""
    layout = lw.layouts.shared.get(dst.buffer)
    tile = list(dst.buffer.shape)
    if stages and len(tile) > 2 and isinstance(layout, SharedLayout) and stage_slice(dst):
        layout, tile = dataclasses.replace(layout, shape=tuple(layout.shape[-2:])), tile[-2:]
    got = box_layout(layout, dst.buffer.name, plain)
    if isinstance(got, str):
        return got
    return box_spec(lw.info.func.params, lw.an, src, tile, got[0], str(dst.buffer.dtype),
                    dst.buffer.name, index, swizzled=got[1])


def stage_slice(dst) -> bool:
    """Whether a shared region is one stage of a tile: extent 1 in every dimension but the last two,
    which it covers whole (``Ks[k % 2, :, :]`` of a ring the user indexes by hand). Leading
    dimensions are outermost in a tile's layout, so the stage is a (rows, columns) tile of the same
    layout at ``shared_offset(stage, 0, 0)``."""
    shape = [const_int(n) for n in dst.buffer.shape]
    ext = [const_int(e) for e in dst.extents]
    return len(shape) > 2 and all(e == 1 for e in ext[:-2]) and ext[-2:] == shape[-2:] and all(
        const_int(x) == 0 for x in dst.starts[-2:])


def box_spec(params, analyzer, src, tile, width, dtype, tile_name, index, swizzled: bool = True) -> dict | str:
    """The tensor map of a ``tile`` (rows, columns) box of 16- or 8-bit ``dtype`` elements, cut into
    ``width``-column swizzle slabs (``swizzled`` False: one unswizzled box as wide as the tile), at
    the global region ``src``, or why TMA cannot move it. Also asked, before the tile exists, by
    ``stage_epilogue`` (``tile_name``: for messages)."""
    name = src.buffer.name
    pi = next((i for i, p in enumerate(params) if p.same_as(src.buffer)), None)
    if pi is None or src.buffer.strides:
        return f"'{name}' is not a plain kernel parameter (a view or strided tensor)"
    shape = [const_int(x) for x in src.buffer.shape]
    tile = [const_int(x) for x in tile]
    ext = [const_int(x) for x in src.extents]
    rank = len(shape)
    esize = nbytes(str(src.buffer.dtype))
    if None in shape or esize not in ((1, 2) if swizzled else (1, 2, 4, 8)):
        bits = "16- or 8-bit" if swizzled else "8- to 64-bit"
        return f"'{name}' is not a {bits} tensor with a static shape"
    one_row = rank == 1 and not swizzled and tile[:1] == [1]     # (an unswizzled row of a 1-D tensor)
    if not (2 <= rank <= 5 or one_row) or len(tile) != 2 or None in tile or None in ext:
        return f"'{name}' is not a 2- to 5-D tensor copied as a 2-D tile"
    if str(src.buffer.dtype) != dtype:
        return f"'{name}' is copied with a conversion to {dtype}"
    # The tile is a (rows, columns) box: columns along the innermost dimension, rows along one
    # other dimension, every further dimension of extent 1 (a head / batch index).
    wide = [d for d in range(rank - 1) if ext[d] != 1]
    row_dim = wide[0] if len(wide) == 1 else (rank - 2 if not wide else None)
    rows_ext = 1 if row_dim == -1 else None if row_dim is None else ext[row_dim]   # (-1: a 1-D tensor, one row)
    if rows_ext is None or [rows_ext, ext[-1]] != tile:
        return f"the copy of '{name}' does not fill '{tile_name}' exactly"
    rows = tile[0]
    if rows > 256 or tile[1] % width:
        return f"'{tile_name}' has {rows} rows (a TMA box has at most 256)"
    if rows % 8 and tile[1] > width:
        # The hardware swizzles by shared-memory address bits (8 rows of a slab per pattern): a
        # slab after the first starts off its 8-row pattern unless the slabs hold whole patterns.
        return f"'{tile_name}' has {rows} rows, not a multiple of 8 (its swizzle slabs would not be aligned)"
    if (shape[-1] * esize) % 16:
        return f"a row of '{name}' is {shape[-1] * esize} bytes, not a multiple of 16 (TMA global strides)"
    col = analyzer.modular_set(src.starts[-1])
    align = 16 // esize
    if col.coeff % align or col.base % align:
        return f"the copy of '{name}' does not provably start at a multiple of {align} columns (16 bytes)"
    strides, acc = [], esize
    for d in range(rank - 1, 0, -1):          # byte strides of dims 1 .. rank-1, innermost first
        acc *= shape[d]
        strides.append(acc)
    box = [width] + [ext[d] for d in range(rank - 2, -1, -1)]
    return {"name": f"tl_tmap_{index}", "param": pi, "dtype": str(src.buffer.dtype),
            "dims": shape[::-1], "strides": strides, "box": box, "swizzle": width * esize if swizzled else 0}


def add_map(lw, spec: dict) -> int:
    """The index of ``spec`` among the kernel's tensor maps (``lw.tensormaps``): an earlier map
    equal to it but for its name (the same tensor, box and swizzle: the chunks of a chunked
    epilogue store through one), else a new one."""
    same = {k: v for k, v in spec.items() if k != "name"}
    for j, other in enumerate(lw.tensormaps):
        if {k: v for k, v in other.items() if k != "name"} == same:
            return j
    j = len(lw.tensormaps)
    lw.tensormaps.append(dict(spec, name=f"tl_tmap_{j}"))
    return j


def tmap(j: int):
    return tirx.call_extern("int64", "TL_TMAP", i32(j))   # not "handle": TVM would cast it to void*


def tile_loads(lw, copy, j, bar, stage, out, multicast=False) -> int:
    """Append to ``out`` the TMA box loads of one whole-tile copy (tensor map j) into ``stage``
    of its shared tile, one per swizzle slab, completing on ``bar``; the tile's bytes. With
    ``multicast`` this block loads its half of the slabs into both blocks of its cluster, or with
    ``multicast="rows"`` its half of the rows of the tile's one slab (map j's box becomes half
    the tile's height). In a persistent cluster (``Cluster.persistent``) those loads go under a
    flag of their own, set per tile where both blocks' coordinates agree; else the block loads its
    whole tile itself (``lw.ws``: the warp-specialisation plan, whose ``tensormaps`` hold map j)."""
    ws = lw.ws
    src, dst = decode_region(copy.value.args[0]), decode_region(copy.value.args[1])
    width = ws.tensormaps[j]["box"][0]
    shape = [const_int(x) for x in dst.buffer.shape]
    rows, cols = shape if len(shape) == 2 else (1, shape[0])     # (a 1-D tile: one row, ``_row_spec``)
    coords = [lw.rewrite(x) for x in src.starts[::-1]]      # innermost first
    view = lw.smem_views[dst.buffer]
    size = getattr(lw.layouts.shared.get(dst.buffer), "size", rows * cols)
    slabs = cols // width
    nbytes_tile = rows * cols * nbytes(str(dst.buffer.dtype))

    def box(issue, at, col, row=None, extra=()):
        """One box load: ``at`` elements into the stage, ``col`` columns and ``row`` rows on."""
        dst_ptr = tirx.address_of(tirx.BufferLoad(view, [stage * size + at]))
        rest = coords[1:] if row is None else [coords[1] + row] + coords[2:]
        return evaluate_extern(issue, dst_ptr, tmap(j), bar, *extra, coords[0] + col, *rest)

    plain = f"tl::tma_load_{len(coords)}d"

    def whole():     # the tile by this block alone: a box a slab (two half-height boxes for "rows")
        if multicast == "rows":
            return [box(plain, h * (rows // 2) * width, 0, h * (rows // 2)) for h in range(2)]
        return [box(plain, s * rows * width, s * width) for s in range(slabs)]

    if not multicast:
        out.extend(whole())
        return nbytes_tile
    cluster, mask = ws.cluster, [tirx.Cast("uint16", i32(3))]
    if multicast == "rows":     # one slab: this block's half of its rows, at their offset in both blocks
        half = rows // 2
        ws.tensormaps[j]["box"] = [width, half] + list(ws.tensormaps[j]["box"][2:])
        shared = [box("tl::tma_load_multicast_2d", cluster.rank * (half * width), 0, cluster.rank * half, mask)]
    else:
        mine = [cluster.rank * (slabs // 2) + h for h in range(slabs // 2)]
        shared = [box("tl::tma_load_multicast_2d", s * rows * width, s * width, None, mask) for s in mine]
    if not cluster.persistent:
        out.extend(shared)
        return nbytes_tile
    flag = tirx.Var(f"{dst.buffer.name}_pair", "bool")
    cluster.pair_flags.append((flag, coords))
    out.append(tirx.IfThenElse(flag, seq(shared), seq(whole())))
    return nbytes_tile


def multicast_mask(lw, stmt) -> int:
    """The cluster mask of a ``tl.copy`` (its seventh operand; 0: no multicast), checked against
    the kernel's cluster."""
    args = stmt.value.args
    mask = const_int(args[6]) if len(args) > 6 else 0
    if not mask:
        return 0
    dims = getattr(lw, "cluster_dims", None)
    size = 1
    for d in dims or ():
        size *= int(d)
    if size <= 1:
        raise LoweringError("TL0002", "cluster_mask multicasts a load to blocks of a thread block cluster: launch the "
                            "kernel with T.ClusterKernel(..., cluster_dims=...)", stmt.span)
    if mask >> size:
        raise LoweringError("TL0002", f"cluster_mask={mask:#x} names blocks beyond the cluster's {size}", stmt.span)
    return mask


def multicast(lw, load, mask, span):
    """A TMA load statement as its multicast form: the lowest-ranked block of ``mask`` loads the
    tile into every block of the mask (each completing the bytes on its own barrier at the same
    offset), the other blocks of the mask issue nothing (they receive it), blocks outside the mask
    load their own tile."""
    call = load.value
    name, args = call.args[0].value, list(call.args[1:])
    m = tirx.Cast("uint16", i32(mask))
    if name == "tl::tma_load_bulk":            # (dst, src, bytes, bar)
        mc = evaluate_extern("tl::tma_load_multicast_bulk", *args, m, span=span)
    else:                                       # tl::tma_load_Nd(dst, desc, bar, coords...)
        mc = evaluate_extern(name.replace("tl::tma_load_", "tl::tma_load_multicast_"), *args[:3], m, *args[3:],
                             span=span)
    low = (mask & -mask).bit_length() - 1
    rank = tirx.call_extern("int32", "tl::cluster_ctarank")
    outside = tirx.EQ(tirx.bitwise_and(tirx.shift_right(i32(mask), rank), i32(1)), i32(0))
    return tirx.IfThenElse(tirx.EQ(rank, i32(low)), mc, tirx.IfThenElse(outside, load, None, span=span), span=span)


__all__ = ["box_layout", "box_spec", "copy_spec", "multicast", "multicast_mask", "tile_loads", "tma_box_spec", "tmap"]
