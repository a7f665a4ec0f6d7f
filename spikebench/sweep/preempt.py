"""A worker told to stop by a signal: SIGTERM (Slurm's time limit, a preemption, ``scancel``,
``scontrol requeue``) or SIGUSR1 (``sbatch --signal=USR1@...``), where Python's default
would end the process at once and leave its trial RUNNING until its heartbeat went stale.

Inside :meth:`Stop.interruptible` (a trial training, an idle wait) the signal raises
``KeyboardInterrupt``, so the worker's own interrupted path runs: its trial is given back to
the study, not counted, and its processes killed. Elsewhere (asking for a trial, telling
one) it is only noted, and the worker stops at its next :meth:`Stop.check`: a trial being
created or told is never cut in half. A second signal while stopping is noted, not raised.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

SIGNALS = (signal.SIGTERM, signal.SIGUSR1)


class Stop:
    def __init__(self) -> None:
        self.signal: int | None = None  # the first signal received
        self._raising = False
        self._old: dict[int, object] = {}
        # Handlers can be set only from the main thread (a test may run a worker in another).
        if threading.current_thread() is threading.main_thread():
            self._old = {s: signal.signal(s, self._on_signal) for s in SIGNALS}

    def _on_signal(self, signum: int, frame: object) -> None:
        first = self.signal is None
        if first:
            self.signal = signum
        if first and self._raising:
            self._raising = False
            raise KeyboardInterrupt(signal.Signals(signum).name)

    @contextmanager
    def interruptible(self) -> Iterator[None]:
        """Where a signal may cut in: the work in here is given back when it does."""
        self.check()
        self._raising = True
        try:
            yield
        finally:
            self._raising = False

    def check(self) -> None:
        """Stop (``KeyboardInterrupt``) if a signal came while it could not cut in."""
        if self.signal is not None:
            raise KeyboardInterrupt(signal.Signals(self.signal).name)

    def restore(self) -> None:
        for s, old in self._old.items():
            signal.signal(s, old)
        self._old = {}
