"""``Analyzer``: upstream's static roofline estimate of a kernel, over ``tilelang.analysis.roofline``.

Contract: ``Analyzer.analysis(fn, device)`` takes a ``PrimFunc`` (``kernel.get_tir(...)``) or an
``IRModule`` of them and a device description (``tilelang.carver.arch.CUDA("cuda")``, or any object
with ``compute_capability`` and ``bandwidth``), and returns an ``AnalysisResult``. The counting is
``roofline.count`` (the kernel hover and the Run lens read the same numbers):

- ``total_flops``: 2*M*N*K of every ``T.gemm`` per execution (elementwise arithmetic not counted);
- ``total_global_bytes``: what the blocks request from global memory (tile-op regions once per
  direction, element loads and stores per execution), upstream's number;
- ``dram_bytes``: the same capped at each tensor's size per direction (re-reads hit the L2);
- ``total_shared_bytes``: tile-op and element traffic of shared buffers; None when a ``T.gemm``
  reads shared operands (its warp partition comes from layout inference: the hover knows it).

Executions are the product of the enclosing loop trip counts and the grid; a symbolic extent or a
``while`` loop is a ``ValueError`` naming it and its line. Time: memory time is DRAM bytes over the
device's bandwidth, compute time FLOPs over the dense tensor-core peak of the gemm operand dtype
(``tilelang.targets``); the estimate is the larger and ``bound`` says which. A description without
``memory_bandwidth_GBps`` is read the way upstream reads one: ``bandwidth[1]`` in MB/s.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tvm import ir, tirx

from tilelang import targets
from tilelang.analysis import roofline

_BLOCK_TAGS = roofline.BLOCK_TAGS


@dataclass(frozen=True)
class AnalysisResult:
    """The estimate: ``total_flops``, ``total_global_bytes``, ``estimated_time`` (seconds), the
    device's ``expected_tflops`` (peak for the kernel's gemm dtype) and ``expected_bandwidth_GBps``,
    plus ``dram_bytes``, ``total_shared_bytes``, ``arithmetic_intensity`` (FLOPs per DRAM byte),
    ``memory_time`` / ``compute_time`` (seconds; compute_time None when the peak is unknown) and
    ``bound`` ("memory" or "compute")."""

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
    dram_bytes: int = 0
    total_shared_bytes: int | None = None

    def __str__(self) -> str:
        peak = f"{self.expected_tflops} TFLOP/s" if self.expected_tflops is not None else "unknown peak"
        return (f"AnalysisResult: {self.total_flops} FLOPs, {self.total_global_bytes} global bytes requested "
                f"({self.dram_bytes} from DRAM, intensity {self.arithmetic_intensity:.2f} FLOP/B); "
                f"{self.bound}-bound, estimated {self.estimated_time * 1e6:.2f} us at "
                f"{self.expected_bandwidth_GBps} GB/s and {peak}")


class Analyzer:
    """Counts ``total_flops`` and ``total_global_bytes`` (``ir_pass``), then estimates (``calculate``)."""

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
        self.counts = roofline.Counts()
        self.block_counts = {tag: 1 for tag in _BLOCK_TAGS}
        self.loop_stack: list[int] = []

    @property
    def total_flops(self) -> int:
        return self.counts.flops

    @property
    def total_global_bytes(self) -> int:
        return self.counts.global_bytes

    @property
    def flops_by_dtype(self) -> dict:
        return self.counts.flops_by_dtype

    def ir_pass(self) -> "Analyzer":
        """Count FLOPs and bytes of every function (totals start from zero)."""
        try:
            self.counts = roofline.count(self.funcs)
        except ValueError as err:
            raise ValueError(f"Analyzer: {err}") from None
        self.block_counts = dict(self.counts.block_counts)
        return self

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
        est = roofline.estimate(self.counts, self._bandwidth_gbps(), self._peak)
        c = self.counts
        return AnalysisResult(
            total_flops=c.flops, total_global_bytes=c.global_bytes, estimated_time=est.time_s,
            expected_tflops=est.peak_tflops, expected_bandwidth_GBps=est.bandwidth_gbps,
            arithmetic_intensity=est.intensity, memory_time=est.memory_s, compute_time=est.compute_s,
            bound=est.bound, flops_by_dtype=dict(c.flops_by_dtype), dram_bytes=c.dram_bytes,
            total_shared_bytes=c.shared_bytes)

    @classmethod
    def analysis(cls, fn, device) -> AnalysisResult:
        """Count and estimate in one call."""
        return cls(fn, device).ir_pass().calculate()


__all__ = ["AnalysisResult", "Analyzer"]
