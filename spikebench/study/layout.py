"""The names and shapes of a study's files, defined once.

A study's results folder::

    <results>/<study>/study.db            the Optuna storage (SQLite; absent on a server's)
    <results>/<study>/.lock               held by the one driver of this folder
    <results>/<study>/trials/00012/       one trial: trial.json, result.json, stderr.log
    <results>/<study>/trials/00012/seed-3 one run: config.json, meta.json, metrics.jsonl,
                                          summary.json (a killed run: metrics.jsonl.partial)

The records a finished trial leaves in the storage itself (trial system attributes named
``spikebench:...``) are named in :mod:`spikebench.study.records`. Every module that reads or
writes these names takes them from here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

STUDY_DB = "study.db"
LOCK = ".lock"
TRIALS = "trials"
# In a trial's folder.
TRIAL_JSON = "trial.json"
RESULT_JSON = "result.json"
STDERR = "stderr.log"
STDOUT = "stdout.log"
PRUNE = "prune"  # made by the sweep when it prunes a command trial: the run API sees it
# In a seed's (a run's) folder.
SEED_PREFIX = "seed-"
CONFIG_JSON = "config.json"
META_JSON = "meta.json"
METRICS = "metrics.jsonl"
PARTIAL = METRICS + ".partial"  # a run still writing, or killed: renamed when it ends
SUMMARY_JSON = "summary.json"


def trial_name(number: int) -> str:
    return f"{number:05d}"


def seed_name(seed: int) -> str:
    return f"{SEED_PREFIX}{seed}"


def seed_number(path: Path | str) -> int | None:
    """``seed-12`` -> 12; None for any other name."""
    digits = Path(path).name.removeprefix(SEED_PREFIX)
    if Path(path).name.startswith(SEED_PREFIX) and digits.isascii() and digits.isdigit():
        return int(digits)
    return None


def seed_dirs(trial_dir: Path | None) -> list[Path]:
    """A trial's ``seed-<n>`` folders in seed order (numeric, so seed-10 after seed-9)."""
    if trial_dir is None:
        return []
    dirs = [p for p in trial_dir.glob(SEED_PREFIX + "*")
            if seed_number(p) is not None and p.is_dir()]
    return sorted(dirs, key=lambda p: seed_number(p) or 0)


@dataclass(frozen=True)
class StudyLayout:
    """Where a study's files are: ``StudyLayout(Path("results") / "default")``."""

    folder: Path

    @classmethod
    def of(cls, results: Path | str, study: str) -> StudyLayout:
        return cls(Path(results) / study)

    @property
    def db(self) -> Path:
        return self.folder / STUDY_DB

    @property
    def lock(self) -> Path:
        return self.folder / LOCK

    @property
    def trials(self) -> Path:
        return self.folder / TRIALS

    def trial(self, number: int) -> Path:
        return self.trials / trial_name(number)

    def seed(self, number: int, seed: int) -> Path:
        return self.trial(number) / seed_name(seed)
