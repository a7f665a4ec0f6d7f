"""Telling a real Ctrl-C from a ``KeyboardInterrupt`` that a user's code raised itself.

Both reach Python as the same exception. A command that imports a team's module must say
"interrupted" (exit 130) for the first and name the module for the second, so while the
module runs a SIGINT handler notes that the signal really came."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator


@contextlib.contextmanager
def sigint_seen() -> Iterator[list[bool]]:
    """A list that holds True once a SIGINT arrived inside the block (empty otherwise).
    Off the main thread no handler can be set: the list is then always [True], so every
    KeyboardInterrupt there is taken as real."""
    seen: list[bool] = []
    if threading.current_thread() is not threading.main_thread():
        seen.append(True)
        yield seen
        return

    def on_sigint(signum: int, frame: object) -> None:
        seen.append(True)
        if callable(previous):  # Python's default raises KeyboardInterrupt; others decide
            previous(signum, frame)

    previous = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, on_sigint)
    try:
        yield seen
    finally:
        signal.signal(signal.SIGINT, previous)
