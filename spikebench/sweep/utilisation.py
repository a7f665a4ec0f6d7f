"""Sweep utilisation: the share of worker-seconds spent training.

``train_s / (workers x wall)``, where ``train_s`` sums the training clocks of the seeds the
sweep's trials ran (evaluation and checkpoints are off those clocks, as AlgoPerf counts
them). The rest is trial start-up, evaluation, checkpoints, and workers idle while the last
trials run alone.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import NamedTuple

from spikebench import metrics as M
from spikebench.study import layout as L


class Utilisation(NamedTuple):
    share: float  # train_s / (workers * wall_s)
    train_s: float
    workers: int
    wall_s: float

    def line(self) -> str:
        return (f"utilisation: {self.share:.1%} of {self.workers} worker(s) x "
                f"{self.wall_s:.0f} s spent training ({self.train_s:.0f} s); the rest is "
                "trial start-up, evaluation, checkpoints and idle workers")


def training_seconds(trial_dir: Path) -> float:
    """The training seconds of the seeds this trial trained: each finished seed's summary,
    else the last logged clock of a seed that was pruned or failed. Seeds it took over
    finished from a trial it retries count nothing; one it resumed counts its whole clock,
    the interrupted trial's part included (a small overcount, on retries only)."""
    try:
        carried = json.loads((trial_dir / L.TRIAL_JSON).read_text()).get("carried_over", {})
    except (OSError, ValueError):
        return 0.0
    total = 0.0
    for seed_dir in trial_dir.glob(L.SEED_PREFIX + "*"):
        if carried.get(seed_dir.name.removeprefix("seed-")) == "done":
            continue
        summary = seed_dir / L.SUMMARY_JSON
        if summary.is_file():
            total += float(json.loads(summary.read_text()).get("seconds") or 0.0)
            continue
        total += _last_clock(seed_dir / L.PARTIAL)
    return total


def _last_clock(log: Path) -> float:
    if not log.is_file():
        return 0.0
    last = 0.0
    for line in log.read_text(errors="replace").splitlines():
        try:
            last = float(json.loads(line).get(M.ELAPSED_S, last))
        except (ValueError, TypeError, AttributeError):
            continue  # a line cut short by the kill
    return last


def measure(trial_dirs: list[Path], workers: int, wall_s: float) -> Utilisation:
    train_s = sum(training_seconds(d) for d in trial_dirs)
    share = train_s / (workers * wall_s) if workers and wall_s > 0 else 0.0
    return Utilisation(share, train_s, workers, wall_s)
