"""Shared-memory layouts: row-major with an XOR swizzle of 16-byte chunks.

The formula must match ``tl::swizzle_offset`` in ``src/tl/gemm_sm80.h``: with ``E`` bytes per
element, ``V = 16 / E`` elements per chunk (sub-byte elements, ``elem_bits``: ``V = 128 / bits``,
so a packed int4 tile is laid out as the bytes holding it, two elements to a byte) and
``NC = LD / V`` chunks per row, rows whose length is not a multiple of 32 bytes are not swizzled;
otherwise ``S = min(largest power of two dividing NC, 8)`` and the chunk index ``c / V`` is XORed
with ``(r / (8 / S)) % S``. Eight consecutive rows then put the same logical chunk in eight
different bank groups, so ldmatrix (eight rows, one chunk each) and 16-byte cp.async stores are
conflict free.

``slab=True`` is the wgmma operand layout of sm_90a (``tl::wgmma_smem_offset`` in
``src/tl/gemm_sm90.h``, docs/hopper.md): the row is cut into slabs of ``SW`` bytes (128, 64 or 32,
the widest dividing the row), slab ``s`` stored as its own ``ROWS x SW`` block, and inside a slab
the chunk is XORed with ``(r / (8 / S)) % S``, ``S = SW / 16``. A row of at most 128 bytes is one
slab, and then both layouts coincide.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

import tvm_ffi
from tvm import tirx

from tilelang.tir_utils import const_int, i32, simplify

from .layout import Layout, placeholders


@dataclass(frozen=True)
class SharedLayout:
    """Physical offset of element ``(..., r, c)`` of a shared tile."""

    shape: tuple
    elem_bytes: int
    swizzle: bool = True
    slab: bool = False      # wgmma operand layout (sm_90a): columns cut into swizzle-wide slabs
    slab_bytes: int = 0     # slab width in bytes (T.wgmma_gemm K slices); 0: the widest dividing a row
    elem_bits: int = 0      # a sub-byte element's width (int4: 4; elem_bytes is then 1); 0: 8 * elem_bytes

    @property
    def bits(self) -> int:
        return self.elem_bits or 8 * self.elem_bytes

    @property
    def ld(self) -> int:
        return int(self.shape[-1])

    @property
    def slab_width(self) -> int:
        """Elements per slab row: the wgmma swizzle width (128, 64 or 32 bytes) in elements; for
        the plain layout, the whole row."""
        if not self.slab:
            return self.ld
        if self.slab_bytes:
            return self.slab_bytes // self.elem_bytes
        row = self.ld * self.elem_bytes
        sw = next((w for w in (128, 64, 32) if row % w == 0), None)
        return sw // self.elem_bytes if sw else self.ld

    @property
    def group(self) -> int:
        """S: how many chunks take part in the XOR (1 means no swizzle)."""
        if not self.swizzle or len(self.shape) < 2:
            return 1
        if self.slab:
            return self.slab_width * self.elem_bytes // 16
        if (self.ld * self.bits) % 256 != 0:
            return 1
        nc = self.ld * self.bits // 128
        s = nc & -nc
        return min(s, 8)

    @property
    def vector(self) -> int:
        return max(1, 128 // self.bits)

    def offset(self, indices):
        """Element offset of ``indices`` (row-major, swizzled in the last two dims)."""
        s = self.group
        r = indices[-2] if len(indices) >= 2 else i32(0)
        c = indices[-1]
        slab_base = None
        if self.slab and self.slab_width < self.ld:
            w = self.slab_width
            rows = int(self.shape[-2]) if len(self.shape) >= 2 else 1
            slab_base = tirx.floordiv(c, i32(w)) * (rows * w) + r * w
            c = tirx.floormod(c, i32(w))
        if s > 1:
            v = self.vector
            chunk = tirx.floordiv(c, i32(v))
            key = tirx.floormod(tirx.floordiv(r, i32(8 // s)), i32(s)) if s < 8 else tirx.floormod(r, i32(8))
            c = tirx.bitwise_xor(chunk, key) * v + tirx.floormod(c, i32(v))
        if slab_base is not None:
            out, stride = slab_base + c, int(self.shape[-1]) * int(self.shape[-2])
            for k in reversed(range(len(self.shape) - 2)):
                out = out + indices[k] * stride
                stride *= int(self.shape[k])
            return simplify(out)
        # Rebuild the row-major offset with the swizzled column.
        out = c
        stride = 1
        for k in reversed(range(len(self.shape) - 1)):
            stride *= int(self.shape[k + 1])
            out = out + indices[k] * stride
        return simplify(out)

    def describe(self) -> str:
        s = self.group
        if self.slab and s > 1:
            w = self.slab_width
            slabs = self.ld // w
            cut = f", {slabs} slabs of {w} columns" if slabs > 1 else ""
            return f"wgmma operand layout: {s * 16}-byte swizzle{cut}"
        if s == 1:
            return "row-major (no swizzle)"
        return f"row-major, 16-byte chunks XOR-swizzled in groups of {s} ({s * 16}-byte pattern)"


def _exact_range(variables, expr, shape):
    """(min, max) of ``expr`` over the whole tile, by enumeration (bit operations such as the XOR
    of a swizzle have no useful analyzer bound); None when the tile is too large to enumerate."""
    import numpy as np

    from .axes import evaluate_index_expr

    if int(np.prod(shape)) > (1 << 20):
        return None
    grid = np.indices(tuple(int(e) for e in shape), dtype=np.int64)
    try:
        values = np.asarray(evaluate_index_expr(expr, list(zip(variables, list(grid)))))
    except ValueError:
        return None
    return int(values.min()), int(values.max())


class CustomSharedLayout:
    """A user's ``T.Layout``: physical index = forward(logical index), stored row-major over the
    physical index space (whose extents come from bounding the forward expressions). Each output
    index is a (variables, expression) pair over the logical indices."""

    def __init__(self, shape, elem_bytes, lambdas):
        import tvm

        self.shape = tuple(shape)
        self.elem_bytes = elem_bytes
        self.lambdas = list(lambdas)
        self.physical = []
        for variables, expr in self.lambdas:
            exact = _exact_range(variables, expr, self.shape)
            if exact is None:  # too large to enumerate: the analyzer's bound
                an = tvm.sym.Analyzer()
                for var, extent in zip(variables, self.shape):
                    an.bind(var, tvm.ir.Range(0, extent))
                bound = an.const_int_bound(expr)
                exact = (int(bound.min_value), int(bound.max_value))
            if exact[0] < 0:
                raise ValueError(f"layout output {expr} can be negative")
            self.physical.append(exact[1] + 1)
        self.size = math.prod(self.physical)
        self.group = 1

    def offset(self, indices):
        from tilelang.tir_utils import substitute

        flat = i32(0)
        for (variables, expr), extent in zip(self.lambdas, self.physical):
            flat = flat * extent + substitute(expr, dict(zip(variables, indices)))
        return simplify(flat)

    def describe(self) -> str:
        return f"custom layout onto {list(self.physical)} ({', '.join(str(e) for _, e in self.lambdas)})"

    def places_like(self, other) -> bool:
        """Whether every element of the tile has the same physical offset here as in ``other``
        (a ``SharedLayout`` of the same shape): upstream's bank swizzles
        (``make_full_bank_swizzled_layout``...) are the compiler's own swizzle written as a
        ``T.Layout`` where the row is as wide as their pattern. By enumeration; False for a tile
        too large to enumerate."""
        import numpy as np

        from .axes import evaluate_index_expr

        if tuple(other.shape) != self.shape or not all(isinstance(e, int) for e in self.shape) \
                or math.prod(self.shape) > (1 << 20):
            return False
        variables = placeholders(len(self.shape))
        env = list(zip(variables, list(np.indices(self.shape, dtype=np.int64))))
        try:
            mine = np.broadcast_to(np.asarray(evaluate_index_expr(self.offset(variables), env)), self.shape)
            theirs = np.broadcast_to(np.asarray(evaluate_index_expr(other.offset(variables), env)), self.shape)
        except ValueError:
            return False
        return bool(np.array_equal(mine, theirs))


# ----- user-facing layout constructors (upstream's tilelang.layout.swizzle) ------------------------
# A buffer-like argument is a Buffer, a BufferLoad/BufferRegion of one, or (the swizzle makers) a
# 2-D (rows, columns, element bits) triple as upstream's plotting examples pass.


class SwizzledLayout(Layout):
    """The compiler's own 16-byte-chunk XOR swizzle (``SharedLayout``), the default of gemm operands."""

    kind = "swizzle"


class RowMajorLayout(Layout):
    kind = "row_major"


class SwizzleMode(enum.Enum):
    """The shared-memory swizzle of TMA/wgmma descriptors, by swizzle width."""

    NONE = 0
    SWIZZLE_128B = 1
    SWIZZLE_64B = 2
    SWIZZLE_32B = 3

    def is_none(self) -> bool:
        return self is SwizzleMode.NONE

    def is_swizzle_32b(self) -> bool:
        return self is SwizzleMode.SWIZZLE_32B

    def is_swizzle_64b(self) -> bool:
        return self is SwizzleMode.SWIZZLE_64B

    def is_swizzle_128b(self) -> bool:
        return self is SwizzleMode.SWIZZLE_128B

    def swizzle_byte_size(self) -> int:
        """Swizzle width in bytes (1 for none)."""
        return {0: 1, 1: 128, 2: 64, 3: 32}[self.value]

    def swizzle_atom_size(self) -> int:
        """Swizzle width in 16-byte chunks (1 for none)."""
        return 1 if self.is_none() else self.swizzle_byte_size() // 16

    def wgmma_layout_type(self) -> int:
        """The wgmma descriptor's layout-type field (none 0, 128B 1, 64B 2, 32B 3)."""
        return self.value

    def tcgen05_layout_type(self) -> int:
        return {0: 0, 1: 2, 2: 4, 3: 6}[self.value]

    def smem_alignment(self) -> int:
        """Shared-memory base alignment in bytes the swizzle needs."""
        return {0: 128, 1: 1024, 2: 512, 3: 256}[self.value]

    @staticmethod
    def from_ordinal(ordinal: int) -> "SwizzleMode":
        return SwizzleMode(int(ordinal))


def _buffer_of(obj):
    if isinstance(obj, tirx.Buffer):
        return obj
    for attr in ("buffer", "source"):
        buf = getattr(obj, attr, None)
        if isinstance(buf, tirx.Buffer):
            return buf
    raise TypeError(f"expected a buffer (or a load/region of one), got {type(obj).__name__}")


def _buffer_info(obj, args=()):
    """(shape, element bits) of a buffer-like argument, or of ``(rows, columns, bits)``."""
    if isinstance(obj, (int,)) and len(args) == 2:
        return [int(obj), int(args[0])], int(args[1])
    buf = _buffer_of(obj)
    return [const_int(s) if const_int(s) is not None else s for s in buf.shape], tvm_ffi.dtype(str(buf.dtype)).bits


def make_swizzled_layout(buffer=None, k_major=True, allow_pad=True):
    """The compiler's swizzled shared layout for ``buffer`` (what gemm operands get)."""
    if buffer is None:
        return SwizzledLayout()
    shape, bits = _buffer_info(buffer)
    phys = SharedLayout(tuple(shape), max(1, bits // 8), True)
    return SwizzledLayout.from_index(shape, [phys.offset(placeholders(len(shape)))])


def make_linear_layout(buffer=None):
    """Row-major layout of ``buffer`` (no swizzle)."""
    if buffer is None:
        return RowMajorLayout()
    shape = buffer if isinstance(buffer, (list, tuple)) else _buffer_info(buffer)[0]
    variables = placeholders(len(shape))
    flat = i32(0)
    for var, extent in zip(variables, shape):
        flat = flat * extent + var
    return RowMajorLayout.from_index(shape, [flat])


def _bank_swizzle(buffer, args, chunks: int):
    """The TMA ``chunks * 16``-byte swizzle: per 8-row group, 16-byte chunk ``c`` of each row ``s``
    lands at ``c ^ (s / (8 / chunks))``, the row's ``chunks`` chunks contiguous; columns beyond one
    swizzle width form the slowest output (``[column slab, row group, offset]``)."""
    shape, bits = _buffer_info(buffer, args)
    if len(shape) < 2:
        raise ValueError(f"a bank swizzle needs a buffer of rank >= 2, got shape {shape}")
    rows, cols = shape[-2], shape[-1]
    vec = 128 // bits
    if not isinstance(rows, int) or not isinstance(cols, int):
        raise ValueError(f"a bank swizzle needs constant last two dimensions, got {shape}")
    if not (rows == 4 or rows % 8 == 0) or cols % (vec * chunks) != 0:
        raise ValueError(f"a {chunks * 16}-byte swizzle needs rows 4 or a multiple of 8 and columns a multiple "
                         f"of {vec * chunks} for {bits}-bit elements, got {rows} x {cols}")
    i, j = placeholders(2)
    s = tirx.floormod(i, 8)
    chunk = tirx.floordiv(j, vec)
    swizzled = tirx.bitwise_xor(tirx.floormod(chunk, chunks), tirx.floordiv(s, 8 // chunks))
    index = tirx.floormod(j, vec) + (swizzled + s * chunks) * vec
    base = Layout.from_index([rows, cols], [tirx.floordiv(chunk, chunks), tirx.floordiv(i, 8), index])
    return base.expand(shape[:-2])


def make_full_bank_swizzled_layout(buffer, *args):
    """128-byte swizzle (TMA ``SWIZZLE_128B``)."""
    return _bank_swizzle(buffer, args, 8)


def make_half_bank_swizzled_layout(buffer, *args):
    """64-byte swizzle (TMA ``SWIZZLE_64B``)."""
    return _bank_swizzle(buffer, args, 4)


def make_quarter_bank_swizzled_layout(buffer, *args):
    """32-byte swizzle (TMA ``SWIZZLE_32B``)."""
    return _bank_swizzle(buffer, args, 2)


def make_wgmma_swizzled_layout(buffer, continuity=None, k_major=True):
    """The widest bank swizzle whose width divides ``continuity`` (default: the row) bytes."""
    shape, bits = _buffer_info(buffer)
    row_bytes = (continuity if continuity is not None else shape[-1]) * bits // 8
    for chunks in (8, 4, 2):
        if row_bytes % (chunks * 16) == 0:
            return _bank_swizzle(buffer, (), chunks)
    return make_linear_layout(buffer)
