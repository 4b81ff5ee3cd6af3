"""Shared-memory layouts: row-major with an XOR swizzle of 16-byte chunks.

The formula must match ``tl::swizzle_offset`` in ``src/tl/gemm_sm80.h``: with ``E`` bytes per
element, ``V = 16 / E`` elements per chunk and ``NC = LD / V`` chunks per row, rows whose length
is not a multiple of 32 bytes are not swizzled; otherwise ``S = min(largest power of two dividing
NC, 8)`` and the chunk index ``c / V`` is XORed with ``(r / (8 / S)) % S``. Eight consecutive rows
then put the same logical chunk in eight different bank groups, so ldmatrix (eight rows, one chunk
each) and 16-byte cp.async stores are conflict free.

``slab=True`` is the wgmma operand layout of sm_90a (``tl::wgmma_smem_offset`` in
``src/tl/gemm_sm90.h``, docs/hopper.md): the row is cut into slabs of ``SW`` bytes (128, 64 or 32,
the widest dividing the row), slab ``s`` stored as its own ``ROWS x SW`` block, and inside a slab
the chunk is XORed with ``(r / (8 / S)) % S``, ``S = SW / 16``. A row of at most 128 bytes is one
slab, and then both layouts coincide.
"""

from __future__ import annotations

from dataclasses import dataclass

from tvm import tirx

from tilelang.transform.ir_utils import i32, simplify


@dataclass(frozen=True)
class SharedLayout:
    """Physical offset of element ``(..., r, c)`` of a shared tile."""

    shape: tuple
    elem_bytes: int
    swizzle: bool = True
    slab: bool = False      # wgmma operand layout (sm_90a): columns cut into swizzle-wide slabs

    @property
    def ld(self) -> int:
        return int(self.shape[-1])

    @property
    def slab_width(self) -> int:
        """Elements per slab row: the wgmma swizzle width (128, 64 or 32 bytes) in elements; for
        the plain layout, the whole row."""
        if not self.slab:
            return self.ld
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
        if (self.ld * self.elem_bytes) % 32 != 0:
            return 1
        nc = self.ld * self.elem_bytes // 16
        s = nc & -nc
        return min(s, 8)

    @property
    def vector(self) -> int:
        return max(1, 16 // self.elem_bytes)

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


class CustomSharedLayout:
    """A user's ``T.Layout``: physical index = forward(logical index), stored row-major over the
    physical index space (whose extents come from bounding the forward expressions). Each output
    index is a (variables, expression) pair over the logical indices."""

    def __init__(self, shape, elem_bytes, lambdas):
        import math

        import tvm

        self.shape = tuple(shape)
        self.elem_bytes = elem_bytes
        self.lambdas = list(lambdas)
        self.physical = []
        for variables, expr in self.lambdas:
            an = tvm.sym.Analyzer()
            for var, extent in zip(variables, self.shape):
                an.bind(var, tvm.ir.Range(0, extent))
            bound = an.const_int_bound(expr)
            if bound.min_value < 0:
                raise ValueError(f"layout output {expr} can be negative")
            self.physical.append(int(bound.max_value) + 1)
        self.size = math.prod(self.physical)
        self.group = 1

    def offset(self, indices):
        from tilelang.transform.ir_utils import substitute

        flat = i32(0)
        for (variables, expr), extent in zip(self.lambdas, self.physical):
            flat = flat * extent + substitute(expr, dict(zip(variables, indices)))
        return simplify(flat)

    def describe(self) -> str:
        return f"custom layout onto {list(self.physical)} ({', '.join(str(e) for _, e in self.lambdas)})"
