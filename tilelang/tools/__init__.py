"""``tilelang.tools``: upstream's developer tools; here ``plot_layout`` and ``Analyzer`` (a static
roofline estimate of a kernel: ``Analyzer.analysis(kernel.get_tir(...), CUDA("cuda"))``).

Compile-pipeline tools built on ``tilelang.instrumentation`` (import them by name):
``tilelang.tools.pass_timing`` (per-pass timing report: ``tl.pass_profile``) and
``tilelang.tools.lower_trace`` (IR of every pass and the generated source: ``TL_LOWER_TRACE``).
``tilelang.tools.cuda.iket``: IKET profiling events in CUDA kernels (docs/iket.md).
"""

from tilelang.tools.analyzer import AnalysisResult, Analyzer
from tilelang.tools.plot_layout import plot_layout

__all__ = ["AnalysisResult", "Analyzer", "plot_layout"]
