"""The ``TILELANG_PASS_DIFF`` hook: an IR diff of every compile stage, without code changes.

    TILELANG_PASS_DIFF=terminal python my_kernel.py      # coloured diffs on stdout (also 1/true/on)
    TILELANG_PASS_DIFF=html python my_kernel.py          # $TILELANG_PASS_DIFF_OUTPUT/pass_diff_<time>.html
    TILELANG_PASS_DIFF=both python my_kernel.py

Contract:
- ``install_pass_diff_hook()`` (run by ``import tilelang``) does nothing when the variable is off
  (``tilelang.env.get_pass_diff_mode()`` is None). Otherwise, once (a second call is a no-op):
  * it joins our compile pipeline (``tilelang.engine.lower.PASS_OBSERVERS``): around each stage
    of ``tilelang.engine.pipeline.PASSES`` it records the kernel as that stage sees it: the
    PrimFunc's TVMScript until ``lower_tile_ops`` has run, the lowered TIR after it, and the CUDA
    source once ``emit_cuda`` has produced it (shown whole, as insertions: TIR and CUDA do not
    diff line by line);
  * it wraps ``tvm.ir.transform.Pass.__call__`` (the original is kept in ``_original_call``), so
    a TVM pass called from Python (TVM's lowering pipeline inside ``emit_cuda``, passes a user
    runs) is diffed too, on ``IRModule.script()``; a pass called inside another reported pass
    is part of that one's diff. Our stages wrapped as TVM passes (``tl.<stage>``, under
    ``tilelang.instrumentation``) are not reported twice.
  After ``infer_layouts`` the TIR view ends with the inferred layouts as comment lines.
  A kernel loaded from the disk cache is not lowered, so nothing is shown for it
  (``TILELANG_DISABLE_CACHE=1`` recompiles).
  Each step is printed (terminal/both) and/or kept for the HTML report, which is rewritten after
  every step (a crash leaves the report of what ran) and once more at exit.
- For html/both the output directory is created at install; ``_html_path`` is the report's path.
- ``uninstall_pass_diff_hook()`` restores ``Pass.__call__``, leaves the pipeline and forgets the
  recorded steps; calling it when not installed does nothing.
- The hook never changes what is compiled; a failure to print a module is recorded as text.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
import time

__all__ = ["install_pass_diff_hook", "uninstall_pass_diff_hook"]

_original_call = None            # tvm.ir.transform.Pass.__call__ while the hook is installed
_html_path: str | None = None
_mode: str | None = None
_steps: list[dict] = []
_counter = 0
_atexit_registered = False
_lock = threading.RLock()
_open_stages: dict = {}          # (thread id, stage) -> (kind, text) captured before the stage


# ----------------------------------------------------------------------------- recording
def _report(name: str, before: str, after: str, before_label="before", after_label="after") -> None:
    global _counter
    from tilelang.utils import pass_diff as pd

    with _lock:
        _counter += 1
        step = pd._step(f"Pass {_counter}: {name}", before, after, 3, before_label, after_label)
        if _mode in ("terminal", "both"):
            pd._print_step_header(_counter, None, name)
            pd._print_colored_diff(step["diff_lines"])
            pd._print_step_summary(step)
        if _mode in ("html", "both") and _html_path:
            _steps.append(step)
            try:
                pd._generate_html(_steps, _html_path)
            except OSError as err:
                print(f"[pass_diff] could not write {_html_path}: {err}")


def _stage_view(st) -> tuple[str, str]:
    """(kind, text) of the kernel as a pipeline stage leaves it."""
    from tilelang.utils.pass_diff import _script

    cuda = getattr(st, "cuda", None)
    if cuda is not None:
        return "cuda", cuda.source
    func = st.lowered if getattr(st, "lowered", None) is not None else st.func
    try:
        text = func.script()
    except Exception:  # noqa: BLE001 - fall back to the module printer's own error text
        import tvm

        text = _script(tvm.IRModule({st.name: func}))
    return "tir", text + _layouts_text(getattr(st, "layouts", None))


def _layouts_text(layouts) -> str:
    """What ``infer_layouts`` decided, as comment lines after the IR (empty before it ran)."""
    from tilelang.utils.pass_diff import layout_lines

    lines = layout_lines(layouts)
    if not lines:
        return ""
    return "\n".join(["", "# ---- layouts (infer_layouts) ----"] + [f"# {line}" for line in lines]) + "\n"


def _observe(event: str, stage: str, st) -> None:
    key = (threading.get_ident(), stage)
    if event == "before":
        _open_stages[key] = _stage_view(st)
        return
    kind_before, before = _open_stages.pop(key, ("tir", ""))
    kind_after, after = _stage_view(st)
    label = f"{stage} [kernel {getattr(st, 'name', '?')}]"
    if kind_before != kind_after:   # TIR -> CUDA: the source is new text, not an edit of the TIR
        _report(label, "", after, f"before ({kind_before.upper()}: see the previous stage)", kind_after.upper())
    else:
        _report(label, before, after)


def _pipeline_stage_names() -> set:
    from tilelang.engine.pipeline import PASSES

    return {f"tl.{name}" for name, _ in PASSES}


def _patched_call(self, mod, *args, **kwargs):
    from tilelang.utils.pass_diff import _pass_name, _script

    original = _original_call
    if original is None:    # uninstalled while a call was in flight
        from tvm.ir.transform import Pass

        return Pass.__call__(self, mod, *args, **kwargs)
    name = _pass_name(self)
    if name.split("(")[0] in _STAGE_PASSES or getattr(_nesting, "depth", 0):
        # a stage already observed through PASS_OBSERVERS, or a pass run inside a reported one
        # (its effect is part of the outer pass's diff)
        return original(self, mod, *args, **kwargs)
    before = _script(mod)
    _nesting.depth = 1
    try:
        result = original(self, mod, *args, **kwargs)
    finally:
        _nesting.depth = 0
    _report(name, before, _script(result))
    return result


_STAGE_PASSES: set = set()
_nesting = threading.local()     # depth > 0 while a reported pass runs on this thread


# ----------------------------------------------------------------------------- install / uninstall
def install_pass_diff_hook() -> None:
    """Install the hook when ``TILELANG_PASS_DIFF`` asks for it (module docstring)."""
    global _original_call, _html_path, _mode, _atexit_registered, _STAGE_PASSES
    from tilelang import knobs

    mode = knobs.pass_diff_mode()   # what tilelang.env.get_pass_diff_mode() reads
    if mode is None:
        return
    with _lock:
        if _original_call is not None:
            return
        from tvm.ir.transform import Pass

        import tilelang.engine.lower

        lower_mod = sys.modules["tilelang.engine.lower"]   # (tilelang.engine.lower is also a function)

        _mode = mode
        _STAGE_PASSES = _pipeline_stage_names()
        if mode in ("html", "both"):
            folder = knobs.pass_diff_output()
            os.makedirs(folder, exist_ok=True)
            stamp = time.strftime("%Y%m%d_%H%M%S")
            _html_path = os.path.join(folder, f"pass_diff_{stamp}_{os.getpid()}.html")
        _original_call = Pass.__call__
        Pass.__call__ = _patched_call
        if _observe not in lower_mod.PASS_OBSERVERS:
            lower_mod.PASS_OBSERVERS.append(_observe)
        if not _atexit_registered:
            atexit.register(_flush_at_exit)
            _atexit_registered = True


def uninstall_pass_diff_hook() -> None:
    """Remove the hook and forget what it recorded (a no-op when it is not installed)."""
    global _original_call, _html_path, _mode, _counter
    with _lock:
        if _original_call is None:
            return
        from tvm.ir.transform import Pass

        import tilelang.engine.lower

        lower_mod = sys.modules["tilelang.engine.lower"]   # (tilelang.engine.lower is also a function)

        Pass.__call__ = _original_call
        _original_call = None
        while _observe in lower_mod.PASS_OBSERVERS:
            lower_mod.PASS_OBSERVERS.remove(_observe)
        _steps.clear()
        _open_stages.clear()
        _counter = 0
        _html_path = None
        _mode = None


def _flush_at_exit() -> None:
    with _lock:
        if not (_html_path and _steps):
            return
        from tilelang.utils.pass_diff import _generate_html

        try:
            _generate_html(_steps, _html_path)
            print(f"\n[pass_diff] HTML report: {_html_path}")
        except OSError as err:
            print(f"\n[pass_diff] could not write {_html_path}: {err}")
