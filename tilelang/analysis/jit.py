"""The checker inside the JIT: the first entry of ``engine/pipeline.PASSES``.

Errors stop the compile with ``TileLangCompileError`` (the caret snippet at the user's line);
the other findings go to ``warnings.warn`` as ``TileLangWarning`` with the same rendering, and the
compile continues. A TL0003 (a bug in the checker itself) is only a warning here: the compiler
proper may still handle the kernel. Source text is read through ``linecache`` so the
operand-level spans work for kernels defined in files.
"""

from __future__ import annotations

import linecache
import warnings

from tilelang.diagnostics import Severity, TileLangCompileError, render_text


class TileLangWarning(UserWarning):
    """A non-fatal checker finding about a kernel being compiled."""


def _read(file: str) -> str | None:
    lines = linecache.getlines(file)
    return "".join(lines) if lines else None


def silenced_codes(configs) -> set:
    """Codes the user switched off through pass configs (see tilelang.transform.pass_config)."""
    off = set()
    if configs.get("tl.disable_buffer_init_check"):
        off.add("TL0401")
    if configs.get("tl.disable_out_of_bound_warning"):
        off.update({"TL0601", "TL0602"})
    return off


def run_check_pass(state) -> None:
    from tilelang.analysis.checker import check
    from tilelang.analysis.report import CheckContext

    ctx = CheckContext(out_idx=getattr(state, "out_idx", None), read_source=_read,
                       pass_configs=dict(getattr(state, "pass_configs", None) or {}))
    diagnostics = [d for d in check(state.func, state.arch, ctx)
                   if d.code not in silenced_codes(getattr(state, "pass_configs", None) or {})]
    errors = [d for d in diagnostics if d.severity is Severity.ERROR and d.code != "TL0003"]
    if errors:
        from tilelang.transform.kernel import compile_error

        raise compile_error(errors)
    for d in diagnostics:
        # Attribute the warning to the user's line, not to this module.
        file, line = (d.span.file, d.span.line) if d.span is not None else ("<kernel>", 0)
        warnings.warn_explicit(TileLangWarning(render_text([d])), TileLangWarning, file, line)
