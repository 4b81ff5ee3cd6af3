"""Loop constructs: ``T.Parallel``, ``T.Pipelined``, ``T.serial``, ``T.unroll``, ``T.vectorized``.

``T.Parallel(M, N)`` produces one TVM ``parallel`` For per extent (the front end's For visitor
enters them together) annotated with ``tl.parallel``; layout inference later maps the iterations
onto threads. ``T.Pipelined(n, num_stages=k)`` is a serial loop annotated with
``tl.num_stages``; the pipelining pass turns it into a multi-stage asynchronous pipeline.
"""

from __future__ import annotations

from tvm.tirx.script.builder import ir as builder

from ._ops import as_expr

PARALLEL_ATTR = "tl.parallel"
STAGES_ATTR = "tl.num_stages"
ORDER_ATTR = "tl.pipeline_order"
LOOP_LAYOUT_ATTR = "tl.loop_layout"
STAGE_ATTR = "tl.pipeline_stage"


class Parallel:
    """``for i, j in T.Parallel(M, N):`` - an n-d loop whose iterations are spread over threads.

    A loop spec for the front end: ``tl_loop_spec`` marks it, ``loop_frames()`` gives the frames
    that one ``for`` statement enters together."""

    tl_loop_spec = True

    def __init__(self, *extents, coalesced_width=None, loop_layout=None, annotations=None, prefer_async=None):
        # ``annotations``: upstream's pass hints (``T.WSID``...), with no meaning here;
        # ``prefer_async`` (upstream's cp.async hint for the copies in the loop): the compiler
        # decides that itself (a global -> shared loop in a pipelined loop is issued as cp.async)
        if len(extents) == 1 and isinstance(extents[0], (list, tuple)):
            extents = tuple(extents[0])
        if not extents:
            raise ValueError("T.Parallel needs at least one extent")
        self.extents = [as_expr(e) for e in extents]
        self.coalesced_width = coalesced_width
        if loop_layout is not None and getattr(loop_layout, "kind", None) != "fragment":
            raise TypeError(f"T.Parallel loop_layout must be a T.Fragment, got {type(loop_layout).__name__}")
        self.loop_layout = loop_layout

    def loop_frames(self):
        out = []
        for depth, extent in enumerate(self.extents):
            ann = {PARALLEL_ATTR: len(self.extents) - depth}
            if self.coalesced_width is not None and depth == 0:
                ann["tl.coalesced_width"] = int(self.coalesced_width)
            if self.loop_layout is not None and depth == 0:
                # which thread runs each iteration (layout inference checks it against the
                # fragments the body touches; tilelang.transform.layout_inference)
                ann[LOOP_LAYOUT_ATTR] = self.loop_layout.encode()
            out.append(builder.parallel(0, extent, annotations=ann))
        return out


def Pipelined(start, stop=None, num_stages=0, order=None, stage=None, sync=None, group=None, annotations=None):
    """A serial loop whose copies and computations the compiler overlaps in ``num_stages`` stages
    (fewer where a constant trip count runs fewer iterations: ``_stages_for_trip_count``).
    ``annotations`` are upstream's pass hints (``T.WSID``...), with no meaning here."""
    if stop is None:
        start, stop = 0, start
    # bounds of a 64-bit integer type (``T.Pipelined(seq_end - seq_start)`` of int64 offsets:
    # TileOPs' prefill kernels) give an int32 loop: its trip count is a number of tiles
    start, stop = _narrow(start), _narrow(stop)
    num_stages = int(num_stages)
    if order is None and stage is None:
        num_stages = _stages_for_trip_count(start, stop, num_stages)
    ann = {STAGES_ATTR: num_stages}
    if order is not None:
        ann[ORDER_ATTR] = [int(x) for x in order]
    if stage is not None:
        ann[STAGE_ATTR] = [int(x) for x in stage]
    return builder.serial(start, stop, annotations=ann)


def _narrow(bound):
    from tvm import tirx

    if hasattr(bound, "ty") and str(getattr(bound.ty, "dtype", "")) == "int64":
        return tirx.Cast("int32", bound)
    return bound


def _stages_for_trip_count(start, stop, num_stages: int) -> int:
    """At most as many stages as a constant trip count runs iterations (never fewer than 2 where
    2 or more were asked): a buffer for an iteration that never comes only costs shared memory
    (an autotune config at a small size would otherwise stop at the budget, TL0501)."""
    if num_stages <= 2:
        return num_stages
    from tvm import arith, tirx

    trip = arith.Analyzer().simplify(as_expr(stop) - as_expr(start))
    if isinstance(trip, tirx.IntImm) and int(trip) < num_stages:
        return max(int(trip), 2)
    return num_stages


def serial(start, stop=None, step=None, annotations=None):
    """A sequential loop. A step other than a literal 1 gives a loop spec that runs
    ``ceildiv(stop - start, step)`` iterations and binds the loop name to ``start + k * step``
    (a negative constant step counts down)."""
    if stop is None:
        start, stop = 0, start
    if step is None or _is_one(step):
        return builder.serial(start, stop, annotations=annotations)
    return _SteppedSerial(start, stop, step, annotations)


def _is_one(value) -> bool:
    from tvm import tirx

    return (isinstance(value, int) and value == 1) or (isinstance(value, tirx.IntImm) and int(value) == 1)


class _SteppedSerial:
    """``T.serial(start, stop, step)`` with a step other than 1 (a loop spec for the front end)."""

    tl_loop_spec = True

    def __init__(self, start, stop, step, annotations=None):
        if isinstance(step, int) and step == 0:
            raise ValueError("T.serial step must not be zero")
        self.start, self.stop, self.step, self.annotations = start, stop, step, annotations

    def trip_count(self):
        from .math import ceildiv

        if isinstance(self.step, int) and self.step < 0:
            return ceildiv(self.start - self.stop, -self.step)
        return ceildiv(self.stop - self.start, self.step)

    def loop_frames(self):
        return [builder.serial(0, self.trip_count(), annotations=self.annotations)]

    def loop_values(self, loop_vars):
        return self.start + loop_vars[0] * self.step


def unroll(start, stop=None, step=None, explicit=False, unroll_factor=None, annotations=None):
    """A loop nvcc unrolls: kept as a loop under ``#pragma unroll`` (``#pragma unroll k`` with
    ``unroll_factor=k``), as upstream emits it; ``explicit=True`` unrolls it in the IR instead
    (constant bounds). ``step`` works as in ``T.serial``."""
    if stop is None:
        start, stop = 0, start
    if explicit and unroll_factor is None and (step is None or _is_one(step)):
        return builder.unroll(start, stop, annotations=annotations)
    ann = dict(annotations or {})
    ann["pragma_unroll"] = int(unroll_factor) if unroll_factor is not None else True
    return serial(start, stop, step, annotations=ann)


def parallel(start, stop=None, annotations=None):
    """Upstream's lowercase ``T.parallel(n)`` (TIR's parallel loop): one dimension of
    ``T.Parallel``, spread over the block's threads the same way."""
    if stop is None:
        start, stop = 0, start
    ann = dict(annotations or {})
    ann.setdefault(PARALLEL_ATTR, 1)
    return builder.parallel(start, stop, annotations=ann)


def vectorized(start, stop=None, annotations=None):
    """A loop that becomes vector instructions. ``T.vectorized(a, b)`` runs ``b - a`` lanes and
    binds the loop name to ``a + lane`` (TVM's vectorizer takes only loops that start at 0)."""
    if stop is None:
        start, stop = 0, start
    if isinstance(start, int) and start == 0 or getattr(start, "value", None) == 0:
        return builder.vectorized(0, stop, annotations=annotations)
    return _OffsetLoop(builder.vectorized, start, stop, annotations)


class _OffsetLoop:
    """A loop from ``start`` built as one from 0 whose name stands for ``start + k`` (a loop spec)."""

    tl_loop_spec = True

    def __init__(self, make, start, stop, annotations=None):
        self.make, self.start, self.stop, self.annotations = make, start, stop, annotations

    def loop_frames(self):
        return [self.make(0, self.stop - self.start, annotations=self.annotations)]

    def loop_values(self, loop_vars):
        return self.start + loop_vars[0]


Vectorized = vectorized
# Upstream's upper-case aliases (tile-level loops): T.Serial is T.serial, T.Unroll is T.unroll.
Serial = serial
Unroll = unroll


def grid(*extents):
    return builder.grid(*extents)
