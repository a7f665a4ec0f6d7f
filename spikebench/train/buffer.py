"""The metrics of one log interval, kept on the device and read back in one sync.

Each step adds a record whose values may be device tensors, and its non-finite flag;
:meth:`MetricsBuffer.flush` stacks every tensor (and the first bad step) into one
``tolist()``, so a GPU waits for the host once per ``train.log_every`` steps, not per step.
The buffer also keeps the trial's clock, from which evaluation time is excluded.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from spikebench import metrics as M


class MetricsBuffer:
    def __init__(self, device: torch.device):
        self.device = device
        self.pending: list[dict[str, Any]] = []
        self.bad: list[torch.Tensor] = []  # one device bool per pending record
        self.t0 = self.last_flush = time.perf_counter()
        self.tokens_at_flush = 0

    def add(self, record: dict[str, Any], bad: torch.Tensor) -> None:
        """Queue a step's record; ``bad`` (a device bool) marks a non-finite step."""
        # Kept, not combined: a step adds no device op here; flush finds the first.
        self.bad.append(bad)
        self.pending.append(record)

    def pause(self, seconds: float) -> None:
        """Take ``seconds`` (an evaluation) off the clock: AlgoPerf's convention."""
        self.t0 += seconds
        self.last_flush += seconds

    def resume(self, elapsed: float, tokens: int) -> None:
        """Continue a checkpointed run's clock from ``elapsed`` seconds, ``tokens`` in."""
        now = time.perf_counter()
        self.t0, self.last_flush, self.tokens_at_flush = now - elapsed, now, tokens

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def flush(self, tokens: int) -> tuple[list[dict[str, Any]], int | None]:
        """The pending records as host values, and the first non-finite step (None if none).

        Records after that step are dropped: the run ends there. ``tokens`` is the running
        token count, for the interval's tokens/s.
        """
        pending = self.pending
        keys = [(i, k) for i, rec in enumerate(pending) for k, v in rec.items()
                if isinstance(v, torch.Tensor)]
        # float64 keeps step numbers exact; the index of the first non-finite record rides
        # along (-1: none), so this is the only sync.
        flags = (torch.stack(self.bad) if self.bad
                 else torch.zeros(1, dtype=torch.bool, device=self.device))
        first = torch.where(flags.any(), flags.int().argmax(), -1)
        *values, first = torch.stack([pending[i][k].double() for i, k in keys]
                                     + [first.double()]).tolist()
        for (i, k), v in zip(keys, values, strict=True):
            pending[i][k] = v
        bad = pending[int(first)][M.STEP] if first >= 0 else -1
        now = time.perf_counter()
        rate = (tokens - self.tokens_at_flush) / max(now - self.last_flush, 1e-9)
        for rec in pending:
            rec[M.TOKENS_PER_S] = rate
        records = [r for r in pending if bad < 0 or r[M.STEP] <= bad]
        if records:  # after a divergence: when it was read back (steps do not sync)
            records[-1][M.ELAPSED_S] = now - self.t0
        self.pending, self.bad = [], []
        self.last_flush, self.tokens_at_flush = now, tokens
        return records, (bad if bad >= 0 else None)
