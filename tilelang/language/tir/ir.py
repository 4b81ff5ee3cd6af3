"""TVM's TIR script builder names (``tvm.script.tirx``: ``serial``, ``Shuffle``, ``call_extern`` ...)
and the TIR expression nodes, re-exported as upstream's ``tilelang.language.tir.ir`` does. The
TileLang forms of the same names (``T.serial``, ``T.cast`` ...) are those of ``tilelang.language``."""

from __future__ import annotations

from tvm import tirx as _tirx
from tvm.script import tirx as _script

_NODES = ("Broadcast", "Cast", "Let", "Ramp", "Select", "Shuffle")

__all__ = sorted({n for n in dir(_script) if not n.startswith("_")} | set(_NODES))

globals().update({n: getattr(_script, n) for n in __all__ if hasattr(_script, n)})
globals().update({n: getattr(_tirx, n) for n in _NODES})


# ``T.cast``'s PTX rounding modifiers: "" is the backend's default conversion.
_VALID_CAST_ROUNDING_MODES = frozenset({"", "rn", "rz", "rp", "rm", "rs"})


def cast(value, dtype, round: str = "", sat: bool = True, rbits=None, span=None):  # noqa: A002
    """``value`` converted to ``dtype`` (a constant for a Python number; ``value`` itself when it
    already has that type).

    ``round`` names a PTX rounding modifier (``"rn"``, ``"rz"``, ``"rp"``, ``"rm"``; ``"rs"``:
    stochastic, with the random bits ``rbits``) and ``sat`` (default True) saturation to the
    finite range. Invalid combinations raise ValueError here, where the kernel spells them, except
    ``round="rs", sat=False``, which the compile rejects ("sat=false is not supported"). The
    CUDA backend lowers every deterministic mode to its default conversion (round to nearest even,
    saturating for fp8). Stochastic rounding converts one float32 at a time with
    ``__tl_cvt_f32x1_to_<type>x1_rs_sat`` (``src/tl/fp8.h``: PTX ``cvt.rs.satfinite``, sm_100a only;
    compiling for another architecture fails with "Stochastic rounding f32-to-... requires sm_100a").
    """
    import builtins

    from tvm import tirx

    from ..dtypes import normalize_dtype

    if round not in _VALID_CAST_ROUNDING_MODES:
        raise ValueError(f"Invalid round {round!r}: T.cast accepts one of {sorted(_VALID_CAST_ROUNDING_MODES)}")
    if not isinstance(sat, builtins.bool):
        raise ValueError(f"Invalid sat {sat!r}: T.cast needs a bool (True: saturate to the finite range)")
    if round == "rs" and rbits is None:
        raise ValueError("T.cast(round='rs'): rbits is required (the random bits of stochastic rounding)")
    if round != "rs" and rbits is not None:
        raise ValueError(f"T.cast(round={round!r}): rbits is only valid with round='rs' (stochastic rounding)")
    dtype = normalize_dtype(dtype)
    if round == "rs":
        return _stochastic_cast(value, dtype, sat, rbits)
    if isinstance(value, (builtins.bool, builtins.int, builtins.float)):
        return tirx.const(value, dtype)
    current = str(getattr(value.ty, "dtype", value.ty))
    return tirx.Cast(dtype, value) if current != dtype else value


# Stochastic-rounding targets -> the name part of their ``__tl_cvt_f32x1_to_<tag>x1_rs_sat`` helper.
_RS_TAGS = {"float16": "f16", "bfloat16": "bf16", "float8_e4m3fn": "e4m3", "float8_e5m2": "e5m2",
            "float4_e2m1fn": "e2m1"}


def _stochastic_cast(value, dtype: str, sat, rbits):
    import builtins

    from tvm import tirx

    if dtype not in _RS_TAGS:
        raise ValueError(f"T.cast(round='rs'): stochastic rounding converts float32 to one of "
                         f"{sorted(_RS_TAGS)}, not to {dtype}")
    if isinstance(value, (builtins.bool, builtins.int, builtins.float)):
        value = tirx.const(builtins.float(value), "float32")
    elif str(value.ty.dtype) != "float32":
        value = tirx.Cast("float32", value)
    if isinstance(rbits, builtins.int):
        rbits = tirx.const(rbits, "uint32")
    # sat=False has no instruction (cvt.rs always saturates): its call names no helper and the
    # compile rejects it where it is used (RS_NOSAT_SUFFIX, tilelang/engine/lower.py)
    suffix = "rs_sat" if sat else RS_NOSAT_SUFFIX
    return tirx.call_pure_extern(dtype, f"__tl_cvt_f32x1_to_{_RS_TAGS[dtype]}x1_{suffix}", value, rbits)


RS_NOSAT_SUFFIX = "rs_nosat"
