"""Data types: every spelling a kernel author may use, normalised to TVM dtype strings.

Kernel code passes dtypes as strings (``"float16"``), as TVMScript dtype objects (``T.float16``),
as torch dtypes (``torch.float16``) or as TVM ``DataType``s. The compiler only ever sees the string.
"""

from __future__ import annotations

from typing import Any

_ALIASES = {
    "half": "float16",
    "fp16": "float16",
    "float": "float32",
    "fp32": "float32",
    "double": "float64",
    "bf16": "bfloat16",
    "int": "int32",
    "e4m3_float8": "float8_e4m3fn",
    "e5m2_float8": "float8_e5m2",
    "float8_e4m3": "float8_e4m3fn",
}

_TORCH_NAMES = {
    "float16": "float16",
    "bfloat16": "bfloat16",
    "float32": "float32",
    "float64": "float64",
    "int8": "int8",
    "int16": "int16",
    "int32": "int32",
    "int64": "int64",
    "uint8": "uint8",
    "bool": "bool",
    "float8_e4m3fn": "float8_e4m3fn",
    "float8_e5m2": "float8_e5m2",
}


def normalize_dtype(dtype: Any) -> str:
    """Return the canonical TVM dtype string for any accepted dtype spelling."""
    if isinstance(dtype, str):
        return _ALIASES.get(dtype, dtype)
    inner = getattr(dtype, "_dtype_str", None)  # TVMScript's DtypeConstructor (T.float16)
    if inner is not None:
        return inner
    module = type(dtype).__module__
    if module.startswith("torch"):
        name = str(dtype).split(".")[-1]
        if name in _TORCH_NAMES:
            return _TORCH_NAMES[name]
    if dtype is float:
        return "float32"
    if dtype is int:
        return "int32"
    if dtype is bool:
        return "bool"
    text = str(dtype)
    if text and text.replace("_", "").isalnum():
        return _ALIASES.get(text, text)
    raise TypeError(f"cannot interpret {dtype!r} as a data type")


def bits(dtype: str) -> int:
    """Bit width of one element of ``dtype``."""
    dtype = normalize_dtype(dtype)
    if dtype == "bool":
        return 8
    digits = ""
    for ch in dtype.split("_")[0][::-1]:
        if not ch.isdigit():
            break
        digits = ch + digits
    return int(digits) if digits else 32


def nbytes(dtype: str) -> int:
    """Bytes per element (sub-byte types round up)."""
    return max(1, bits(dtype) // 8)


def is_float(dtype: str) -> bool:
    dtype = normalize_dtype(dtype)
    return dtype.startswith("float") or dtype.startswith("bfloat")
