"""The IKET event record that travels through TIR inside an event call.

Each ``iket.mark``/``iket.range`` call carries one token, a string argument of its extern call:
``TOKEN_PREFIX`` followed by the unpadded url-safe base64 of a compact JSON object with the keys
``v`` (format version), ``name``, ``kind`` (``mark``/``range``), ``id`` (the event id given by the
front end; code generation renumbers per module), ``range`` (a range's id, 0 for a mark) and
``payload`` (``NoPayload``, ``int32``, ``uint32`` or ``float32``). The token is the single source
of truth for the event's metadata: a PrimFunc built before a session still carries it, and two
kernels that differ only in event names differ in their TIR (hence in their cache key).
``decode`` validates a token and raises ``ValueError`` with the reason otherwise.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass

TOKEN_PREFIX = "__tl_iket_v1_"
MAX_NAME_BYTES = 32           # IKET's fixed name field
RANGE_END_ID = 31             # the event id of every range end (IKET's convention)
KINDS = ("mark", "range")
PAYLOAD_TYPES = {"NoPayload": 0, "int32": 5, "uint32": 6, "float32": 13}   # IKET's payload type ids
_VERSION = 1


@dataclass(frozen=True)
class Event:
    """One IKET event of a kernel."""

    name: str
    event_id: int
    kind: str
    range_id: int = 0
    payload_type: str = "NoPayload"

    @property
    def payload_iket_id(self) -> int:
        return PAYLOAD_TYPES[self.payload_type]


def check_name(name) -> str:
    """``name`` if it is a usable event name (a non-empty str of at most 32 UTF-8 bytes)."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"an IKET event name must be a non-empty str, got {name!r}")
    size = len(name.encode("utf-8"))
    if size > MAX_NAME_BYTES:
        raise ValueError(f"IKET event name {name!r} is {size} UTF-8 bytes; names must be at most "
                         f"{MAX_NAME_BYTES} UTF-8 bytes")
    return name


def encode(event: Event) -> str:
    """The token of ``event`` (safe inside a C string literal and a C identifier)."""
    record = {"v": _VERSION, "name": event.name, "kind": event.kind, "id": event.event_id,
              "range": event.range_id, "payload": event.payload_type}
    raw = json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return TOKEN_PREFIX + base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode(token: str) -> Event:
    """The event a token describes; ``ValueError`` naming what is wrong with a bad token."""
    if not isinstance(token, str) or not token.startswith(TOKEN_PREFIX):
        raise ValueError(f"not an IKET event token: {token!r}")
    body = token[len(TOKEN_PREFIX):]
    try:
        record = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"corrupt IKET event token {token[:40]!r}...: {exc}") from None
    if not isinstance(record, dict) or record.get("v") != _VERSION:
        raise ValueError(f"IKET event token of an unknown format version: {token[:40]!r}...")
    if set(record) != {"v", "name", "kind", "id", "range", "payload"}:
        raise ValueError(f"IKET event token with unexpected fields {sorted(record)}")
    name = check_name(record["name"])
    if record["kind"] not in KINDS:
        raise ValueError(f"IKET event {name!r} has unknown kind {record['kind']!r}")
    for key in ("id", "range"):
        value = record[key]
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"IKET event {name!r} has a bad {key} field {value!r}")
    if record["id"] in (0, RANGE_END_ID):
        raise ValueError(f"IKET event {name!r} has the reserved id {record['id']}")
    if record["payload"] not in PAYLOAD_TYPES:
        raise ValueError(f"IKET event {name!r} has unsupported payload type {record['payload']!r}")
    return Event(name=name, event_id=record["id"], kind=record["kind"], range_id=record["range"],
                 payload_type=record["payload"])
