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
from contextlib import suppress
from pathlib import Path
from typing import Any

from spikebench.live.exporter import Exporter
from spikebench.runs.tail import Lines
from spikebench.study import layout as L


class Follower:
    def __init__(self, exporter: Exporter, trials_dir: Path, interval: float = 1.0):
        self.exporter = exporter
        self.trials_dir = Path(trials_dir)
        self.interval = interval
        self._lines: dict[Path, Lines] = {}  # each seed folder's log, as read so far
        self._done: set[Path] = set()
        self._arms: dict[Path, str] = {}  # trial folder -> arm, read once from trial.json
        self._lock = threading.Lock()  # one poll at a time (the thread, and stop())
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="metrics-follower", daemon=True)

    def start(self) -> Follower:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        with suppress(RuntimeError):  # never started
            self._thread.join()
        self.poll()  # the last lines of trials that ended since the previous poll

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.poll()

    def poll(self) -> None:
        """Read what every unfinished trial's logs gained since the last poll."""
        with self._lock:
            if not self.trials_dir.is_dir():
                return
            for trial in sorted(self.trials_dir.iterdir()):
                if trial in self._done or not trial.is_dir():
                    continue
                finished = (trial / L.RESULT_JSON).exists()
                arm = self._arms.get(trial) or self._arms.setdefault(trial, _arm(trial))
                for seed in sorted(trial.glob(L.SEED_PREFIX + "*")):
                    self._read(seed, trial.name.lstrip("0") or "0", arm)
                if finished:
                    self._done.add(trial)

    def _read(self, seed: Path, trial: str, arm: str) -> None:
        """A running seed writes ``metrics.jsonl.partial`` and renames it to
        ``metrics.jsonl`` when it ends (the same bytes), so one tail serves both; a
        resumed run cuts its log back, and then it is read again from the start."""
        lines = self._lines.get(seed) or self._lines.setdefault(
            seed, Lines(seed / L.METRICS, before=seed / L.PARTIAL))
        for line in lines.read():  # a line still being written waits for the next poll
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict):
                self.exporter.observe(rec, trial, arm, source=seed)


def _arm(trial: Path) -> str:
    try:
        meta: Any = json.loads((trial / L.TRIAL_JSON).read_text())
    except (OSError, ValueError):
        return ""
    return str(meta.get("arm") or "") if isinstance(meta, dict) else ""
