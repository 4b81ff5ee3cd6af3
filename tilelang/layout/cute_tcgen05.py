"""tcgen05.ld/st data-movement shapes as CuTe TV atoms, and the copy plan of a TMEM tile.

Contract (upstream's ``tl.get_tcgen05_meta_*`` / ``tl.ExpandTcgen05Layout``):
- ``tcgen05_meta(kind, shape)`` -> ``Tcgen05Meta``: the wrapper name, the per-warp single-issue
  TV atom ``tv`` ((lane..., reg...) -> (datapath@0, b32 column@1), CUTLASS ``Copy_Traits<...1x>``)
  and ``max_chunks`` (largest ``.xN`` of one issue; 0 when the wrapper chains repetitions exactly).
- ``expand_tcgen05_layout(meta, tmem_tile, num_threads, values_per_column=1)`` -> ``Tcgen05CopyPlan``
  or ``None``. ``tmem_tile`` maps logical tile coordinates to (datapath@0, column@1). One issue
  covers the tile's datapath footprint by its maximal contiguous column run; warps sit one
  sub-partition apart (32 datapaths, or 16 for a PTX Layout F tile, issued once per warp),
  warpgroups split the columns, and the wrapper's register order is (packed partner, atom
  registers, .xN repetitions, duplicate high-datapath issue). ``fragment`` maps a logical tile
  coordinate to (thread@0, value@1); ``rest_domain`` maps an issue to its flat logical origin.
  ``None`` when the instruction cannot express the tile bijectively in that arrangement.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import cute

WARPGROUP = 128

_DP_ONLY = cute.Layout.parse("(1,1):(1,0)")      # (datapath, column) -> datapath
_COL_ONLY = cute.Layout.parse("(1,1):(0,1)")     # (datapath, column) -> column
_SERIALIZE = cute.Layout.parse("(1,1):(1,128)")  # (datapath, column) -> datapath + 128 * column

# shape -> (TV atom over (datapath@0, column@1), max .xN of one issue, wrapper stem)
_ATOMS = {
    # lane t -> datapath t, one register on one column per repetition; chaining is exact.
    "32dp32b": ("(32,1):(1@0,0)", 0, "32dp32b"),
    # lane t -> datapath 8*(t%2) + t/4, column (t/2)%2; one register.
    "16dp64b": ("((2,2,8),1):((8@0,1@1,1@0),0)", 128, "32dp64b"),
    # lane t -> datapath t/4, column t%4; two registers stepping 8 datapaths.
    "16dp128b": ("((4,8),2):((1@1,1@0),8@0)", 64, "32dp128b"),
    # lane t -> datapath t/4, column 2*(t%4); registers (next column, 8 datapaths on).
    "16dp256b": ("((4,8),(2,2)):((2@1,1@0),(1@1,8@0))", 32, "32dp256b"),
}


@dataclass(frozen=True)
class Tcgen05Meta:
    intrinsics_name: str
    tv: cute.Layout
    max_chunks: int


@dataclass(frozen=True)
class Tcgen05CopyPlan:
    fragment: cute.Layout       # logical tile coordinate -> (thread@0, value@1)
    num_chunks_each_wg: int     # .xN repetitions per warpgroup, per issue
    rest_domain: cute.Layout    # issue -> flat logical tile origin
    num_issues: int
    vals_per_issue: int         # registers per thread, per issue
    datapaths_per_warp: int     # 32, or 16 for a Layout F tile


def tcgen05_meta(kind: str, shape: str) -> Tcgen05Meta:
    """The metadata of ``tcgen05.{ld,st}`` (``kind``) with data-movement ``shape`` (e.g. ``16dp64b``)."""
    if kind not in ("ld", "st") or shape not in _ATOMS:
        raise ValueError(f"unknown tcgen05 data-movement {kind!r} {shape!r}; expected ld/st and one of "
                         f"{sorted(_ATOMS)}")
    tv, max_chunks, stem = _ATOMS[shape]
    return Tcgen05Meta(f"tl::tcgen05_{kind}_{stem}Nx", cute.Layout.parse(tv), max_chunks)


def atom_datapaths(meta: Tcgen05Meta) -> int:
    return int(cute.cosize(cute.composition(_DP_ONLY, meta.tv)))


def atom_width(meta: Tcgen05Meta) -> int:
    return int(cute.cosize(cute.composition(_COL_ONLY, meta.tv)))


def _const(value, what):
    if not isinstance(value, int):
        raise ValueError(f"tcgen05 copy planning needs a static {what}, got {value}")
    return value


def _scaled(layout: cute.Layout, factor: int) -> cute.Layout:
    return cute.Layout(layout.shape, cute._mul(layout.stride, factor))


def expand_tcgen05_layout(meta: Tcgen05Meta, tmem_tile: cute.Layout, num_threads: int,
                          values_per_column: int = 1) -> Tcgen05CopyPlan | None:
    """The copy plan of ``tmem_tile`` with ``meta``'s instruction (see the module docstring)."""
    num_threads = int(num_threads)
    if num_threads <= 0 or num_threads % WARPGROUP:
        raise ValueError(f"a tcgen05 copy needs a positive multiple of {WARPGROUP} threads, got {num_threads}")
    if values_per_column < 1:
        raise ValueError(f"values_per_column must be >= 1, got {values_per_column}")
    num_wgs = num_threads // WARPGROUP

    # Datapaths per warp follow the tile: its contiguous datapath run, at most one sub-partition.
    dp_atom = atom_datapaths(meta)
    dp_run = _const(cute.size(cute.right_inverse(cute.composition(_DP_ONLY, tmem_tile))), "datapath run")
    dp_per_warp = min(dp_run, 32)
    if dp_per_warp % dp_atom:
        return None
    ndup = dp_per_warp // dp_atom
    dp_per_issue = 4 * dp_per_warp
    partial = dp_per_warp < 32

    serialized_tile = cute.composition(_SERIALIZE, tmem_tile)
    total = _const(cute.size(serialized_tile), "tile size")
    valid_dps = cute.filter(cute.composition(_DP_ONLY, tmem_tile))
    valid_cols = cute.filter(cute.composition(_COL_ONLY, tmem_tile))
    issue_cols = cute.right_inverse(valid_cols)
    num_dps, num_cols = cute.size(valid_dps), cute.size(valid_cols)
    cols_per_issue = cute.size(issue_cols)
    if num_dps != dp_per_issue or num_dps * num_cols != total or num_cols % cols_per_issue:
        return None
    num_issues = num_cols // cols_per_issue

    width = atom_width(meta)
    if cols_per_issue % width:
        return None
    chunks = cols_per_issue // width
    if chunks % num_wgs:
        return None
    chunks_each_wg = chunks // num_wgs
    pack = values_per_column if partial else 1
    if chunks_each_wg % pack:
        return None
    reps = chunks_each_wg // pack
    if meta.max_chunks and (reps & (reps - 1) or reps > meta.max_chunks):
        return None

    # The atom over value columns, then the thread modes (lanes, 4 warps a sub-partition apart,
    # warpgroups on column slices) and the value modes in the wrapper's register order.
    atom = cute.composition(cute.Layout((1, 1), (cute.E(0), pack * cute.E(1))), meta.tv)
    threads = cute.make_layout([atom[0], cute.Layout(4, 32 * cute.E(0)),
                                cute.Layout(num_wgs, chunks_each_wg * width * cute.E(1))])
    values = cute.make_layout([cute.Layout(pack, cute.E(1)), atom[1],
                               cute.Layout(reps, width * pack * cute.E(1)),
                               cute.Layout(ndup, dp_atom * cute.E(0))])
    serialized_tv = cute.composition(_SERIALIZE, cute.make_layout([threads, values]))

    to_logical = cute.left_inverse(serialized_tile)
    rest_cols = cute.logical_divide(valid_cols, issue_cols)[1]
    rest_domain = cute.composition(to_logical, _scaled(rest_cols, 128))
    if cute.size(rest_domain) != num_issues:
        return None

    tile_tv = cute.make_layout([cute.composition(to_logical, serialized_tv[0]),
                                cute.make_layout([cute.composition(to_logical, serialized_tv[1]), rest_domain])])
    num_vals = cute.size(tile_tv[1])
    inverse = cute.right_inverse(tile_tv)
    if cute.size(inverse) != total:
        return None
    tile_shape = tuple(cute.product(tmem_tile[i].shape) for i in range(cute.rank(tmem_tile)))
    fragment = cute.composition(cute.make_identity_layout((num_threads, num_vals)), inverse).with_shape(tile_shape)
    return Tcgen05CopyPlan(fragment, chunks_each_wg, rest_domain, num_issues,
                           dp_per_issue * cols_per_issue // num_threads, dp_per_warp)
