"""Loading a sweep's results folder into plain records: the study, its trials, their folders.

``results/<study>/study.db`` is an Optuna SQLite storage holding one study (its name may
differ from the folder's); the study's user attributes hold the sweep definition (``spec``),
each trial's user attributes its arm and per-seed scores. Trial folders
(``trials/<number:05d>/seed-<n>/``) hold the logs; they are read lazily and tolerantly,
because a report of a half-finished or partly deleted sweep must still come out: a missing
or unreadable file is ``None``, never an exception.
"""

from __future__ import annotations

import json
import math
import warnings
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import optuna
import pandas as pd


class ReportError(ValueError):
    """A results folder that cannot be reported on; the message is one line for the user."""


@dataclass
class TrialRecord:
    """One Optuna trial with what the report needs; ``folder`` is None if it has none."""

    number: int
    state: str
    arm: str
    params: dict[str, Any]
    values: list[float] | None
    attrs: dict[str, Any]
    folder: Path | None
    duration_s: float | None

    @property
    def complete(self) -> bool:
        return self.state == "COMPLETE" and self.values is not None

    @property
    def per_seed(self) -> list[dict[str, Any]]:
        return list(self.attrs.get("per_seed") or [])

    def seed_values(self, key: str) -> dict[int, Any]:
        """``{seed: per_seed[key]}``; a seed without the key maps to None."""
        return {int(s["seed"]): s.get(key) for s in self.per_seed if "seed" in s}


@dataclass
class Study:
    """A loaded study: the sweep definition and every trial, in trial-number order."""

    name: str
    folder: Path
    storage_url: str
    spec: dict[str, Any]
    directions: list[str]
    trials: list[TrialRecord]
    user_attrs: dict[str, Any] = field(default_factory=dict)
    optuna_study: optuna.Study | None = field(default=None, repr=False)

    @property
    def arms(self) -> dict[str, dict[str, Any]]:
        return dict(self.spec.get("arms") or {})

    @property
    def seeds(self) -> list[int]:
        return list(self.spec.get("seeds") or [])

    @property
    def steps(self) -> int:
        return int(self.spec.get("steps") or 0)

    @property
    def objective(self) -> str:
        return self.spec.get("objective") or ("multi" if len(self.directions) > 1 else "single")

    @property
    def space(self) -> list[dict[str, Any]]:
        return list(self.spec.get("space") or [])

    def arm_trial(self, arm: str) -> TrialRecord | None:
        """The completed trial of a comparison arm; the latest one if a retry ran it twice."""
        done = [t for t in self.trials if t.arm == arm and t.complete]
        return done[-1] if done else None

    @cached_property
    def metas(self) -> dict[int, dict[str, Any]]:
        """``meta.json`` of the first seed folder of each trial that has one."""
        out = {}
        for t in self.trials:
            for seed_dir in seed_dirs(t):
                meta = read_json(seed_dir / "meta.json")
                if meta is not None:
                    out[t.number] = meta
                    break
        return out


def read_json(path: Path) -> dict[str, Any] | None:
    """A JSON object from ``path``, or None if missing, unreadable or not an object."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Rows of a JSONL log; a torn last line (a run killed mid-write) and blank or broken
    lines are skipped. Missing file: no rows."""
    rows = []
    try:
        with open(path) as f:
            for line in f:
                try:
                    row = json.loads(line)
                except ValueError:
                    continue
                if isinstance(row, dict):
                    rows.append(row)
    except OSError:
        return []
    return rows


def seed_dirs(trial: TrialRecord) -> list[Path]:
    """A trial's ``seed-<n>`` folders in seed order (numeric, so seed-10 after seed-9)."""
    if trial.folder is None:
        return []
    dirs = [p for p in trial.folder.glob("seed-*") if p.is_dir() and p.name[5:].isdigit()]
    return sorted(dirs, key=lambda p: int(p.name[5:]))


def _find_storage(results_dir: Path) -> Path:
    if not results_dir.exists():
        raise ReportError(f"{results_dir}: no such folder")
    if not results_dir.is_dir():
        raise ReportError(f"{results_dir}: not a folder (give results/<study>)")
    db = results_dir / "study.db"
    if not db.is_file():
        hint = ""
        subs = sorted(p.name for p in results_dir.glob("*/study.db"))
        if subs:
            hint = f" (studies below it: {', '.join(str(results_dir / s) for s in subs[:3])})"
        raise ReportError(f"{results_dir}: no study.db{hint}")
    return db


def _pick_study(names: list[str], folder: str, url_text: str) -> str:
    if not names:
        raise ReportError(f"{url_text}: no study in the storage")
    if len(names) == 1:
        return names[0]
    if folder in names:
        return folder
    raise ReportError(f"{url_text}: {len(names)} studies ({', '.join(sorted(names)[:5])}); "
                      "expected one, or one named like the folder")


def _trial_folder(results_dir: Path, t: optuna.trial.FrozenTrial) -> Path | None:
    # The folder's own layout first, so a results folder that was moved or copied still
    # finds its logs; the recorded path second (it may be relative to the sweep's cwd).
    own = results_dir / "trials" / f"{t.number:05d}"
    if own.is_dir():
        return own
    recorded = t.user_attrs.get("dir")
    if isinstance(recorded, str) and Path(recorded).is_dir():
        return Path(recorded)
    return None


def _record(results_dir: Path, t: optuna.trial.FrozenTrial) -> TrialRecord:
    duration = None
    if t.datetime_start is not None and t.datetime_complete is not None:
        duration = (t.datetime_complete - t.datetime_start).total_seconds()
    values = list(t.values) if t.values is not None else None
    if values is not None and not all(math.isfinite(v) for v in values):
        values = None
    return TrialRecord(
        number=t.number, state=t.state.name, arm=str(t.user_attrs.get("arm", "search")),
        params=dict(t.params), values=values, attrs=dict(t.user_attrs),
        folder=_trial_folder(results_dir, t), duration_s=duration)


def load_study(results_dir: str | Path) -> Study:
    """Open ``results_dir/study.db`` and load its single study and every trial.

    Raises :class:`ReportError` (one line) for a missing folder, a folder without
    ``study.db``, a storage that cannot be opened or holds no study, several studies none
    named like the folder, or a study with no trials. A study without a spikebench sweep
    definition is loaded with an empty ``spec`` (sections then say what is missing).
    """
    results_dir = Path(results_dir)
    db = _find_storage(results_dir)
    url = f"sqlite:///{db.resolve()}"
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # A sweep may be writing the file right now: wait for its lock, do not fail.
            storage = optuna.storages.RDBStorage(
                url, engine_kwargs={"connect_args": {"timeout": 60}})
            name = _pick_study(optuna.get_all_study_names(storage), results_dir.name, str(db))
            study = optuna.load_study(study_name=name, storage=storage)
            frozen = study.get_trials(deepcopy=False)
    except ReportError:
        raise
    except Exception as e:  # noqa: BLE001 - SQLAlchemy and Optuna errors vary
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise ReportError(f"{db}: cannot read the Optuna storage ({first})") from None
    if not frozen:
        raise ReportError(f"{results_dir}: study {name!r} has no trials yet")
    spec = study.user_attrs.get("spec")
    return Study(
        name=name, folder=results_dir, storage_url=url,
        spec=spec if isinstance(spec, dict) else {},
        directions=[d.name.lower() for d in study.directions],
        trials=[_record(results_dir, t) for t in sorted(frozen, key=lambda t: t.number)],
        user_attrs=dict(study.user_attrs), optuna_study=study)


def seed_log(trial: TrialRecord, seed: int) -> dict[str, Any] | None:
    """One seed's logs: metric rows, summary and meta (None where a file is missing), or
    None if the seed has no folder at all."""
    if trial.folder is None:
        return None
    d = trial.folder / f"seed-{seed}"
    if not d.is_dir():
        return None
    return {"rows": read_jsonl(d / "metrics.jsonl"), "summary": read_json(d / "summary.json"),
            "meta": read_json(d / "meta.json")}


def _median(xs: list[float]) -> float | None:
    xs = sorted(x for x in xs if isinstance(x, int | float) and math.isfinite(x))
    if not xs:
        return None
    h = len(xs) // 2
    return xs[h] if len(xs) % 2 else (xs[h - 1] + xs[h]) / 2


def trials_frame(study: Study) -> pd.DataFrame:
    """One row per trial: number, state, arm, each parameter, the objective values and the
    per-trial scores (medians over seeds). Columns a trial lacks are NaN/None.

    Parameter columns are named ``param:<name>`` so they can never collide with a score
    column, whatever the search space calls its keys.
    """
    rows = []
    for t in study.trials:
        a = t.attrs
        row: dict[str, Any] = {
            "number": t.number, "state": t.state, "arm": t.arm,
            "spikes": a.get("spikes"), "convergence": a.get("convergence"),
            "events_median": a.get("n_events_median"),
            "diverged_seeds": a.get("diverged_seeds"), "reached_seeds": a.get("reached_seeds"),
            "seeds": a.get("seeds"),
            "final_loss_median": _median([s.get("final_val_loss") for s in t.per_seed]),
            "duration_s": t.duration_s,
            "note": a.get("error") or a.get("cause") or "",
        }
        for i, v in enumerate(t.values or []):
            row[f"value{i}"] = v
        for k, v in t.params.items():
            row[f"param:{k}"] = v
        rows.append(row)
    return pd.DataFrame(rows)
