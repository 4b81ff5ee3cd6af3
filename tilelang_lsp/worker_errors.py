"""Imported on both sides of the worker pipe: how a request to a worker can fail.

The parent's ``worker_client.WorkerClient`` raises them when a request runs past its time limit
or the worker process dies; the worker raises ``WorkerTimeout`` itself when the language
server's check service stops a load or build past its limit (``worker_check.time_limit``). The
checker ``Session`` turns both into diagnostics (TL0803, TL0003).
"""

from __future__ import annotations


class WorkerTimeout(Exception):
    """The request did not finish within its time limit (the worker was stopped)."""


class WorkerDied(Exception):
    """The worker process exited while serving a request (a crash in native code, an exit())."""
