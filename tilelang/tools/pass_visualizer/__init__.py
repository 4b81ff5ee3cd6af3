"""``tilelang.tools.pass_visualizer``: the structure tree of a kernel after each stage of our
lowering, browsable pass by pass in one HTML file (a complement to ``tilelang.utils.pass_diff``,
which diffs the TVMScript text). ``core`` holds the tree and the recording instrument; the browser
is ``tilelang.tools.pass_visualizer.viewer`` (CLI: ``python -m tilelang.tools.pass_visualizer.viewer``),
not imported here so that running it as a module stays clean.
"""

from .core import (PassStructureRecord, StructureTreePassInstrument, build_module, capture_structure,
                   discover_jit_kernels, inspect_structure, kernel_to_tir, load_user_module, parse_assignments)

__all__ = ["PassStructureRecord", "StructureTreePassInstrument", "build_module", "capture_structure",
           "discover_jit_kernels", "inspect_structure", "kernel_to_tir", "load_user_module", "parse_assignments"]
