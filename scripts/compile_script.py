#!/usr/bin/env python3
"""Run a user's TileLang script on a machine without a GPU, with whichever ``tilelang`` is
importable, and say which kernels it built before its first launch.

    python scripts/compile_script.py SCRIPT.py [ARGS...]                       # ours
    PYTHONPATH=/tmp/up-site /tmp/up312/bin/python scripts/compile_script.py SCRIPT.py   # upstream's

For issue reproducers and kernels from other projects: torch's ``device="cuda"`` factories make
CPU tensors (scripts/compile_sweep_child.py's stand-ins), upstream's target detection answers
sm_90a, and every kernel the script builds (a ``@tilelang.jit`` factory call, ``tilelang.compile``)
is also compiled to a cubin. The script runs as ``__main__`` from its own folder until it ends or
launches a kernel (no GPU here). Prints ``COMPILED <name>`` per kernel and a last line
``RESULT ok`` / ``RESULT ok (stopped at launch)`` / ``RESULT compile-error <line>`` (a traceback
through tilelang or tvm; the traceback goes to stderr) / ``RESULT other-error <line>``; exit status
1 on an error. Upstream's launch-time argument checks (``device_type mismatch``) count as a launch.
"""

import os
import runpy
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compile_sweep_child import LAUNCH_ERRORS, _cuda_to_cpu, _first_line  # noqa: E402

LAUNCHED = LAUNCH_ERRORS + ("device_type mismatch",)


def _built(kernel, name):
    try:
        kernel.get_kernel_source()
        if hasattr(kernel, "ensure_cubin"):          # ours builds its cubin at first launch
            kernel.ensure_cubin()
    except Exception as e:  # noqa: BLE001 - a kernel built for a GPU this machine lacks
        if not any(t in _first_line(e) for t in LAUNCHED):
            raise
    print(f"COMPILED {name}", flush=True)
    return kernel


def _install(tilelang) -> None:
    try:                                             # upstream: no GPU, so name the target
        import tilelang.backend.target as target
        target.auto_detect_target = lambda: {"kind": "cuda", "arch": "sm_90a"}
    except ImportError:
        pass
    compile_ = tilelang.compile
    tilelang.compile = lambda func, *a, **k: _built(compile_(func, *a, **k), getattr(func, "__name__", "prim_func"))
    jit = tilelang.jit

    def recording_jit(func=None, **options):
        def wrap(fn):
            inner = jit(**options)(fn) if options else jit(fn)

            class Factory:
                def __getattr__(self, attr):
                    return getattr(inner, attr)

                def __call__(self, *args, **kwargs):
                    out = inner(*args, **kwargs)
                    return _built(out, getattr(fn, "__name__", "kernel")) if hasattr(out, "get_kernel_source") else out
            return Factory()
        return wrap(func) if func is not None else wrap

    tilelang.jit = recording_jit


def main(argv) -> int:
    if not argv:
        print(__doc__)
        return 2
    _cuda_to_cpu()
    import tilelang
    _install(tilelang)
    path = os.path.abspath(argv[0])
    sys.argv = [path] + argv[1:]
    os.chdir(os.path.dirname(path))
    sys.path.insert(0, os.path.dirname(path))
    try:
        runpy.run_path(path, run_name="__main__")
        print("RESULT ok", flush=True)
    except SystemExit as e:
        print("RESULT ok" if not e.code else f"RESULT other-error exit {e.code}", flush=True)
        return 0 if not e.code else 1
    except BaseException as e:  # noqa: BLE001 - every failure is a result here
        line = _first_line(e)
        if any(t in line for t in LAUNCHED):
            print("RESULT ok (stopped at launch)", flush=True)
            return 0
        tb = traceback.format_exc()
        kind = "compile-error" if ("tilelang" in tb or "tvm" in tb) else "other-error"
        print(f"RESULT {kind} {line}", flush=True)
        print(tb[-4000:], file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
