"""Turn the IKET event calls of generated CUDA into instrumentation (``inject``).

The source of an instrumented kernel holds calls ``TL_IKET_EVENT(id, "token")``,
``TL_IKET_EVENT_PAYLOAD_U32/F32(id, value, "token")`` and range ends ``TL_IKET_EVENT(31)``.
``inject(source, arch, runtime_payloads=...)``:

- decodes every token (``metadata.decode``; a token outside such a call, a bad token, or one
  event name used with two different schemas in the module is a ``ValueError``), numbers the
  events of the module 1, 2, ... in order of first appearance (31 stays the range end; at most
  30 events per module: the id lives in the low 5 bits of a record) and rewrites each call's id
  and token to match;
- puts ahead of ``#include "tl.h"``: the marker comment ``// __tilelang_iket_tool__``, the IKET
  metadata arrays the runtime looks up by name (``__iket_evt_decl_<name>_<id>_attrs`` per
  event, ``__iket_range_decl_<name>_<range id>_attrs`` per range, ``__iket_meta_info``: the
  runtime's fixed little-endian layouts), and definitions of the three event macros.

An event (a device function behind the macro) is one ``asm volatile`` block with a memory
clobber (so it keeps its place among the kernel's memory accesses): it reads ``%globaltimer_lo``,
puts the event id into the low 5 bits (the IKET record word), takes the payload value as an
operand under runtime payloads, and raises ``pmevent.mask <id>`` (IKET's PMTRIG). It writes no
memory: upstream's macros store the record to a fixed shared-memory address (0x20 of the
block's window) that belongs to no variable of the kernel and is meant for the IKET runtime,
and a shared slot of our own would shift the kernel's dynamic shared memory (whose alignment
TMA relies on). So the code needs no external symbol, no shared memory and no runtime, and is
the same for every architecture.
Without runtime payloads a payload event is a plain event (the value is not evaluated) and its
metadata declares no payload. A source without tokens, or one already instrumented, is
returned as is. Outside a session nothing calls this: ``tl.h`` defines the macros as no-ops then.
"""

from __future__ import annotations

import re
import struct
from dataclasses import replace

from .metadata import MAX_NAME_BYTES, RANGE_END_ID, TOKEN_PREFIX, Event, decode, encode

MARKER = "__tilelang_iket_tool__"
MAX_EVENTS = RANGE_END_ID - 1
_MAGIC = bytes((157, 241, 190, 186))
_EVENT_ATTRS_SIZE = 60
_RANGE_ATTRS_SIZE = 72
_META_SIZE = 48
_INSTRUMENT_NATIVE_DUMP = 3

_TOKEN = re.compile(re.escape(TOKEN_PREFIX) + r"[A-Za-z0-9_-]+")
_CALL = re.compile(r"\b(?P<macro>TL_IKET_EVENT(?:_PAYLOAD_(?:U32|F32))?)\(\s*(?P<id>[0-9]+)"
                   r"(?P<middle>[^\n\"]*?)\"(?P<token>" + re.escape(TOKEN_PREFIX) + r"[A-Za-z0-9_-]+)\"\s*\)")


def number_events(source: str) -> tuple[str, list[Event]]:
    """``source`` with module-wide event ids, and its events in id order."""
    calls = list(_CALL.finditer(source))
    if len(calls) != len(_TOKEN.findall(source)):
        raise ValueError("an IKET event token appears outside a TL_IKET_EVENT call of the generated CUDA")
    events: dict[tuple[str, str], Event] = {}
    renamed: dict[str, Event] = {}
    for call in calls:
        token = call.group("token")
        if token in renamed:
            continue
        event = decode(token)
        key = (event.kind, event.name)
        known = events.get(key)
        if known is None:
            if len(events) == MAX_EVENTS:
                raise ValueError(f"a kernel module can hold at most {MAX_EVENTS} distinct IKET events "
                                 f"(event {event.name!r} is one more)")
            known = events[key] = replace(event, event_id=len(events) + 1)
        elif replace(event, event_id=known.event_id) != known:
            raise ValueError(f"IKET {event.kind} {event.name!r} is used with two schemas in one module "
                             f"({known.payload_type} and {event.payload_type})")
        renamed[token] = known

    def rewrite(call: re.Match) -> str:
        event = renamed[call.group("token")]
        return f'{call.group("macro")}({event.event_id}{call.group("middle")}"{encode(event)}")'

    return _CALL.sub(rewrite, source), sorted(events.values(), key=lambda e: e.event_id)


def _symbol(name: str) -> str:
    safe = re.sub(r"[^0-9A-Za-z_]", "_", name)
    return safe if safe and not safe[0].isdigit() else "_" + safe


def _array(symbol: str, data: bytes) -> str:
    return (f"__device__ __attribute__((used, aligned(1))) unsigned char {symbol}[{len(data)}] = "
            f"{{{', '.join(str(b) for b in data)}}};")


def _event_attrs(event: Event, runtime_payloads: bool) -> bytes:
    name = event.name.encode("utf-8")
    payload = event.payload_iket_id if runtime_payloads else 0
    is_range = 1 if event.kind == "range" else 0
    head = struct.pack("<7I", _EVENT_ATTRS_SIZE, event.event_id, _INSTRUMENT_NATIVE_DUMP, payload, is_range,
                       event.range_id, len(name))
    return head + name.ljust(MAX_NAME_BYTES, b"\0")


def _range_attrs(event: Event) -> bytes:
    name = event.name.encode("utf-8")
    head = struct.pack("<5I12xI", _RANGE_ATTRS_SIZE, 0, event.range_id, 0xFFFFFFFF, 2, len(name))
    return head + name.ljust(_RANGE_ATTRS_SIZE - len(head), b"\0")


def _meta_info(events: list[Event], ranges: int) -> bytes:
    data = struct.pack("<6I4sII", _META_SIZE, 0, len(events) + ranges, RANGE_END_ID, MAX_NAME_BYTES,
                       _EVENT_ATTRS_SIZE, _MAGIC, 0, max(e.event_id for e in events))
    return data.ljust(_META_SIZE, b"\0")


def metadata_block(events: list[Event], runtime_payloads: bool) -> str:
    """The ``extern "C"`` block of IKET metadata arrays for ``events``."""
    lines = ['extern "C" {']
    ranges = []
    for event in events:
        lines.append(_array(f"__iket_evt_decl_{_symbol(event.name)}_{event.event_id}_attrs",
                            _event_attrs(event, runtime_payloads)))
        if event.kind == "range":
            ranges.append(event)
    for event in ranges:
        lines.append(_array(f"__iket_range_decl_{_symbol(event.name)}_{event.range_id}_attrs", _range_attrs(event)))
    lines.append(_array("__iket_meta_info", _meta_info(events, len(ranges))))
    lines.append("}")
    return "\n".join(lines)


_DEVICE = r"""// IKET events: see tilelang/tools/cuda/iket/codegen.py. Registers only, no memory is written.
template <unsigned int kEventId>
static __device__ __forceinline__ void tl_iket_event() {
  asm volatile("{\n\t"
               ".reg .b32 t;\n\t"
               "mov.u32 t, %%globaltimer_lo;\n\t"
               "and.b32 t, t, 0xFFFFFFE0;\n\t"
               "or.b32 t, t, %0;\n\t"
               "pmevent.mask %0;\n\t"
               "}" :: "n"(kEventId) : "memory");
}

template <unsigned int kEventId>
static __device__ __forceinline__ void tl_iket_event_payload(unsigned int value) {
  asm volatile("{\n\t"
               ".reg .b32 t, p;\n\t"
               "mov.u32 t, %%globaltimer_lo;\n\t"
               "and.b32 t, t, 0xFFFFFFE0;\n\t"
               "or.b32 t, t, %1;\n\t"
               "mov.b32 p, %0;\n\t"
               "pmevent.mask %1;\n\t"
               "}" :: "r"(value), "n"(kEventId) : "memory");
}

#define TL_IKET_EVENT(ID, ...) tl_iket_event<ID>()
"""

_PAYLOAD_MACROS = r"""#define TL_IKET_EVENT_PAYLOAD_U32(ID, VALUE, ...) tl_iket_event_payload<ID>((unsigned int)(VALUE))
#define TL_IKET_EVENT_PAYLOAD_F32(ID, VALUE, ...) tl_iket_event_payload<ID>(__float_as_uint((float)(VALUE)))
"""

_NO_PAYLOAD_MACROS = r"""#define TL_IKET_EVENT_PAYLOAD_U32(ID, VALUE, ...) tl_iket_event<ID>()
#define TL_IKET_EVENT_PAYLOAD_F32(ID, VALUE, ...) tl_iket_event<ID>()
"""


def inject(source: str, arch: str | None = None, *, runtime_payloads: bool = False) -> str:
    """``source`` instrumented (see the module docstring); ``arch`` is the target (e.g.
    ``sm_90a``), recorded in the marker comment."""
    if MARKER in source:
        return source
    source, events = number_events(source)
    if not events:
        return source
    prefix = "\n".join([
        f"// {MARKER}",
        f"// IKET instrumentation by tilelang.tools.cuda.iket ({len(events)} events, "
        f"runtime payloads {'on' if runtime_payloads else 'off'}{', ' + arch if arch else ''})",
        metadata_block(events, runtime_payloads),
        _DEVICE + (_PAYLOAD_MACROS if runtime_payloads else _NO_PAYLOAD_MACROS),
    ])
    at = source.find('#include "tl.h"')
    if at < 0:
        at = 0
    return source[:at] + prefix + "\n" + source[at:]


def target_arch(target) -> str | None:
    """The ``sm_XX`` of a ``tvm.target.Target`` (or of its text), or None."""
    arch = None
    attrs = getattr(target, "attrs", None)
    if attrs is not None:
        try:
            arch = attrs.get("arch", None)
        except (AttributeError, TypeError):
            arch = None
    match = re.search(r"sm_[0-9]+[a-z]?", str(arch) if arch is not None else str(target))
    return match.group(0) if match else None
