"""``tilelang.tools.cuda.iket``: IKET profiling events in TileLang CUDA kernels.

    from tilelang.tools.cuda import iket

    with T.Kernel(n // 128, threads=128) as bx, iket.range("block"):   # in a @T.prim_func
        iket.mark("start", payload=iket.payload(bx, dtype="int32"))

    with iket.session(output_dir="/tmp/iket"):                          # on the host
        kernel = tilelang.compile(program, out_idx=-1)

Contract: the kernel-side calls (``frontend``) put one extern call per event into the TIR, with
the event's metadata in a token. Kernels compiled inside ``iket.session()`` (``session``) get
those calls turned into IKET metadata arrays and event code (``codegen``); outside a session
the events compile to nothing (``tl.h`` defines the macros empty). The instrumentation needs no
external symbol: it runs harmlessly without the IKET runtime, which reads it when profiling
(``profile_command``). See docs/iket.md.
"""

from .cli import output_dir, output_path, profile_command, set_output_dir, trace_files
from .frontend import (PayloadSpec, disable_runtime_payloads, enable_runtime_payloads, event_table, mark, payload,
                       range, range_end, range_pop, range_push, range_start, reset, runtime_payloads_enabled)
from .session import disable, enable, is_enabled, session

__all__ = ["PayloadSpec", "disable", "disable_runtime_payloads", "enable", "enable_runtime_payloads", "event_table",
           "is_enabled", "mark", "output_dir", "output_path", "payload", "profile_command", "range", "range_end",
           "range_pop", "range_push", "range_start", "reset", "runtime_payloads_enabled", "session",
           "set_output_dir", "trace_files"]
