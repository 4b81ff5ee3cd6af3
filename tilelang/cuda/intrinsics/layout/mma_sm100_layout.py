"""Tensor-memory (TMEM) fragment layouts of Blackwell's dense tcgen05 MMA, in CuTe algebra.

Contract (upstream's ``tilelang.cuda.intrinsics.layout.mma_sm100_layout``):
- A TMEM fragment is a ``cute.Layout`` whose strides are ``ScaledBasis`` values: it maps a logical
  buffer coordinate ``(batch..., m, n)`` to the TMEM coordinate ``(datapath, column)``, the column
  counted in values of the buffer's dtype. ``.to_tilelang()`` gives the ``[datapath, column]``
  form that travels through the layout map; ``cute.Layout.from_tilelang_hierarchical`` undoes it.
- ``make_tmem_frg_atom(num_sms, alloc_mode, atom_m, atom_n)`` -> ``(atom, tile_stride)``: the
  per-CTA instruction atom in virtual TMEM addressing (datapath stride 1, column stride 128) for
  the PTX data-path layouts A-D and F, and the stride (in atoms) between tiles of the atom.
  ``make_tmem_frg_ws_atom`` gives the weight-stationary C/D atoms (layouts E and G).
- ``make_tmem_frg(buffer, num_sms, alloc_mode, atom_m, atom_n, storage_bits)`` repeats the atom
  over the buffer (M tiles fastest, then N tiles, then the leading batch modes with the last one
  fastest) and converts virtual addresses to ``(datapath, column)``, scaling columns by
  ``storage_bits / value bits`` (a 16-bit accumulator sits in the low half of a 32-bit column).
  ``make_tmem_frg_a`` / ``make_tmem_frg_c`` pick the allocation mode the instruction implies.
- ``validate_tcgen05_ts_instruction(meta, a_dtype, transposed)`` raises ``ValueError`` for a TS
  (A in TMEM) instruction shape CUTLASS has no wrapper for.
Illegal requests raise ``ValueError`` (or ``AssertionError`` for shapes the caller must have
checked), naming the buffer and the extent at fault.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum

from tilelang.language.dtypes import get_tvm_dtype
from tilelang.layout import cute

__all__ = [
    "TCGEN05Meta", "TCGEN05TmemAllocMode", "make_tmem_frg", "make_tmem_frg_a", "make_tmem_frg_atom",
    "make_tmem_frg_c", "make_tmem_frg_ws_atom", "validate_tcgen05_ts_instruction",
]

TMEM_DATAPATHS = 128
TMEM_COLUMNS = 512          # 32-bit columns
_VIRTUAL_COLUMN = 128       # column stride of virtual TMEM addressing


class TCGEN05TmemAllocMode(Enum):
    """How the tiles of a TMEM fragment share datapaths (CUTLASS ``UMMA::TmemAllocMode``)."""

    INTERLEAVED = "interleaved"
    NON_INTERLEAVED = "non_interleaved"
    DUPLICATED = "duplicated"


@dataclass(frozen=True)
class TCGEN05Meta:
    """One tcgen05 MMA instruction atom: M x N x K, weight-stationary (``.ws``), two-CTA."""

    atom_m: int
    atom_n: int
    atom_k: int
    enable_ws: bool
    enable_2cta: bool

    @classmethod
    def from_ffi(cls, values: Iterable[int]) -> TCGEN05Meta:
        m, n, k, ws, two = (int(v) for v in values)
        return cls(m, n, k, bool(ws), bool(two))

    @property
    def num_sms(self) -> int:
        return 2 if self.enable_2cta else 1

    @property
    def atom_m_per_cta(self) -> int:
        return self.atom_m // self.num_sms

    @property
    def b_atom_n_per_cta(self) -> int:
        """A two-CTA instruction reads half of B's N extent from each CTA."""
        return self.atom_n // self.num_sms


def _virtual(shape, stride) -> cute.Layout:
    return cute.make_layout(shape, stride)


def make_tmem_frg_atom(num_sms: int, alloc_mode: TCGEN05TmemAllocMode, atom_m: int,
                       atom_n: int) -> tuple[cute.Layout, int]:
    """``(atom, tile_stride)`` of CUTLASS's ``tmem_frg`` for a per-CTA ``atom_m x atom_n`` tile."""
    mode = alloc_mode.value
    if num_sms == 1:
        assert alloc_mode in (TCGEN05TmemAllocMode.INTERLEAVED, TCGEN05TmemAllocMode.NON_INTERLEAVED), \
            f"a one-SM TMEM fragment cannot use the {mode} allocation"
        if atom_m == 64:
            # layout F: 16-datapath groups on every other quarter; an interleaved second tile takes
            # the free groups (tile stride 1), a non-interleaved one new columns (stride 2)
            atom = _virtual(((16, 4), atom_n), ((1, 32), _VIRTUAL_COLUMN))
            return atom, 1 if alloc_mode is TCGEN05TmemAllocMode.INTERLEAVED else 2
        if atom_m == 128:
            return _virtual((TMEM_DATAPATHS, atom_n), (1, _VIRTUAL_COLUMN)), 1    # layout D
        raise ValueError(f"a one-SM TMEM fragment has an M atom of 64 or 128, got {atom_m}")
    if num_sms == 2:
        assert alloc_mode in (TCGEN05TmemAllocMode.INTERLEAVED, TCGEN05TmemAllocMode.DUPLICATED), \
            f"a two-SM TMEM fragment cannot use the {mode} allocation"
        if atom_m == 32:
            assert alloc_mode is TCGEN05TmemAllocMode.INTERLEAVED, \
                "a two-SM M32 TMEM fragment is only allocated interleaved"
            assert atom_n % 4 == 0, f"a two-SM M32 TMEM fragment needs N divisible by 4, got {atom_n}"
            return _virtual((32, (atom_n // 4, 4)), (1, (_VIRTUAL_COLUMN, 32))), 1   # layout C
        if atom_m == 64:
            if alloc_mode is TCGEN05TmemAllocMode.DUPLICATED:
                # the M domain is doubled (each row twice): legal for CUTLASS, not one-to-one
                return _virtual((TMEM_DATAPATHS, atom_n), (1, _VIRTUAL_COLUMN)), 1
            assert atom_n % 2 == 0, f"a two-SM M64 TMEM fragment needs an even N, got {atom_n}"
            return _virtual((64, (atom_n // 2, 2)), (1, (_VIRTUAL_COLUMN, 64))), 1   # layout B
        if atom_m == 128:
            return _virtual((TMEM_DATAPATHS, atom_n), (1, _VIRTUAL_COLUMN)), 1      # layout A
        raise ValueError(f"a two-SM TMEM fragment has an M atom of 32, 64 or 128, got {atom_m}")
    raise ValueError(f"TMEM fragments span one or two SMs, got {num_sms}")


def make_tmem_frg_ws_atom(atom_m: int, atom_n: int) -> cute.Layout:
    """The weight-stationary one-SM C/D atom: N quarters (M32, layout G) or halves (M64, layout E)
    stacked over the datapaths an M below 128 leaves free."""
    assert atom_n in (64, 128, 256), f"a weight-stationary TMEM fragment has N 64, 128 or 256, got {atom_n}"
    if atom_m == 32:
        return _virtual((32, (atom_n // 4, 4)), (1, (_VIRTUAL_COLUMN, 32)))
    if atom_m == 64:
        return _virtual((64, (atom_n // 2, 2)), (1, (_VIRTUAL_COLUMN, 64)))
    if atom_m == 128:
        return _virtual((TMEM_DATAPATHS, atom_n), (1, _VIRTUAL_COLUMN))
    raise ValueError(f"a weight-stationary TMEM fragment has an M atom of 32, 64 or 128, got {atom_m}")


def _tile(buffer, atom: cute.Layout, tile_stride: int, atom_m: int, atom_n: int,
          storage_bits: int) -> cute.Layout:
    shape = tuple(int(x) for x in buffer.shape)
    name = buffer.name
    assert len(shape) >= 2, f"TMEM buffer {name} needs at least two modes, got shape {shape}"
    m, n = shape[-2:]
    assert m % atom_m == 0, f"TMEM buffer {name} M extent {m} must be divisible by the fragment atom M={atom_m}"
    assert n % atom_n == 0, f"TMEM buffer {name} second-mode extent {n} must be divisible by the fragment atom {atom_n}"
    dt = get_tvm_dtype(buffer.dtype)
    value_bits = dt.bits * dt.lanes
    assert storage_bits >= value_bits and storage_bits % value_bits == 0, \
        f"TMEM buffer {name}: storage width {storage_bits} is not a multiple of the value width {value_bits}"
    batch = tuple(reversed(shape[:-2]))     # the last batch axis repeats fastest
    count = 1
    for e in batch:
        count *= e
    assert count * m * n * storage_bits <= TMEM_DATAPATHS * TMEM_COLUMNS * 32, \
        f"TMEM buffer {name} shape {shape} exceeds the 128 x 512 32-bit tensor memory"

    # the atom repeated over (M tiles, N tiles, batch...), column-major from tile_stride
    counts = (m // atom_m, n // atom_n, *batch)
    strides, step = [], tile_stride
    for e in counts:
        strides.append(step)
        step *= e
    tiled = cute.blocked_product(atom, cute.make_layout(counts, tuple(strides)))
    # top-level modes in buffer order: batch (outermost first), then M, N
    order = [*range(cute.rank(tiled) - 1, 1, -1), 0, 1]
    logical = cute.make_layout([tiled[i] for i in order])
    # virtual address -> (datapath, column in values)
    to_tmem = cute.make_layout((TMEM_DATAPATHS, 16384), (cute.E(0), (storage_bits // value_bits) * cute.E(1)))
    return cute.composition(to_tmem, logical)


def make_tmem_frg(buffer, num_sms: int, alloc_mode: TCGEN05TmemAllocMode, atom_m: int, atom_n: int,
                  storage_bits: int) -> cute.Layout:
    """The fragment of ``buffer`` tiled with the ordinary (not weight-stationary) atom."""
    if alloc_mode is TCGEN05TmemAllocMode.DUPLICATED and atom_m == 64:
        raise ValueError(
            f"TMEM buffer {buffer.name} would need CUTLASS's duplicated 2SM M64 allocation, which stores each "
            "row twice and so is no one-to-one layout; store the duplicated A explicitly instead")
    atom, tile_stride = make_tmem_frg_atom(num_sms, alloc_mode, atom_m, atom_n)
    return _tile(buffer, atom, tile_stride, atom_m, atom_n, storage_bits)


def make_tmem_frg_a(buffer, meta: TCGEN05Meta) -> cute.Layout:
    """The A operand of a TS instruction (A in TMEM, M x K atoms, stored at its own width)."""
    mode = TCGEN05TmemAllocMode.DUPLICATED if meta.enable_2cta else TCGEN05TmemAllocMode.NON_INTERLEAVED
    dt = get_tvm_dtype(buffer.dtype)
    return make_tmem_frg(buffer, meta.num_sms, mode, meta.atom_m_per_cta, meta.atom_k, dt.bits * dt.lanes)


def make_tmem_frg_c(buffer, meta: TCGEN05Meta, *, is_ts: bool) -> cute.Layout:
    """The accumulator of ``meta``'s instruction (32-bit columns): weight-stationary SS
    instructions use layouts E/G; TS ones the non-interleaved (one SM) or interleaved (two SMs)
    allocation; other SS ones the interleaved allocation."""
    if meta.enable_ws and not is_ts:
        assert not meta.enable_2cta, "weight-stationary tcgen05 MMA runs on one SM"
        return _tile(buffer, make_tmem_frg_ws_atom(meta.atom_m, meta.atom_n), 1, meta.atom_m, meta.atom_n, 32)
    if is_ts and not meta.enable_2cta:
        mode = TCGEN05TmemAllocMode.NON_INTERLEAVED
    else:
        mode = TCGEN05TmemAllocMode.INTERLEAVED
    return make_tmem_frg(buffer, meta.num_sms, mode, meta.atom_m_per_cta, meta.atom_n, 32)


def validate_tcgen05_ts_instruction(meta: TCGEN05Meta, a_dtype, transposed: bool) -> None:
    """Raise ``ValueError`` unless CUTLASS has a dense TS wrapper for ``meta`` with ``a_dtype``."""
    if transposed:
        raise ValueError("a TS tcgen05 MMA reads A from TMEM K-major: transpose_A must be False")
    m, n = meta.atom_m, meta.atom_n
    if meta.enable_2cta:
        if m not in (128, 256):
            raise ValueError(f"2CTA TS tcgen05 MMA: instruction M must be 128 or 256, got {m}")
        if not (32 <= n <= 256 and n % 32 == 0):
            raise ValueError(f"2CTA TS tcgen05 MMA: instruction N must be a multiple of 32 in [32, 256], got {n}")
        return
    if m not in (64, 128):
        raise ValueError(f"1CTA TS tcgen05 MMA: instruction M must be 64 or 128, got {m}")
    if str(get_tvm_dtype(a_dtype)) in ("int8", "uint8"):
        ok, rule = n == 8 or (16 <= n <= 256 and n % 16 == 0), "8 or a multiple of 16 in [16, 256]"
    elif m == 64:
        ok, rule = 8 <= n <= 256 and n % 8 == 0, "a multiple of 8 in [8, 256] for M=64"
    else:
        ok, rule = 16 <= n <= 256 and n % 16 == 0, "a multiple of 16 in [16, 256] for M=128"
    if not ok:
        raise ValueError(f"1CTA TS tcgen05 MMA: instruction N must be {rule}, got {n}")
