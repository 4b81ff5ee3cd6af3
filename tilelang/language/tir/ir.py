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
