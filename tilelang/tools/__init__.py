"""``tilelang.tools``: upstream's developer tools; here ``plot_layout`` and ``Analyzer`` (a static
roofline estimate of a kernel: ``Analyzer.analysis(kernel.get_tir(...), CUDA("cuda"))``).

Upstream's ``lower_trace``, ``pass_timing`` and ``pass_visualizer`` (built on its TVM pass
instrumentation) have no counterpart; ``TILELANG_DUMP_IR`` dumps our IR after every pass instead.
"""

from tilelang.tools.analyzer import AnalysisResult, Analyzer
from tilelang.tools.plot_layout import plot_layout

__all__ = ["AnalysisResult", "Analyzer", "plot_layout"]
