"""``Analyzer``: a static roofline estimate of a kernel from its parsed IR (no compilation, no GPU).

Contract: ``Analyzer.analysis(fn, device)`` takes a ``PrimFunc`` (``kernel.get_tir(...)``) or an
``IRModule`` of them and a device description (``tilelang.carver.arch.CUDA("cuda")``, or any object
with ``compute_capability`` and ``bandwidth``), and returns an ``AnalysisResult``:

- FLOPs: every ``T.gemm`` counts 2*M*N*K (times its batch extent) per execution; elementwise
  arithmetic is not counted.
- Global bytes: every tile op's operand region in global memory (``T.copy`` to or from global
  memory, ``T.atomic_*``, ``T.fill`` of a global tensor...) counts its elements once per direction
  (read, write: an atomic counts both), ``T.im2col`` the elements of its column tile; element
  loads and stores of global tensors (``C[i, j] = ...`` in a ``T.Parallel``) count per execution.
- Executions: the product of the enclosing loops' trip counts and of the grid (``blockIdx.*``).
  Both branches of a conditional are counted; a symbolic trip count or extent, or a ``while``
  loop, is a ``ValueError`` naming the loop and line (analyze a kernel specialised to static shapes).
- Time: memory time is bytes over the device's DRAM bandwidth, compute time FLOPs over its dense
  tensor-core peak for the gemm operand dtype (``tilelang.targets``); the estimate is the larger,
  ``bound`` says which. A description without ``memory_bandwidth_GBps`` is read the way upstream
  reads one: ``bandwidth[1]`` in MB/s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from tvm import ir, tirx

from tilelang import targets
from tilelang.language.dtypes import bits
from tilelang.language._ops import is_tl_call
from tilelang.tir_utils import children, const_int, span_line
from tilelang.transform.kernel import decode_region, scope_of

_BLOCK_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z")
READ, WRITE = 1, 2


@dataclass(frozen=True)
class AnalysisResult:
    """The estimate: ``total_flops``, ``total_global_bytes``, ``estimated_time`` (seconds), the
    device's ``expected_tflops`` (peak for the kernel's gemm dtype) and ``expected_bandwidth_GBps``,
    plus ``arithmetic_intensity`` (FLOPs per byte), ``memory_time`` / ``compute_time`` (seconds;
    compute_time None when the peak is unknown) and ``bound`` ("memory" or "compute")."""

    total_flops: int
    total_global_bytes: int
    estimated_time: float
    expected_tflops: float | None
    expected_bandwidth_GBps: float
    arithmetic_intensity: float = 0.0
    memory_time: float = 0.0
    compute_time: float | None = None
    bound: str = "memory"
    flops_by_dtype: dict = field(default_factory=dict)

    def __str__(self) -> str:
        peak = f"{self.expected_tflops} TFLOP/s" if self.expected_tflops is not None else "unknown peak"
        return (f"AnalysisResult: {self.total_flops} FLOPs, {self.total_global_bytes} global bytes "
                f"(intensity {self.arithmetic_intensity:.2f} FLOP/B); {self.bound}-bound, estimated "
                f"{self.estimated_time * 1e6:.2f} us at {self.expected_bandwidth_GBps} GB/s and {peak}")


def _element_bytes(dtype: str, count: int) -> int:
    return -(-count * bits(str(dtype)) // 8)


class Analyzer:
    """Walks the kernel IR and accumulates ``total_flops`` and ``total_global_bytes``."""

    def __init__(self, fn, device):
        if isinstance(fn, tirx.PrimFunc):
            self.funcs = [fn]
        elif isinstance(fn, ir.IRModule):
            self.funcs = [f for f in fn.functions.values() if isinstance(f, tirx.PrimFunc)]
        else:
            raise TypeError(f"Analyzer expects a PrimFunc (kernel.get_tir(...)) or an IRModule, "
                            f"got {type(fn).__name__}")
        self.fn = fn
        self.device = device
        self.total_flops = 0
        self.total_global_bytes = 0
        self.flops_by_dtype: dict[str, int] = {}
        self.block_counts = {tag: 1 for tag in _BLOCK_TAGS}
        self.loop_stack: list[int] = []

    # ----- the walk -----------------------------------------------------------------------------

    def ir_pass(self) -> "Analyzer":
        """Count FLOPs and global bytes of every function (totals start from zero)."""
        self.total_flops = self.total_global_bytes = 0
        self.flops_by_dtype = {}
        for func in self.funcs:
            self.block_counts = {tag: 1 for tag in _BLOCK_TAGS}
            self.loop_stack = []
            self._visit(func.body, 1)
        return self

    def _visit(self, stmt, times: int) -> None:
        if stmt is None:
            return
        if isinstance(stmt, tirx.AttrStmt) and stmt.attr_key == "thread_extent":
            tag = str(stmt.node.thread_tag)
            if tag.startswith("blockIdx"):
                extent = self._constant(stmt.value, f"the grid dimension {tag}", stmt)
                self.block_counts[tag] = extent
                times *= extent
            self._visit(stmt.body, times)
            return
        if isinstance(stmt, tirx.For):
            extent = self._constant(stmt.extent, f"the trip count of loop '{stmt.loop_var.name}'", stmt)
            self.loop_stack.append(extent)
            try:
                self._visit(stmt.body, times * extent)
            finally:
                self.loop_stack.pop()
            return
        if isinstance(stmt, tirx.While):
            raise ValueError(f"Analyzer: a while loop (line {span_line(getattr(stmt, 'span', None))}) has no "
                             "static trip count")
        if isinstance(stmt, tirx.Evaluate):
            if is_tl_call(stmt.value):
                self._tile_op(stmt, times)
            else:
                self._loads(stmt.value, times)
        elif isinstance(stmt, tirx.BufferStore):
            if scope_of(stmt.buffer) == "global":
                lanes = max((getattr(i, "lanes", 1) for i in stmt.indices if isinstance(i, tirx.Ramp)), default=1)
                self.total_global_bytes += _element_bytes(stmt.buffer.dtype, int(lanes)) * times
            self._loads(stmt.value, times)
            for index in stmt.indices:
                self._loads(index, times)
        elif isinstance(stmt, tirx.IfThenElse):
            self._loads(stmt.condition, times)
        elif isinstance(stmt, tirx.Bind):
            self._loads(stmt.value, times)
        for child in children(stmt):
            self._visit(child, times)

    def _constant(self, expr, what: str, stmt) -> int:
        value = const_int(expr)
        if value is None:
            line = span_line(getattr(stmt, "span", None))
            raise ValueError(f"Analyzer: {what} is {expr}, not a constant (line {line}): "
                             "analyze a kernel specialised to static shapes")
        return value

    def _loads(self, expr, times: int) -> None:
        """Count the element loads of global tensors in ``expr`` (tile-op regions excluded)."""
        import tvm_ffi

        found = []

        def visit(e):
            if is_tl_call(e):
                return tvm_ffi.WalkResult.SKIP
            if isinstance(e, ir.TensorLoad) and scope_of(e.source) == "global":
                lanes = max((getattr(i, "lanes", 1) for i in e.indices if isinstance(i, tirx.Ramp)), default=1)
                found.append(_element_bytes(e.source.dtype, int(lanes)))
            return None

        if expr is None or isinstance(expr, (int, float, str)):
            return
        tvm_ffi.structural_walk(expr, [(ir.Expr, visit)], order="pre")
        self.total_global_bytes += sum(found) * times

    def _tile_op(self, stmt, times: int) -> None:
        call = stmt.value
        name = call.op.name[3:]
        if name == "gemm":
            self._analyze_gemm(call, times)
        elif name == "im2col":
            img, col = decode_region(call.args[0]), decode_region(call.args[1])
            self.total_global_bytes += _element_bytes(img.dtype, self._elements(col, stmt)) * times
        else:
            for arg in call.args:
                if is_tl_call(arg, "region"):
                    region = decode_region(arg)
                    if region.scope != "global":
                        continue
                    directions = bool(region.access & READ) + bool(region.access & WRITE)
                    self.total_global_bytes += (_element_bytes(region.dtype, self._elements(region, stmt))
                                                * directions * times)

    def _elements(self, region, stmt) -> int:
        return math.prod(self._constant(e, f"an extent of the region of '{region.buffer.name}'", stmt)
                         for e in region.extents)

    def _analyze_gemm(self, call, times: int) -> None:
        a, c = decode_region(call.args[0]), decode_region(call.args[2])
        transpose_a = bool(const_int(call.args[3]))
        c_ext = [self._constant(e, f"an extent of '{c.buffer.name}'", call) for e in c.extents]
        a_ext = [self._constant(e, f"an extent of '{a.buffer.name}'", call) for e in a.extents]
        if len(c_ext) < 2 or len(a_ext) < 2:
            c_ext, a_ext = [1] * (2 - len(c_ext)) + c_ext, [1] * (2 - len(a_ext)) + a_ext
        m, n = c_ext[-2], c_ext[-1]
        k = a_ext[-2] if transpose_a else a_ext[-1]
        flops = 2 * m * n * k * math.prod(c_ext[:-2]) * times
        self.total_flops += flops
        self.flops_by_dtype[a.dtype] = self.flops_by_dtype.get(a.dtype, 0) + flops

    # ----- the estimate -------------------------------------------------------------------------

    def _bandwidth_gbps(self) -> float:
        measured = getattr(self.device, "memory_bandwidth_GBps", None)
        if measured:
            return float(measured)
        return self.device.bandwidth[1] / 1000   # upstream's reading of a bare description (MB/s)

    def _peak(self, dtype: str) -> float | None:
        peak = getattr(self.device, "peak_tflops", None)
        if callable(peak):
            return peak(dtype)
        try:
            spec = targets.gpu_spec(f"sm_{self.device.compute_capability}")
        except ValueError:
            return None
        return spec["peak_tflops"].get(dtype) if spec is not None else None

    def calculate(self) -> AnalysisResult:
        """The roofline estimate of what ``ir_pass`` counted."""
        bandwidth = self._bandwidth_gbps()
        memory_time = self.total_global_bytes / (bandwidth * 1e9)
        dominant = max(self.flops_by_dtype, key=self.flops_by_dtype.get) if self.flops_by_dtype else "float16"
        compute_time = 0.0
        for dtype, flops in self.flops_by_dtype.items():
            peak = self._peak(dtype)
            if peak is None:
                compute_time = None
                break
            compute_time += flops / (peak * 1e12)
        if compute_time is None:
            expected = None
        elif self.total_flops and compute_time > 0:
            expected = round(self.total_flops / compute_time / 1e12, 1)
        else:
            expected = self._peak(dominant)
        estimated = max(memory_time, compute_time) if compute_time is not None else memory_time
        bound = "compute" if compute_time is not None and compute_time > memory_time else "memory"
        if self.total_global_bytes:
            intensity = self.total_flops / self.total_global_bytes
        else:
            intensity = math.inf if self.total_flops else 0.0
        return AnalysisResult(
            total_flops=self.total_flops, total_global_bytes=self.total_global_bytes,
            estimated_time=estimated, expected_tflops=expected, expected_bandwidth_GBps=bandwidth,
            arithmetic_intensity=intensity, memory_time=memory_time, compute_time=compute_time,
            bound=bound, flops_by_dtype=dict(self.flops_by_dtype))

    @classmethod
    def analysis(cls, fn, device) -> AnalysisResult:
        """Count and estimate in one call."""
        return cls(fn, device).ir_pass().calculate()


__all__ = ["AnalysisResult", "Analyzer"]
