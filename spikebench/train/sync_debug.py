"""Checking the no-sync claim on CUDA: between read-backs, a host sync is an error.

With ``SPIKEBENCH_SYNC_DEBUG=error`` (or ``warn``) the built-in loop runs its training
steps under ``torch.cuda.set_sync_debug_mode``: any operation that waits for the GPU
(``.item()``, ``float(t)``, a blocking copy to the host, ``nonzero``...) raises (or warns)
there, naming the line. The mode is lifted for what is meant to sync: the read-back every
``train.log_every`` steps, evaluation, checkpoints and a rollback's restore, and at the
end of the run. Ignored off CUDA (torch has no sync to check there).
``benchmarks/gpu_check.py`` runs it, and arms the same guard around the run API's
``log()`` calls that do not read back.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator

from spikebench.errors import UserError

ENV = "SPIKEBENCH_SYNC_DEBUG"
MODES = ("error", "warn")


def _set_mode(mode: str) -> None:
    import torch

    torch.cuda.set_sync_debug_mode(mode)


class SyncDebug:
    """Arms ``set_sync_debug_mode(mode)`` between read-backs; ``setter`` is torch's (a test
    passes a recorder). ``mode`` None: off, every method does nothing."""

    def __init__(self, mode: str | None, setter: Callable[[str], None] = _set_mode):
        if mode is not None and mode not in MODES:
            raise UserError(f"{ENV}={mode!r}: must be one of {', '.join(MODES)} (or unset)")
        self.mode = mode
        self.armed = False
        self._set = setter

    @classmethod
    def from_env(cls, device_type: str, env: dict | None = None) -> SyncDebug:
        """The guard ``SPIKEBENCH_SYNC_DEBUG`` asks for, on CUDA; off elsewhere."""
        mode = (os.environ if env is None else env).get(ENV, "").strip() or None
        guard = cls(mode)  # a bad value is refused on any device
        if device_type != "cuda":
            guard.mode = None
        return guard

    def arm(self) -> None:
        if self.mode is not None and not self.armed:
            self._set(self.mode)
            self.armed = True

    def disarm(self) -> None:
        if self.armed:
            self.armed = False
            self._set("default")

    @contextlib.contextmanager
    def armed_for(self) -> Iterator[None]:
        """Armed inside, as it was after (also when the body raises)."""
        was = self.armed
        self.arm()
        try:
            yield
        finally:
            if not was:
                self.disarm()

    @contextlib.contextmanager
    def lifted(self) -> Iterator[None]:
        """Disarmed inside (a read-back), as it was after."""
        was = self.armed
        self.disarm()
        try:
            yield
        finally:
            if was:
                self.arm()
