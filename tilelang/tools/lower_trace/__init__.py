"""Lower trace: the IR before and after every compiler pass, as terminal diffs and/or an HTML report.

    TL_LOWER_TRACE=1 python my_kernel.py          # HTML report (TL_LOWER_TRACE_DIR, ./tmp/lower_trace_dir)
    TL_LOWER_TRACE=terminal python my_kernel.py   # diffs in the terminal
    TL_LOWER_TRACE=both python my_kernel.py

    from tilelang.tools.lower_trace import enable, disable, lower_trace
    enable(mode="html", trace_dir="traces")       # every later compilation is traced
    lower_trace(func, [("Simplify", tvm.tirx.transform.Simplify())], mode="terminal")

A traced compilation shows our stages (``tl.check`` ... ``tl.emit_cuda``), the TVM passes of
code generation and the generated CUDA (see ``core`` for the files written). Note that a kernel
loaded from the disk cache is not lowered, so it leaves no trace (``TILELANG_DISABLE_CACHE=1``).
``lower_trace(func_or_mod, passes, mode=, context=, html_path=)`` runs the given passes one by
one on a PrimFunc or IRModule and returns one dict per step (``name``, ``before_script``,
``after_script``, ``diff_lines``, ``insertions``, ``deletions``, ``changed``, and ``error`` for a
step that raised, whose exception is re-raised after the report is written).
"""

from __future__ import annotations

from .core import (STATUS_CODEGEN, STATUS_COMPLETED, STATUS_FAILED, STATUS_SKIPPED, LowerRecord, LowerTraceSession,
                   _get_pass_display_name, create_pass_instrument, disable, enable, get_last_session, reset)

__all__ = ["STATUS_CODEGEN", "STATUS_COMPLETED", "STATUS_FAILED", "STATUS_SKIPPED", "LowerRecord",
           "LowerTraceSession", "create_pass_instrument", "disable", "enable", "get_last_session", "lower_trace",
           "reset"]


def _named(passes) -> list:
    if (isinstance(passes, tuple) and len(passes) == 2 and isinstance(passes[0], str)) \
            or not isinstance(passes, (list, tuple)):
        passes = [passes]   # one pass, or one (name, pass) pair
    out = []
    for item in passes:
        if isinstance(item, (list, tuple)) and len(item) == 2:
            out.append((str(item[0]), item[1]))
        else:
            out.append((_get_pass_display_name(item), item))
    return out


def lower_trace(func_or_mod, passes, *, mode: str = "terminal", context: int = 3,
                html_path: str = "lower_trace_report.html") -> list[dict]:
    """Apply ``passes`` in order, showing what each one changed (see the module docstring)."""
    import tvm

    from .diff import print_diff, unified_diff

    mode = str(mode).strip().lower()
    if mode not in ("terminal", "html", "both"):
        raise ValueError(f"lower_trace: mode must be 'terminal', 'html' or 'both', not {mode!r}")
    mod = func_or_mod if isinstance(func_or_mod, tvm.IRModule) else tvm.IRModule({"main": func_or_mod})
    terminal = mode in ("terminal", "both")
    results: list[dict] = []
    failure = None
    try:
        for step, (name, p) in enumerate(_named(passes), 1):
            before = mod.script()
            try:
                mod = p(mod)
            except Exception as exc:
                results.append({"name": name, "before_script": before, "after_script": "", "diff_lines": [],
                                "insertions": 0, "deletions": 0, "changed": False, "error": str(exc)})
                if terminal:
                    print(f"\n{'=' * 60}\n  Pass {step}: {name}  [FAILED]\n{'=' * 60}")
                    print(f"  {type(exc).__name__}: {exc}\n  IR before the pass:\n{before}")
                raise
            after = mod.script()
            diff = unified_diff(before, after, f"step {step} before", f"step {step} after", context, color=False)
            lines = diff.splitlines()
            plus = sum(1 for d in lines if d.startswith("+") and not d.startswith("+++"))
            minus = sum(1 for d in lines if d.startswith("-") and not d.startswith("---"))
            results.append({"name": name, "before_script": before, "after_script": after, "diff_lines": lines,
                            "insertions": plus, "deletions": minus, "changed": bool(plus or minus)})
            if terminal:
                print(f"\n{'=' * 60}\n  Pass {step}: {name}\n{'=' * 60}")
                if plus or minus:
                    print_diff(before, after, f"step {step} before", f"step {step} after", context)
                    print(f"  >>> +{plus} insertion(s), -{minus} deletion(s)")
                else:
                    print("  (no changes)")
    except Exception as exc:
        failure = exc
        raise
    finally:
        if mode in ("html", "both"):
            _write_report(results, html_path, failure)
    return results


def _write_report(results, html_path, failure) -> None:
    from .html import generate_html

    records = [LowerRecord("lower_trace", r["name"], i, r["before_script"], r["after_script"], r["changed"],
                           r["insertions"], r["deletions"], STATUS_FAILED if "error" in r else STATUS_COMPLETED,
                           r.get("error", "")) for i, r in enumerate(results)]
    try:
        generate_html(records, html_path, title="TileLang lower_trace")
        print(f"\nHTML report written to: {html_path}")
    except Exception as exc:  # noqa: BLE001 - never hide the pass's own failure
        if failure is None:
            raise
        print(f"[lower_trace] WARNING: could not write the HTML report: {exc}")
