"""Both sides of one forked lowering: the parent forks and reads the pipe, the child lowers and writes it.

Contract:
- ``LoweringChild.fork(func, compile_args, lower, reason)`` forks a child that runs
  ``lower(func, compile_args)`` (``build.lower_cached``, i.e. ``tilelang.jit.lower_for_compile``:
  the kernel cache's key and the artifact, loaded from the cache or freshly lowered) and sends back
  the pickled result; ``reason(exc)`` is the one-line reason of a failure (``build.reason_of``).
  The child inherits ``func`` through the fork (a PrimFunc cannot be pickled) and leaves with
  ``os._exit`` (no atexit handler runs; stdout and stderr are flushed in the parent before the
  fork and in the child before it leaves, so nothing is written twice or lost).  Call ``fork`` holding
  ``LOWER_LOCK``: no other thread of the parent is inside TVM then, so the child finds TVM's
  state consistent.
- The child must not touch CUDA: the parent may hold a CUDA context, which a forked child
  cannot use.  So ``compile_args["target"]`` must be an arch string already
  (``normalize_target`` runs in the parent), and the factory has run in the parent.
- ``wait()`` blocks until the child has exited and reaps it; it returns ``("ok", key, artifact)``,
  ``("failed", reason)`` (the lowering raised: ``reason_of``'s one line, as the serial path
  gives it), ``("retry", reason)`` (a failure that may come from running in a forked child,
  such as an error naming CUDA or an artifact that does not pickle: lower in the parent) or
  ``("died", reason)`` (the child crashed or was killed before it had answered).  Warnings the
  lowering emits travel with the answer and are emitted again in the parent (so its filters
  and ``catch_warnings`` see them).
- ``kill()`` sends SIGKILL unless the child has been reaped (never a recycled pid); ``wait()``
  still has to reap it.
"""

from __future__ import annotations

import os
import pickle
import signal
import sys
import threading
import warnings


class LoweringChild:
    """A forked process lowering one config (see the module docstring)."""

    def __init__(self, pid: int, read_fd: int):
        self.pid = pid
        self._read_fd = read_fd
        self._lock = threading.Lock()
        self._reaped = False

    @classmethod
    def fork(cls, func, compile_args: dict, lower, reason) -> "LoweringChild":
        """Fork a child lowering ``func``; raises OSError when no process can be made."""
        _flush_stdio()  # else the child would write the parent's pending output a second time
        read_fd, write_fd = os.pipe()
        try:
            with warnings.catch_warnings():
                # Python 3.12 warns on any fork of a process with threads; LOWER_LOCK is held
                # here, so no other thread is inside TVM, the state the child relies on.
                warnings.simplefilter("ignore", DeprecationWarning)
                pid = os.fork()
        except OSError:
            os.close(read_fd)
            os.close(write_fd)
            raise
        if pid == 0:  # the child: never returns
            os.close(read_fd)
            _child_main(func, compile_args, write_fd, lower, reason)
        os.close(write_fd)
        return cls(pid, read_fd)

    def wait(self) -> tuple:
        """The child's answer, once it has exited (see the module docstring)."""
        chunks = []
        try:
            while True:
                chunk = os.read(self._read_fd, 1 << 20)
                if not chunk:
                    break
                chunks.append(chunk)
        finally:
            os.close(self._read_fd)
        with self._lock:
            try:
                _, status = os.waitpid(self.pid, 0)
            except ChildProcessError:  # reaped already (SIGCHLD ignored): the answer still counts
                status = 0
            self._reaped = True
        try:
            answer, caught = pickle.loads(b"".join(chunks))
        except Exception:  # noqa: BLE001 - nothing or half an answer: the child died
            return ("died", _death(status))
        for message, category, filename, lineno in caught:
            warnings.warn_explicit(message, category, filename, lineno)
        return answer

    @property
    def reaped(self) -> bool:
        """Whether ``wait`` has reaped the child (no zombie left)."""
        return self._reaped

    def kill(self) -> None:
        with self._lock:
            if not self._reaped:
                try:
                    os.kill(self.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


def _child_main(func, compile_args: dict, write_fd: int, lower, reason) -> None:
    """Lower, write the answer, and leave (``os._exit``) whatever happens."""
    code = 1
    try:
        with warnings.catch_warnings(record=True) as caught:
            answer = _lower(func, compile_args, lower, reason)
        payload = _pickled(answer, [_portable(w) for w in caught])
        view = memoryview(payload)
        while view:
            view = view[os.write(write_fd, view):]
        code = 0
    finally:
        try:
            _flush_stdio()
        finally:
            os._exit(code)


def _flush_stdio() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):  # None, or closed
            pass


def _lower(func, compile_args: dict, lower, reason) -> tuple:
    from tilelang.diagnostics import TileLangCompileError

    try:
        key, artifact = lower(func, compile_args)
    except BaseException as e:  # noqa: BLE001 - every failure becomes an answer
        cuda = "cuda" in str(e).lower() and not isinstance(e, (TileLangCompileError, AssertionError))
        return ("retry" if cuda else "failed", reason(e))
    return ("ok", key, artifact)


def _pickled(answer: tuple, caught: list) -> bytes:
    try:
        return pickle.dumps((answer, caught))
    except Exception as e:  # noqa: BLE001 - an artifact that cannot travel: the parent lowers it
        return pickle.dumps((("retry", f"the artifact cannot be sent back: {type(e).__name__}: {e}"), []))


def _portable(w: warnings.WarningMessage) -> tuple:
    """A caught warning as (message, category, filename, lineno), all of which pickle."""
    try:
        pickle.dumps((w.message, w.category))
        return (w.message, w.category, w.filename, w.lineno)
    except Exception:  # noqa: BLE001 - an exotic warning class: its text as a RuntimeWarning
        return (str(w.message), RuntimeWarning, w.filename, w.lineno)


def _death(status: int) -> str:
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        return f"the lowering process died ({name})"
    return f"the lowering process exited with status {os.waitstatus_to_exitcode(status)} without an answer"
