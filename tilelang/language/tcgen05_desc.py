"""sm_100 ``tcgen05.mma`` instruction descriptors: the 32-bit word that tells the tensor core the
operand formats, majorness, negation and the atom shape (PTX ISA, "Instruction descriptor").

``instr_desc(...)`` is the descriptor of ``kind::f16`` / ``kind::f8f6f4`` / ``kind::i8``;
``blockscaled_instr_desc(...)`` that of ``kind::mxf8f6f4.block_scale`` (E8M0 scale factors).
Operand dtypes are anything ``tilelang.language.dtypes.dtype`` accepts; an unsupported one, a bad
shape or a scale other than +-1 raises ValueError naming it.
"""

from __future__ import annotations

from .dtypes import dtype as _dtype


def _field(value: int, start: int, width: int) -> int:
    return (int(value) & ((1 << width) - 1)) << start


def _operand_format(dt, block_scaled: bool) -> int:
    d = _dtype(dt)
    name = str(d)
    if d.is_float4():
        return 5
    table = {"float8_e4m3fn": 0, "float8_e4m3fnuz": 0, "float8_e4m3": 0, "float8_e5m2": 1,
             "float8_e5m2fnuz": 1, "float6_e2m3fn": 3, "float6_e3m2fn": 4}
    if not block_scaled:
        table.update({"float16": 0, "bfloat16": 1, "int8": 1, "uint8": 0})
    if name not in table:
        kind = "block-scaled mxf8f6f4" if block_scaled else "tcgen05.mma"
        raise ValueError(f"{kind} instruction descriptor: unsupported operand dtype {name}")
    return table[name]


def _common(atom_m, atom_n, a_dtype, b_dtype, a_k_major, b_k_major, scale_a, scale_b, block_scaled) -> int:
    if atom_m % 16 or atom_n % 8:
        raise ValueError(f"tcgen05 atom {atom_m}x{atom_n}: M must be a multiple of 16 and N of 8")
    if scale_a not in (1, -1) or scale_b not in (1, -1):
        raise ValueError(f"tcgen05 operand scales must be +1 or -1, got {scale_a}, {scale_b}")
    return (_field(_operand_format(a_dtype, block_scaled), 7, 3)
            | _field(_operand_format(b_dtype, block_scaled), 10, 3)
            | _field(scale_a == -1, 13, 1) | _field(scale_b == -1, 14, 1)
            | _field(not a_k_major, 15, 1) | _field(not b_k_major, 16, 1)
            | _field(atom_n >> 3, 17, 6) | _field(atom_m >> 4, 24, 5))


def instr_desc(atom_m, atom_n, atom_k, a_dtype, b_dtype, c_dtype, a_k_major, b_k_major, scale_a=1, scale_b=1) -> int:
    if atom_k not in (16, 32):
        raise ValueError(f"tcgen05.mma instruction descriptor: atom K must be 16 or 32, got {atom_k}")
    c = str(_dtype(c_dtype))
    if c == "float16":
        c_format = 0
    elif c.startswith(("float", "bfloat")):
        c_format = 1
    elif c == "int32":
        c_format = 2
    else:
        raise ValueError(f"tcgen05.mma instruction descriptor: unsupported accumulator dtype {c}")
    return _field(c_format, 4, 2) | _common(atom_m, atom_n, a_dtype, b_dtype, a_k_major, b_k_major,
                                            scale_a, scale_b, False)


def blockscaled_instr_desc(atom_m, atom_n, a_dtype, b_dtype, a_k_major, b_k_major, scale_a=1, scale_b=1,
                           a_sf_id=0, b_sf_id=0) -> int:
    return (_field(b_sf_id, 4, 2) | _field(1, 23, 1)  # scale factors are E8M0
            | _common(atom_m, atom_n, a_dtype, b_dtype, a_k_major, b_k_major, scale_a, scale_b, True)
            | _field(a_sf_id, 29, 2))
