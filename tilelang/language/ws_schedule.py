"""Upstream's hand-written warp-specialisation schedules (``T.annotate_ws_schedule``): the
description objects, and a clear refusal to compile them.

Contract:
- The description objects build and check themselves as upstream's do: ``T.WSRole(name,
  warps_lo=, warps_hi=, max_nreg=0)`` (warps ``lo .. hi-1``), ``T.WSPipeline(name, buffers,
  depth)``, ``T.WSSync.producer_acquire / producer_commit / consumer_wait /
  consumer_release(pipeline, stage=0)`` (kinds in ``T.WSSyncKind``), ``T.WSOpRef(id)``,
  ``T.WSScope(id, {role: [instr | "op id", ...]})`` (``T.WSScope.ROOT`` names the kernel body;
  strings become ``WSOpRef``) and ``T.WSSchedule(num_warps, roles, pipelines, scopes)``
  (``num_warps`` a positive multiple of 4). Malformed ones raise ``ValueError`` / ``TypeError``.
- ``T.WSID`` is the annotation key naming a tile op or loop (``annotations={T.WSID: "copy_A"}``);
  tile ops and loops accept it and nothing reads it here. ``with T.ws_op(id):`` names the
  statements it encloses; it builds no IR (the names bound inside stay visible after it, as in
  Python).
- ``T.annotate_ws_schedule(schedule)`` fails where it is called (a ``NotImplementedError`` the
  front end locates): this TileLang has no pass materialising such a schedule (upstream's
  ``MaterializeWSSchedule``, written for its sm_100 tcgen05 / tensor-memory kernels). On sm_90a
  write the roles with ``T.ws(...)`` or let ``T.Pipelined`` warp-specialise. While
  ``tilelang.language.tmem.for_checks()`` is active (``tilelang-check``, the language server) it
  records the schedule on the builder's side only and the kernel builds as straight-line code for
  the static checks.
"""

from __future__ import annotations

import contextlib
import enum

WSID = "tl.ws_op_id"
_REFUSAL = ("this TileLang does not materialise hand-written warp-specialisation schedules (upstream's "
            "MaterializeWSSchedule, made for sm_100 tcgen05 / tensor-memory kernels; targets here: sm_80, "
            "sm_90a); on sm_90a write the roles with T.ws(...) or let T.Pipelined warp-specialise the loop")


def _name(value, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise TypeError(f"{what} must be a non-empty string, got {value!r}")
    return value


def _count(value, what: str, least: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ValueError(f"{what} must be an int >= {least}, got {value!r}")
    return value


class WSSyncKind(enum.Enum):
    """Producers wait on the empty barrier (acquire) and signal the full one (commit); consumers
    wait on the full barrier and signal the empty one (release)."""

    PRODUCER_ACQUIRE = "producer_acquire"
    PRODUCER_COMMIT = "producer_commit"
    CONSUMER_WAIT = "consumer_wait"
    CONSUMER_RELEASE = "consumer_release"


class WSRole:
    """A contiguous range of warps (``warps_lo`` .. ``warps_hi - 1``) with one duty; ``max_nreg``
    is its ``setmaxnreg`` budget (0: untouched)."""

    def __init__(self, name: str, *, warps_lo: int, warps_hi: int, max_nreg: int = 0):
        self.name = _name(name, "T.WSRole name")
        self.warps_lo = _count(warps_lo, f"T.WSRole {name!r} warps_lo")
        self.warps_hi = _count(warps_hi, f"T.WSRole {name!r} warps_hi", self.warps_lo + 1)
        self.max_nreg = _count(max_nreg, f"T.WSRole {name!r} max_nreg")

    def __repr__(self):
        return f"WSRole({self.name!r}, warps {self.warps_lo}..{self.warps_hi - 1}, max_nreg={self.max_nreg})"


class WSPipeline:
    """A full/empty barrier pair guarding ``depth`` versions of each of ``buffers``."""

    def __init__(self, name: str, buffers, depth: int):
        self.name = _name(name, "T.WSPipeline name")
        self.buffers = list(buffers)
        if not self.buffers:
            raise ValueError(f"T.WSPipeline {name!r} protects no buffer")
        self.depth = _count(depth, f"T.WSPipeline {name!r} depth", 1)

    def __repr__(self):
        return f"WSPipeline({self.name!r}, {len(self.buffers)} buffer(s), depth={self.depth})"


class WSInstr:
    """One step of a role's program in a scope."""


class WSOpRef(WSInstr):
    """A tile op, a loop or a ``T.ws_op`` block, by its ``T.WSID``."""

    def __init__(self, id: str):  # noqa: A002 - upstream's keyword
        self.id = _name(id, "T.WSOpRef id")

    def __repr__(self):
        return f"WSOpRef({self.id!r})"


class WSSync(WSInstr):
    """A synchronisation point of pipeline ``pipeline`` at iteration offset ``stage``."""

    def __init__(self, kind: WSSyncKind, pipeline: str, stage: int = 0):
        if not isinstance(kind, WSSyncKind):
            raise TypeError(f"T.WSSync kind must be a T.WSSyncKind, got {kind!r}")
        self.kind = kind
        self.pipeline = _name(pipeline, "T.WSSync pipeline")
        self.stage = _count(stage, f"T.WSSync {pipeline!r} stage")

    @classmethod
    def producer_acquire(cls, pipeline: str, stage: int = 0) -> "WSSync":
        return cls(WSSyncKind.PRODUCER_ACQUIRE, pipeline, stage)

    @classmethod
    def producer_commit(cls, pipeline: str, stage: int = 0) -> "WSSync":
        return cls(WSSyncKind.PRODUCER_COMMIT, pipeline, stage)

    @classmethod
    def consumer_wait(cls, pipeline: str, stage: int = 0) -> "WSSync":
        return cls(WSSyncKind.CONSUMER_WAIT, pipeline, stage)

    @classmethod
    def consumer_release(cls, pipeline: str, stage: int = 0) -> "WSSync":
        return cls(WSSyncKind.CONSUMER_RELEASE, pipeline, stage)

    def __repr__(self):
        return f"WSSync.{self.kind.value}({self.pipeline!r}, stage={self.stage})"


class WSScope:
    """A scheduled loop (by its ``T.WSID``; ``WSScope.ROOT``: the kernel body) and the program of
    each role in it; a string entry is a ``WSOpRef``."""

    ROOT = "tl.ws_scope_root"

    def __init__(self, id: str, bodies: dict):  # noqa: A002 - upstream's keyword
        self.id = _name(id, "T.WSScope id")
        if not isinstance(bodies, dict):
            raise TypeError(f"T.WSScope {id!r} bodies must map role names to instruction lists")
        self.bodies = {}
        for role, instrs in bodies.items():
            steps = []
            for step in instrs:
                if isinstance(step, str):
                    step = WSOpRef(step)
                if not isinstance(step, WSInstr):
                    raise TypeError(f"T.WSScope {id!r}, role {role!r}: {step!r} is neither an op id nor a T.WSSync")
                steps.append(step)
            self.bodies[_name(role, f"T.WSScope {id!r} role")] = steps


class WSSchedule:
    """The whole hand-written warp specialisation of one kernel."""

    def __init__(self, num_warps: int, roles, pipelines, scopes):
        self.num_warps = _count(num_warps, "T.WSSchedule num_warps", 1)
        if self.num_warps % 4:
            raise ValueError(f"T.WSSchedule num_warps must be a multiple of 4 (setmaxnreg acts on whole "
                             f"warpgroups), got {num_warps}")
        self.roles, self.pipelines, self.scopes = list(roles), list(pipelines), list(scopes)
        for role in self.roles:
            if not isinstance(role, WSRole):
                raise TypeError(f"T.WSSchedule roles must be T.WSRole, got {role!r}")
            if role.warps_hi > self.num_warps:
                raise ValueError(f"T.WSSchedule: role {role.name!r} ends at warp {role.warps_hi - 1}, past the "
                                 f"{self.num_warps} warps")
        names = {p.name for p in self.pipelines if isinstance(p, WSPipeline)}
        if len(names) != len(self.pipelines):
            raise ValueError("T.WSSchedule pipelines must be T.WSPipeline with distinct names")
        roles = {r.name for r in self.roles}
        for scope in self.scopes:
            if not isinstance(scope, WSScope):
                raise TypeError(f"T.WSSchedule scopes must be T.WSScope, got {scope!r}")
            for role, steps in scope.bodies.items():
                if role not in roles:
                    raise ValueError(f"T.WSScope {scope.id!r} programs role {role!r}, which the schedule lacks")
                for step in steps:
                    if isinstance(step, WSSync) and step.pipeline not in names:
                        raise ValueError(f"T.WSScope {scope.id!r}, role {role!r}: no pipeline {step.pipeline!r}")


def annotate_ws_schedule(schedule):
    """Attach a hand-written warp-specialisation schedule: refused (see the module docstring)."""
    from .tmem import checking

    if not isinstance(schedule, WSSchedule):
        raise TypeError(f"T.annotate_ws_schedule expects a T.WSSchedule, got {type(schedule).__name__}")
    if checking():
        return None
    raise NotImplementedError(f"T.annotate_ws_schedule({schedule.num_warps} warps, roles "
                              f"{', '.join(r.name for r in schedule.roles)}): {_REFUSAL}")


def ws_op(op_id: str):
    """``with T.ws_op(id):`` names the enclosed statements for a schedule; builds nothing."""
    _name(op_id, "T.ws_op id")
    return contextlib.nullcontext()


__all__ = ["WSID", "WSInstr", "WSOpRef", "WSPipeline", "WSRole", "WSSchedule", "WSScope", "WSSync", "WSSyncKind",
           "annotate_ws_schedule", "ws_op"]
