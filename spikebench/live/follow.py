"""Feeding the driver's (or a worker's) one registry from the logs its trials write.

Trials run in their own processes, so the sweep exports from one place: the process that
started them reads the new lines of each running trial's ``seed-*/metrics.jsonl`` every
``interval`` seconds and updates the :class:`~.exporter.Exporter`. One port per sweep, one
scrape target, and the trials pay nothing: they write those lines at their read-back
anyway. (One port per worker would need a scrape target per trial process.)
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from spikebench.live.exporter import Exporter


class Follower:
    def __init__(self, exporter: Exporter, trials_dir: Path, interval: float = 1.0):
        self.exporter = exporter
        self.trials_dir = Path(trials_dir)
        self.interval = interval
        self._offsets: dict[Path, int] = {}
        self._done: set[Path] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="metrics-follower", daemon=True)

    def start(self) -> Follower:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.poll()  # the last lines of trials that ended since the previous poll

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.poll()

    def poll(self) -> None:
        """Read what every unfinished trial's logs gained since the last poll."""
        if not self.trials_dir.is_dir():
            return
        for trial in sorted(self.trials_dir.iterdir()):
            if trial in self._done or not trial.is_dir():
                continue
            finished = (trial / "result.json").exists()
            arm = _arm(trial)
            for log in sorted(trial.glob("seed-*/metrics.jsonl")):
                self._read(log, trial.name.lstrip("0") or "0", arm)
            if finished:
                self._done.add(trial)

    def _read(self, log: Path, trial: str, arm: str) -> None:
        at = self._offsets.get(log, 0)
        try:
            with open(log, "rb") as f:
                f.seek(at)
                chunk = f.read()
        except OSError:
            return
        end = chunk.rfind(b"\n") + 1  # a line still being written waits for the next poll
        for line in chunk[:end].splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict):
                self.exporter.observe(rec, trial, arm, source=log)
        self._offsets[log] = at + end


def _arm(trial: Path) -> str:
    try:
        meta: Any = json.loads((trial / "trial.json").read_text())
    except (OSError, ValueError):
        return ""
    return str(meta.get("arm") or "") if isinstance(meta, dict) else ""
