"""Where per-step metric dicts go: a JSONL file, a progress bar, anything with ``write``.

The trainer hands every sink one flat dict per step (``{"step": 12, "train/loss": 2.41,
"optim/grad_norm": 0.83, ...}``), in step order, once per log interval, as host floats.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from spikebench import metrics as M


class Sink:
    """Receives flat per-step metric dicts. Subclasses override what they need."""

    def start(self, run: dict[str, Any]) -> None:  # noqa: B027 - optional override
        """Once, before the first step: the run's ``meta.json`` plus ``run_dir``."""

    def write(self, metrics: dict[str, Any]) -> None:  # noqa: B027 - optional override
        pass

    def close(self, summary: dict[str, Any] | None = None) -> None:  # noqa: B027
        pass


class JsonlSink(Sink):
    """Appends to ``<path>.partial`` and renames it to ``path`` on close, so a reader never
    mistakes the log of a killed run for a finished one."""

    def __init__(self, path: str | Path, resume_at: int | None = None):
        """``resume_at``: continue a killed run's log, cut back to that many bytes (what
        its checkpoint had logged), so no row is written twice."""
        self.path = Path(path)
        self.partial = self.path.with_name(self.path.name + ".partial")
        if resume_at is not None:
            os.truncate(self.partial, resume_at)
        self._f = open(self.partial, "a" if resume_at is not None else "w")  # noqa: SIM115

    def write(self, metrics: dict[str, Any]) -> None:
        self._f.write(json.dumps(metrics, allow_nan=True) + "\n")

    def flush(self) -> None:
        """Hand the rows written so far to the OS (no fsync), so a live reader sees them."""
        self._f.flush()

    def sync(self) -> int:
        """Flush to disk; returns the log's size in bytes (a checkpoint records it)."""
        self._f.flush()
        os.fsync(self._f.fileno())
        return os.fstat(self._f.fileno()).st_size

    def close(self, summary: dict[str, Any] | None = None) -> None:
        self._f.flush()
        os.fsync(self._f.fileno())
        self._f.close()
        os.replace(self.partial, self.path)


class ProgressBar(Sink):
    """A one-line bar on stderr when it is a terminal; a line per 10% otherwise."""

    def __init__(self, total_steps: int, label: str = "train", stream=None):
        self.total = total_steps
        self.label = label
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.t0 = time.perf_counter()
        self._next_line = 0.1
        self._last: dict[str, Any] = {}

    def start(self, run: dict[str, Any]) -> None:
        # Every line names the precision, so an emulated run never passes for a real one.
        self.label = f"{self.label} [{run['precision']}]"
        self.stream.write(f"{self.label}: {run['n_params']:,} parameters on "
                          f"{run['environment']['device']}, writing {run['run_dir']}\n")

    def write(self, metrics: dict[str, Any]) -> None:
        if M.TRAIN_LOSS in metrics:
            self._last = metrics
        step = metrics.get(M.STEP, 0)
        frac = step / max(1, self.total)
        loss = self._last.get(M.TRAIN_LOSS, float("nan"))
        val = metrics.get(M.VAL_LOSS)
        text = f"{self.label} {step}/{self.total} loss {loss:.3f}"
        if val is not None:
            text += f" val {val:.3f}"
        if self.tty:
            width = 24
            fill = int(width * frac)
            bar = "#" * fill + "." * (width - fill)
            elapsed = time.perf_counter() - self.t0
            self.stream.write(f"\r[{bar}] {text} {elapsed:.0f}s ")
            self.stream.flush()
        elif frac >= self._next_line or val is not None and step == self.total:
            self._next_line = (int(frac * 10) + 1) / 10
            self.stream.write(text + "\n")

    def close(self, summary: dict[str, Any] | None = None) -> None:
        if self.tty:
            self.stream.write("\n")
        if summary:
            final = summary.get("final_val_loss")
            if summary.get("status") == "diverged":
                text = (f"diverged at step {summary.get('diverged_step')} (non-finite loss "
                        "or gradient norm)")
            else:
                text = f"{summary.get('status')} after {summary.get('steps')} steps"
            if final is not None:
                text += f", final val loss {final:.4f}"
            self.stream.write(f"{self.label}: {text}\n")
        self.stream.flush()
