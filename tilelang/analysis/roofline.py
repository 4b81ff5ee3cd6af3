"""The roofline model of a kernel: what it computes and moves per launch, and the time that implies.

One home for the counting: ``tilelang.tools.Analyzer`` (upstream's API), the kernel hover
(``analysis.summary``) and the Run lens (``tilelang_lsp.worker_tools``) all read ``count``.

``count(funcs, gemm_plans=None) -> Counts`` walks parsed kernels (before lowering):

- FLOPs: every ``T.gemm`` counts 2*M*N*K (times its batch extent) per execution, by operand dtype;
  ``T.gemm_sp`` its dense-equivalent 2*M*N*K under ``"<dtype> (2:4 sparse)"`` (estimated at twice
  the dense peak). Elementwise arithmetic is not counted (CUDA cores, not the tensor cores'
  roofline), nor raw PTX intrinsics (``T.ptx_mma``, ``T.ptx_cp_async``: per-thread code).
- Global bytes (``global_bytes``): every tile op's operand region in global memory (``T.copy``,
  ``T.atomic_*``, ``T.fill``...) counts its elements once per direction (an atomic reads and
  writes), ``T.im2col`` its column tile; element loads and stores of global tensors (``B[i, j] =
  A[i, j] * 2`` in a ``T.Parallel``) count per execution. This is what the blocks request (L2
  traffic), upstream's ``total_global_bytes``.
- DRAM bytes (``dram_bytes``): per tensor and direction, the requested bytes capped at the
  tensor's size: each element crosses DRAM at most once per direction, re-reads of tiles by
  other blocks are served by the L2 (the classic roofline's compulsory traffic).
- Shared bytes (``shared_bytes``): tile-op regions and element accesses of shared buffers, and
  the ``T.gemm`` operand reads from shared memory: each warp (mma.sync) reads its rows of A and
  columns of B per call, so A is read ``warp_n`` times and B ``warp_m`` times (wgmma: B once per
  warpgroup along M, A once per warpgroup along N). Known only with ``gemm_plans`` (layout
  inference's ``GemmPlan`` per gemm statement); else None and ``shared_why`` says why.
- Executions: the product of the enclosing loops' trip counts and of the grid. A loop whose
  variable steers an inner trip count (``128 // (1 << i + 1)``, directly or through ``Bind``-ed
  names) is walked once per value; an inner trip count that depends on block indices (causal
  attention: ``T.min(n, bx + 1)``) counts its mean over the grid (exact: the sum; one such loop
  per nest). Both branches of a conditional count. Another symbolic trip count or extent (a
  tensor's value, a dynamic shape), or a ``while`` loop, is a ``ValueError`` naming it and its
  line (the estimate needs static shapes).

``estimate(counts, bandwidth_gbps, peak)`` -> ``Estimate``: memory time = DRAM bytes over the
bandwidth, compute time = FLOPs over the dense tensor-core peak of their dtype (``peak(dtype)`` in
TFLOP/s, None when unknown); the estimate is the larger and ``bound`` names it.
``on_arch(counts, arch, device_name=None)`` estimates with ``tilelang.targets.gpu_spec`` facts
(the architecture's data-centre part, or the product ``device_name`` names) and returns a JSON-able
dict (the hover's and Run lens's form). ``percent_of_roofline(estimate_s, measured_s)`` is the
speed a measured time reaches against it (100 % = at the roofline).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from fractions import Fraction

from tvm import ir, tirx

from tilelang import targets
from tilelang.language._ops import is_tl_call
from tilelang.language.dtypes import bits
from tilelang.tir_utils import children, const_int, eval_int, has_load, span_line, substitute, uses_vars, walk_stmts
from tilelang.transform.kernel import decode_region, scope_of

BLOCK_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z")
READ, WRITE = 1, 2
_SHARED = ("shared", "shared.dyn")
MAX_SPECIALISED = 256               # trip count up to which a loop steering inner trip counts is walked per value
SPARSE = " (2:4 sparse)"            # flops_by_dtype key suffix of T.gemm_sp: twice the dense peak
MAX_GRID_EVALUATIONS = 4096         # block-index combinations a block-dependent trip count is averaged over


def element_bytes(dtype: str, count: int) -> int:
    return -(-count * bits(str(dtype)) // 8)


@dataclass
class Counts:
    """Per-launch totals of the kernels counted (see the module docstring)."""

    flops: int = 0
    flops_by_dtype: dict = field(default_factory=dict)
    global_bytes: int = 0
    dram_bytes: int = 0
    shared_bytes: int | None = 0
    shared_why: str | None = None
    block_counts: dict = field(default_factory=dict)   # the last function's grid, by tag

    @classmethod
    def from_dict(cls, d: dict) -> "Counts":
        """The counts of an ``as_dict`` (or ``on_arch``) dict."""
        return cls(flops=d["flops"], flops_by_dtype=dict(d["flops_by_dtype"]), global_bytes=d["global_bytes"],
                   dram_bytes=d["dram_bytes"], shared_bytes=d.get("shared_bytes"), shared_why=d.get("shared_why"))

    def as_dict(self) -> dict:
        return {"flops": self.flops, "flops_by_dtype": dict(self.flops_by_dtype),
                "global_bytes": self.global_bytes, "dram_bytes": self.dram_bytes,
                "shared_bytes": self.shared_bytes, "shared_why": self.shared_why}


@dataclass(frozen=True)
class Estimate:
    time_s: float
    memory_s: float
    compute_s: float | None       # None: no peak known for a gemm dtype
    bound: str                    # "memory" or "compute"
    intensity: float              # FLOPs per DRAM byte
    peak_tflops: float | None     # the FLOP-weighted peak of the kernel's gemm dtypes
    bandwidth_gbps: float


def count(funcs, gemm_plans: dict | None = None) -> Counts:
    """Count the kernels ``funcs`` (PrimFuncs) launch, per launch of all of them."""
    walk = _Walk(gemm_plans)
    for func in funcs:
        walk.block_counts = {tag: 1 for tag in BLOCK_TAGS}
        walk.block_vars, walk.loop_vars, walk.binds, walk.fixed = {}, {}, {}, {}
        walk.visit(func.body, 1)
    c = walk.counts
    c.block_counts = dict(walk.block_counts)
    for key in walk.reads.keys() | walk.writes.keys():
        size = walk.sizes.get(key)
        for req in (walk.reads.get(key, 0), walk.writes.get(key, 0)):
            c.dram_bytes += min(req, size) if size is not None else req
    # executions averaged over the grid are Fractions until here; the totals are whole numbers
    c.flops, c.global_bytes, c.dram_bytes = round(c.flops), round(c.global_bytes), round(c.dram_bytes)
    c.flops_by_dtype = {k: round(v) for k, v in c.flops_by_dtype.items()}
    c.shared_bytes = round(c.shared_bytes) if c.shared_bytes is not None else None
    return c


class _Walk:
    def __init__(self, gemm_plans):
        self.plans = gemm_plans
        self.counts = Counts()
        self.block_counts = {tag: 1 for tag in BLOCK_TAGS}
        self.block_vars = {}       # Var -> extent of the grid dimensions entered
        self.loop_vars = {}        # Var -> (min, extent) of the enclosing constant loops
        self.binds = {}            # Var -> value of the Bind statements seen
        self.fixed = {}            # Var -> value of the enclosing loops walked once per value
        self.averaged = False      # inside a loop whose trip count was averaged over the grid
        self.reads, self.writes, self.sizes = {}, {}, {}

    # ----- bookkeeping ----------------------------------------------------------------------------
    def _global(self, buf, nbytes: int, access: int) -> None:
        self.counts.global_bytes += nbytes * (bool(access & READ) + bool(access & WRITE))
        key = buf.data
        if key not in self.sizes:
            shape = [const_int(s) for s in buf.shape]
            self.sizes[key] = element_bytes(buf.dtype, math.prod(shape)) if None not in shape else None
        for flag, table in ((READ, self.reads), (WRITE, self.writes)):
            if access & flag:
                table[key] = table.get(key, 0) + nbytes

    def _shared(self, nbytes: int) -> None:
        if self.counts.shared_bytes is not None:
            self.counts.shared_bytes += nbytes

    def _no_shared(self, why: str) -> None:
        if self.counts.shared_bytes is not None:
            self.counts.shared_bytes, self.counts.shared_why = None, why

    def _constant(self, expr, what: str, node) -> int:
        value = const_int(expr)
        if value is None:
            why = ("it depends on values read from a tensor" if has_load(expr) else "the estimate needs static shapes")
            raise ValueError(f"{what} is {expr}, not a constant (line {span_line(getattr(node, 'span', None))}): {why}")
        return value

    # ----- the walk -------------------------------------------------------------------------------
    def visit(self, stmt, times: int) -> None:
        if stmt is None:
            return
        if isinstance(stmt, tirx.AttrStmt) and stmt.attr_key == "thread_extent":
            tag = str(stmt.node.thread_tag)
            if tag.startswith("blockIdx"):
                extent = self._constant(stmt.value, f"the grid dimension {tag}", stmt)
                self.block_counts[tag] = extent
                self.block_vars[stmt.node.var] = extent
                times *= extent
            self.visit(stmt.body, times)
            return
        if isinstance(stmt, tirx.For):
            what = f"the trip count of loop '{stmt.loop_var.name}'"
            extent = const_int(stmt.extent)
            if extent is not None:
                start = const_int(stmt.min)
                if start is not None and extent <= MAX_SPECIALISED and self._steers_inner_loops(stmt):
                    for value in range(start, start + extent):     # the body once per value: exact
                        self.fixed[stmt.loop_var] = value
                        try:
                            self.visit(stmt.body, times)
                        finally:
                            self.fixed.pop(stmt.loop_var, None)
                    return
                if start is not None:
                    self.loop_vars[stmt.loop_var] = (start, extent)
                try:
                    self.visit(stmt.body, times * extent)
                finally:
                    self.loop_vars.pop(stmt.loop_var, None)
                return
            resolved = self._resolve(stmt.extent)
            fixed = {v: x for v, x in self.fixed.items() if uses_vars(resolved, [v])}
            if fixed and const_int(substitute(resolved, fixed)) is not None:
                self.visit(stmt.body, times * const_int(substitute(resolved, fixed)))
                return
            mean = self._mean(resolved)
            if mean is None:
                self._constant(resolved, what, stmt)      # raises, naming the resolved extent
            if self.averaged:
                raise ValueError(f"{what} is {resolved} (line {span_line(getattr(stmt, 'span', None))}), inside "
                                 "another loop whose trip count varies: not estimated")
            self.averaged = True
            try:
                self.visit(stmt.body, times * mean)
            finally:
                self.averaged = False
            return
        if isinstance(stmt, tirx.While):
            raise ValueError(f"a while loop (line {span_line(getattr(stmt, 'span', None))}) has no static "
                             "trip count")
        if isinstance(stmt, tirx.Evaluate):
            if is_tl_call(stmt.value):
                self._tile_op(stmt, times)
            else:
                self._loads(stmt.value, times)
        elif isinstance(stmt, tirx.BufferStore):
            scope = scope_of(stmt.buffer)
            if scope == "global" or scope in _SHARED:
                lanes = max((getattr(i, "lanes", 1) for i in stmt.indices if isinstance(i, tirx.Ramp)), default=1)
                nbytes = element_bytes(stmt.buffer.dtype, int(lanes)) * times
                self._global(stmt.buffer, nbytes, WRITE) if scope == "global" else self._shared(nbytes)
            self._loads(stmt.value, times)
            for index in stmt.indices:
                self._loads(index, times)
        elif isinstance(stmt, tirx.IfThenElse):
            self._loads(stmt.condition, times)
        elif isinstance(stmt, tirx.Bind):
            self.binds[stmt.var] = stmt.value
            self._loads(stmt.value, times)
        for child in children(stmt):
            self.visit(child, times)

    def _steers_inner_loops(self, loop) -> bool:
        """Whether a loop inside ``loop`` has a trip count that depends on ``loop``'s variable
        (directly or through a ``Bind``): then ``loop`` is walked once per value."""
        inner, binds = [], dict(self.binds)

        def visit(s):
            if isinstance(s, tirx.For) and const_int(s.extent) is None:
                inner.append(s.extent)
            elif isinstance(s, tirx.Bind):
                binds[s.var] = s.value

        walk_stmts(loop.body, visit)
        if not inner:
            return False
        saved, self.binds = self.binds, binds
        try:
            return any(uses_vars(self._resolve(e), [loop.loop_var]) for e in inner)
        finally:
            self.binds = saved

    def _resolve(self, expr, depth: int = 8):
        """``expr`` with the names ``Bind`` gave values replaced by them (nested up to ``depth``)."""
        for _ in range(depth):
            used = {v: e for v, e in self.binds.items() if uses_vars(expr, [v])}
            if not used:
                break
            expr = substitute(expr, used)
        return expr

    def _mean(self, extent) -> Fraction | None:
        """The mean of ``extent`` over the block indices and enclosing loop variables it depends
        on, or None when it depends on anything else (or too many combinations)."""
        ranges = [(v, 0, n) for v, n in self.block_vars.items()] + [(v, a, n) for v, (a, n) in self.loop_vars.items()]
        used = [(v, a, n) for v, a, n in ranges if uses_vars(extent, [v])]
        combos = math.prod(n for _, _, n in used)
        if not used or combos > MAX_GRID_EVALUATIONS:
            return None
        total = 0
        for values in itertools.product(*(range(a, a + n) for _, a, n in used)):
            env = {v: x for (v, _, _), x in zip(used, values)}
            try:
                value = eval_int(extent, env)
            except (ValueError, KeyError, ZeroDivisionError):
                value = const_int(substitute(extent, env))   # an operator eval_int lacks: TVM's simplifier
            if value is None:
                return None      # another variable: the caller's error names the extent
            total += max(value, 0)
        return Fraction(total, combos)

    def _loads(self, expr, times: int) -> None:
        """Element loads of global and shared buffers in ``expr`` (tile-op regions excluded)."""
        import tvm_ffi

        found = []

        def visit(e):
            if is_tl_call(e):
                return tvm_ffi.WalkResult.SKIP
            if isinstance(e, ir.TensorLoad):
                scope = scope_of(e.source)
                if scope == "global" or scope in _SHARED:
                    lanes = max((getattr(i, "lanes", 1) for i in e.indices if isinstance(i, tirx.Ramp)), default=1)
                    found.append((e.source, scope, element_bytes(e.source.dtype, int(lanes))))
            return None

        if expr is None or isinstance(expr, (int, float, str)):
            return
        tvm_ffi.structural_walk(expr, [(ir.Expr, visit)], order="pre")
        for buf, scope, nbytes in found:
            self._global(buf, nbytes * times, READ) if scope == "global" else self._shared(nbytes * times)

    def _tile_op(self, stmt, times: int) -> None:
        call = stmt.value
        name = call.op.name[3:]
        if name == "gemm":
            self._gemm(stmt, times)
        elif name == "gemm_sp":
            self._gemm_sp(stmt, times)
        elif name == "im2col":
            img, col = decode_region(call.args[0]), decode_region(call.args[1])
            elements = self._elements(col, stmt)
            self._global(img.buffer, element_bytes(img.dtype, elements) * times, READ)
            if col.scope in _SHARED:
                self._shared(element_bytes(col.dtype, elements) * times)
        else:
            for arg in call.args:
                if not is_tl_call(arg, "region"):
                    continue
                region = decode_region(arg)
                if region.scope != "global" and region.scope not in _SHARED:
                    continue
                nbytes = element_bytes(region.dtype, self._elements(region, stmt)) * times
                if region.scope == "global":
                    self._global(region.buffer, nbytes, region.access)
                else:
                    self._shared(nbytes * (bool(region.access & READ) + bool(region.access & WRITE)))

    def _elements(self, region, stmt) -> int:
        return math.prod(self._constant(e, f"an extent of the region of '{region.buffer.name}'", stmt)
                         for e in region.extents)

    def _gemm(self, stmt, times: int) -> None:
        call = stmt.value
        a, b, c = (decode_region(x) for x in call.args[:3])
        transpose_a = bool(const_int(call.args[3]))
        c_ext = [self._constant(e, f"an extent of '{c.buffer.name}'", stmt) for e in c.extents]
        a_ext = [self._constant(e, f"an extent of '{a.buffer.name}'", stmt) for e in a.extents]
        c_ext, a_ext = [1] * (2 - len(c_ext)) + c_ext, [1] * (2 - len(a_ext)) + a_ext
        m, n = c_ext[-2], c_ext[-1]
        k = a_ext[-2] if transpose_a else a_ext[-1]
        batch = math.prod(c_ext[:-2])
        flops = 2 * m * n * k * batch * times
        self.counts.flops += flops
        self.counts.flops_by_dtype[a.dtype] = self.counts.flops_by_dtype.get(a.dtype, 0) + flops
        if a.scope not in _SHARED and b.scope not in _SHARED:
            return
        plan = self.plans.get(stmt) if self.plans is not None else None
        line = span_line(getattr(stmt, "span", None))
        if plan is None:
            self._no_shared(f"the warp partition of the T.gemm at line {line} is known after layout inference")
            return
        kind = getattr(plan, "kind", "mma")
        if kind == "wgmma":
            a_times, b_times = getattr(plan, "warpgroups_n", 1) or 1, getattr(plan, "warpgroups", 0) or plan.warp_m
        elif kind == "mma":
            a_times, b_times = plan.warp_n, plan.warp_m
        else:
            self._no_shared(f"the T.gemm at line {line} runs on CUDA cores ({kind}): its shared reads are not modelled")
            return
        per_call = 0
        if a.scope in _SHARED:
            per_call += element_bytes(a.dtype, m * k * batch) * a_times
        if b.scope in _SHARED:
            per_call += element_bytes(b.dtype, n * k * batch) * b_times
        self._shared(per_call * times)


    def _gemm_sp(self, stmt, times: int) -> None:
        """``T.gemm_sp``: the dense-equivalent 2*M*N*K, at twice the dense peak (2:4 sparsity)."""
        call = stmt.value
        b, c = decode_region(call.args[2]), decode_region(call.args[3])
        b_ext = [self._constant(e, f"an extent of '{b.buffer.name}'", stmt) for e in b.extents]
        c_ext = [self._constant(e, f"an extent of '{c.buffer.name}'", stmt) for e in c.extents]
        k = b_ext[-1] if bool(const_int(call.args[4])) else b_ext[-2]
        flops = 2 * c_ext[-2] * c_ext[-1] * k * times
        key = f"{b.dtype}{SPARSE}"
        self.counts.flops += flops
        self.counts.flops_by_dtype[key] = self.counts.flops_by_dtype.get(key, 0) + flops
        self._no_shared(f"the shared reads of the T.gemm_sp at line {span_line(getattr(stmt, 'span', None))} "
                        "are not modelled")


# ----- the estimate -------------------------------------------------------------------------------

def estimate(counts: Counts, bandwidth_gbps: float, peak) -> Estimate:
    """The roofline time of ``counts`` at ``bandwidth_gbps`` (GB/s) and ``peak(dtype)`` (TFLOP/s)."""
    memory_s = counts.dram_bytes / (bandwidth_gbps * 1e9) if bandwidth_gbps else math.inf
    compute_s = 0.0
    for dtype, flops in counts.flops_by_dtype.items():
        rate = peak(dtype[:-len(SPARSE)]) if dtype.endswith(SPARSE) else peak(dtype)
        rate = rate * 2 if rate and dtype.endswith(SPARSE) else rate
        if not rate:
            compute_s = None
            break
        compute_s += flops / (rate * 1e12)
    if compute_s is None:
        peak_tflops = None
    elif counts.flops and compute_s > 0:
        peak_tflops = round(counts.flops / compute_s / 1e12, 1)
    else:
        peak_tflops = peak("float16")
    time_s = max(memory_s, compute_s) if compute_s is not None else memory_s
    bound = "compute" if compute_s is not None and compute_s > memory_s else "memory"
    intensity = counts.flops / counts.dram_bytes if counts.dram_bytes else (math.inf if counts.flops else 0.0)
    return Estimate(time_s, memory_s, compute_s, bound, intensity, peak_tflops, bandwidth_gbps)


def on_arch(counts: Counts, arch: str, device_name: str | None = None) -> dict:
    """``counts`` and their estimate on the GPU ``arch`` stands for (or ``device_name`` names), as a
    JSON-able dict; without facts for the architecture the dict says so in ``"no_estimate"``."""
    out = counts.as_dict()
    try:
        spec = targets.gpu_spec(arch, device_name)
    except ValueError:
        spec = None
    if spec is None:
        known = ", ".join(targets.described_archs())
        out["no_estimate"] = f"no GPU facts for {arch} in tilelang.targets (known: {known})"
        return out
    est = estimate(counts, spec["dram_bandwidth_gbps"], spec["peak_tflops"].get)
    out.update({"device": spec["name"], "bandwidth_gbps": est.bandwidth_gbps, "peak_tflops": est.peak_tflops,
                "time_s": est.time_s, "memory_s": est.memory_s, "compute_s": est.compute_s, "bound": est.bound,
                "intensity": None if math.isinf(est.intensity) else est.intensity,
                "ridge": (est.peak_tflops * 1e12 / (est.bandwidth_gbps * 1e9)) if est.peak_tflops else None})
    return out


def percent_of_roofline(estimate_s: float, measured_s: float) -> float | None:
    """How close a measured time comes to the roofline: 100 * estimate / measured (100 = at it)."""
    if not estimate_s or not measured_s or measured_s <= 0:
        return None
    return 100.0 * estimate_s / measured_s


__all__ = ["Counts", "Estimate", "count", "estimate", "on_arch", "percent_of_roofline"]
