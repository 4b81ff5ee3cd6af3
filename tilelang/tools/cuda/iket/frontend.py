"""Kernel-side IKET calls: ``mark``, ``range`` (and ``range_push``/``range_pop``), ``payload``.

Inside a ``T.Kernel`` body each call becomes one statement ``T.evaluate(T.call_extern("void",
EXTERN, id, [value,] token))``: ``TL_IKET_EVENT`` for an event without a value, and
``TL_IKET_EVENT_PAYLOAD_U32``/``_F32`` for an int32/uint32 or a float32 payload; a range end is
``TL_IKET_EVENT(31)`` (no token). The token (``metadata.encode``) carries the event's name, kind,
range id and payload type, so the TIR alone is enough to instrument the kernel later
(``codegen``); the process-wide registry here only hands out ids and rejects a name reused with
another payload type (``ValueError``). ``mark``/``range_push``/``range_pop`` return the call
(a bare call statement in a kernel body emits it); ``range(...)`` is a context manager that emits
the start on entry and the end on exit (also as an item of ``with T.Kernel(...) as bx,
iket.range("x"):``). Errors: a name over 32 UTF-8 bytes or empty (``ValueError``), a payload
dtype other than int32/uint32/float32 (``ValueError``; ``TypeError`` when it cannot be inferred),
an event outside a kernel body or a range end without a start (``RuntimeError``).
"""

from __future__ import annotations

import threading
import zlib
from dataclasses import dataclass
from typing import Any

import tvm
from tvm import tirx

from tilelang.tir_utils import dtype_of

from .metadata import PAYLOAD_TYPES, RANGE_END_ID, Event, check_name, encode

EVENT_EXTERN = "TL_IKET_EVENT"
PAYLOAD_U32_EXTERN = "TL_IKET_EVENT_PAYLOAD_U32"
PAYLOAD_F32_EXTERN = "TL_IKET_EVENT_PAYLOAD_F32"
SUPPORTED_PAYLOADS = ("int32", "uint32", "float32")
_ALIASES = {"int": "int32", "uint": "uint32", "float": "float32"}


@dataclass(frozen=True)
class PayloadSpec:
    """A 32-bit scalar value recorded with an event: ``expr`` (a TIR expression or a Python
    number) and its IKET ``dtype`` (int32, uint32 or float32)."""

    expr: Any
    dtype: str

    @property
    def iket_id(self) -> int:
        return PAYLOAD_TYPES[self.dtype]


_lock = threading.RLock()
_events: dict[tuple[str, str], Event] = {}
_next_id = [1]
_local = threading.local()
_payloads = [False]   # the runtime payload mode (the session module switches it)


def enable_runtime_payloads() -> None:
    """Record payload values in kernels compiled from now on."""
    with _lock:
        _payloads[0] = True


def disable_runtime_payloads() -> None:
    """Compile payload events as plain events (their metadata declares no payload)."""
    with _lock:
        _payloads[0] = False


def runtime_payloads_enabled() -> bool:
    with _lock:
        return _payloads[0]


def _open_ranges() -> list[str]:
    if not hasattr(_local, "ranges"):
        _local.ranges = []
    return _local.ranges


def reset() -> None:
    """Forget the registered events (ids restart at 1 for kernels built afterwards). Kernels
    already built keep their events: the metadata lives in their TIR."""
    with _lock:
        _events.clear()
        _next_id[0] = 1
    _open_ranges().clear()


def event_table() -> list[dict]:
    """The events registered since the last reset, by id: name, event_id, kind, range_id,
    payload_type, payload_iket_id and runtime_payload_iket_id (the payload type id that an
    instrumented compile would emit now: 0 unless runtime payloads are enabled)."""
    runtime = runtime_payloads_enabled()
    with _lock:
        events = sorted(_events.values(), key=lambda e: e.event_id)
    return [{"name": e.name, "event_id": e.event_id, "kind": e.kind, "range_id": e.range_id,
             "payload_type": e.payload_type, "payload_iket_id": e.payload_iket_id,
             "runtime_payload_iket_id": e.payload_iket_id if runtime else 0} for e in events]


# ------------------------------------------------------------------------------------ payloads
def _normalize_dtype(dtype) -> str:
    if isinstance(dtype, str):
        name = _ALIASES.get(dtype.strip().lower(), dtype.strip().lower())
    else:
        try:
            from tilelang.language.dtypes import normalize_dtype

            name = str(normalize_dtype(dtype))
        except Exception:  # noqa: BLE001 - reported below as an unsupported dtype
            name = str(dtype)
    if name not in SUPPORTED_PAYLOADS:
        raise ValueError(f"unsupported IKET payload dtype {name!r}: IKET records one 32-bit scalar, "
                         f"use one of {', '.join(SUPPORTED_PAYLOADS)}")
    return name


def _infer_dtype(expr) -> str:
    if isinstance(expr, bool):
        return "uint32"
    if isinstance(expr, int):
        return "int32"
    if isinstance(expr, float):
        return "float32"
    if tvm.ir.is_prim_expr(expr):
        return dtype_of(expr)
    dtype = getattr(expr, "dtype", None)
    if dtype is None:
        raise TypeError(f"cannot infer an IKET payload dtype for {type(expr).__name__} {expr!r}: "
                        f"write iket.payload(value, dtype=...) with one of {', '.join(SUPPORTED_PAYLOADS)}")
    return str(dtype)


def payload(expr: Any, dtype=None) -> PayloadSpec:
    """Describe the value ``expr`` recorded with an event, as ``dtype`` (int32, uint32 or float32;
    inferred from ``expr`` when omitted). A TIR value of another dtype is converted."""
    return PayloadSpec(expr=expr, dtype=_normalize_dtype(dtype if dtype is not None else _infer_dtype(expr)))


def _as_payload(value) -> PayloadSpec | None:
    if value is None or isinstance(value, PayloadSpec):
        return value
    return payload(value)


def _payload_value(spec: PayloadSpec):
    expr = spec.expr
    if isinstance(expr, (bool, int, float)):
        return tirx.const(int(expr) if spec.dtype != "float32" else float(expr), spec.dtype)
    if not tvm.ir.is_prim_expr(expr):
        raise TypeError(f"an IKET payload must be a scalar expression or a Python number, got "
                        f"{type(expr).__name__}")
    if dtype_of(expr) != spec.dtype:
        expr = tirx.Cast(spec.dtype, expr)
    return expr


# -------------------------------------------------------------------------------------- events
def _require_kernel(api: str) -> None:
    from tvm.script.ir_builder import IRBuilder

    from tilelang.language.kernel import current_kernel

    if not IRBuilder.is_in_scope() or current_kernel() is None:
        raise RuntimeError(f"iket.{api}() records a device event: call it inside a T.Kernel body of a "
                           "@T.prim_func (it emits a kernel statement)")


def _register(name: str, kind: str, spec: PayloadSpec | None) -> Event:
    payload_type = spec.dtype if spec is not None else "NoPayload"
    with _lock:
        known = _events.get((kind, name))
        if known is not None:
            if known.payload_type != payload_type:
                raise ValueError(f"IKET {kind} {name!r} was registered with payload type "
                                 f"{known.payload_type!r} and is now used with {payload_type!r}; "
                                 "an event keeps one payload type")
            return known
        if _next_id[0] == RANGE_END_ID:
            _next_id[0] += 1
        event = Event(name=name, event_id=_next_id[0], kind=kind,
                      range_id=(zlib.crc32(name.encode("utf-8")) or 1) if kind == "range" else 0,
                      payload_type=payload_type)
        _next_id[0] += 1
        _events[(kind, name)] = event
        return event


def _event(api: str, name, kind: str, value):
    check_name(name)
    spec = _as_payload(value)
    _require_kernel(api)
    event = _register(name, kind, spec)
    token = encode(event)
    if spec is None:
        return tirx.call_extern("void", EVENT_EXTERN, event.event_id, token)
    extern = PAYLOAD_F32_EXTERN if spec.dtype == "float32" else PAYLOAD_U32_EXTERN
    return tirx.call_extern("void", extern, event.event_id, _payload_value(spec), token)


def mark(name: str, payload: Any = None):
    """An instant event ``name`` here (with an optional 32-bit ``payload``)."""
    return _event("mark", name, "mark", payload)


def range_push(name: str, payload: Any = None):
    """Start the range ``name`` here (a range start may carry a payload; its end may not)."""
    call = _event("range_push", name, "range", payload)
    _open_ranges().append(name)
    return call


def range_pop(name: str | None = None):
    """End the innermost open range (``name``, when given, must be that range's)."""
    _require_kernel("range_pop")
    stack = _open_ranges()
    if not stack:
        raise RuntimeError("iket.range_pop() without an open iket.range_push()")
    if name is not None and name != stack[-1]:
        raise RuntimeError(f"iket.range_pop({name!r}) does not match the innermost open range {stack[-1]!r}")
    stack.pop()
    return tirx.call_extern("void", EVENT_EXTERN, RANGE_END_ID)


def range_start(name: str, payload: Any = None):
    """Alias of :func:`range_push`."""
    return range_push(name, payload=payload)


def range_end(name: str | None = None):
    """Alias of :func:`range_pop`."""
    return range_pop(name)


class _Range:
    """``with iket.range(name):`` - the range start on entry, its end on exit."""

    def __init__(self, name: str, payload: Any = None):
        self.name = check_name(name)
        self.payload = _as_payload(payload)

    def __enter__(self):
        from tvm.tirx.script.builder import evaluate

        evaluate(range_push(self.name, payload=self.payload))
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:   # the body failed: leave the range stack as it was
            stack = _open_ranges()
            if stack and stack[-1] == self.name:
                stack.pop()
            return False
        from tvm.tirx.script.builder import evaluate

        evaluate(range_pop(self.name))
        return False


def range(name: str, payload: Any = None) -> _Range:  # noqa: A001 - upstream's name
    """A range event around a ``with`` block of a kernel body."""
    return _Range(name, payload=payload)
