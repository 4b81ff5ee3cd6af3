"""``tilelang.tools``: upstream's developer tools; here ``plot_layout``.

Upstream's ``Analyzer`` (built on its carver), ``lower_trace``, ``pass_timing`` and
``pass_visualizer`` (built on its TVM pass instrumentation) have no counterpart;
``TILELANG_DUMP_IR`` dumps our IR after every pass instead.
"""

from tilelang.tools.plot_layout import plot_layout

__all__ = ["plot_layout"]
