"""Loading a sweep's results folder into records: the study, its sweep spec, its trials.

``results/<study>/study.db`` holds one Optuna study; its user attributes hold the sweep spec,
read back through the driver's own :class:`~spikebench.sweep.spec.SweepSpec`, so the report
and the sweep cannot disagree on what a field means. Trial folders are read lazily and
tolerantly: a report of a half-finished or partly deleted sweep must still come out.
"""

from __future__ import annotations

import json
import statistics
import warnings
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import optuna
import pandas as pd

from spikebench.errors import UserError
from spikebench.sweep.spec import Param, SweepSpec
from spikebench.values import finite


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

    def by_seed(self) -> dict[int, dict[str, Any]]:
        """Each seed's scores (``per_seed`` entry) by seed number, in recorded order."""
        return {int(s["seed"]): s for s in self.per_seed if "seed" in s}

    @property
    def final_loss_median(self) -> float | None:
        """Median final validation loss over the seeds that have one (None: no seed has)."""
        finals = [s.get("final_val_loss") for s in self.per_seed
                  if finite(s.get("final_val_loss"))]
        return statistics.median(finals) if finals else None


@dataclass
class Study:
    """A loaded study: the sweep spec and every trial, in trial-number order.

    ``spec`` is None when the study has no readable spikebench sweep spec (a plain Optuna
    study, or one stored by a version with other fields); ``spec_problem`` then says why
    when there was one that could not be read. The properties read as empty without a spec.
    """

    name: str
    folder: Path
    storage_url: str
    spec: SweepSpec | None
    directions: list[str]
    trials: list[TrialRecord]
    user_attrs: dict[str, Any] = field(default_factory=dict)
    optuna_study: optuna.Study | None = field(default=None, repr=False)
    spec_problem: str = ""

    @property
    def arms(self) -> dict[str, dict[str, Any]]:
        return dict(self.spec.arms) if self.spec else {}

    @property
    def seeds(self) -> list[int]:
        return list(self.spec.seeds) if self.spec else []

    @property
    def steps(self) -> int:
        return int(self.spec.steps or 0) if self.spec else 0

    @property
    def objective(self) -> str:
        if self.spec and self.spec.objective:
            return self.spec.objective
        return "multi" if len(self.directions) > 1 else "single"

    @property
    def space(self) -> list[Param]:
        return list(self.spec.space) if self.spec else []

    @property
    def base(self) -> dict[str, Any]:
        return dict(self.spec.base) if self.spec else {}

    @property
    def spike_metric(self) -> str:
        return self.spec.spike_metric if self.spec else "severity"

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
        raise UserError(f"{results_dir}: no such folder")
    if not results_dir.is_dir():
        raise UserError(f"{results_dir}: not a folder (give results/<study>)")
    db = results_dir / "study.db"
    if not db.is_file():
        hint = ""
        subs = sorted(p.name for p in results_dir.glob("*/study.db"))
        if subs:
            hint = f" (studies below it: {', '.join(str(results_dir / s) for s in subs[:3])})"
        raise UserError(f"{results_dir}: no study.db{hint}")
    return db


def _pick_study(names: list[str], folder: str, url_text: str) -> str:
    if not names:
        raise UserError(f"{url_text}: no study in the storage")
    if len(names) == 1:
        return names[0]
    if folder in names:
        return folder
    raise UserError(f"{url_text}: {len(names)} studies ({', '.join(sorted(names)[:5])}); "
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
    if values is not None and not all(finite(v) for v in values):
        values = None
    return TrialRecord(
        number=t.number, state=t.state.name, arm=str(t.user_attrs.get("arm", "search")),
        params=dict(t.params), values=values, attrs=dict(t.user_attrs),
        folder=_trial_folder(results_dir, t), duration_s=duration)


def load_study(results_dir: str | Path) -> Study:
    """Open ``results_dir/study.db`` and load its single study and every trial.

    Raises :class:`UserError` (one line) for a missing folder, a folder without
    ``study.db``, a storage that cannot be opened or holds no study, several studies none
    named like the folder, or a study with no trials. A study without a readable spikebench
    sweep spec is loaded with ``spec=None`` (sections then say what is missing).
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
    except UserError:
        raise
    except Exception as e:  # noqa: BLE001 - SQLAlchemy and Optuna errors vary
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise UserError(f"{db}: cannot read the Optuna storage ({first})") from None
    if not frozen:
        raise UserError(f"{results_dir}: study {name!r} has no trials yet")
    spec, problem = _read_spec(study.user_attrs.get("spec"))
    return Study(
        name=name, folder=results_dir, storage_url=url, spec=spec,
        directions=[d.name.lower() for d in study.directions],
        trials=[_record(results_dir, t) for t in sorted(frozen, key=lambda t: t.number)],
        user_attrs=dict(study.user_attrs), optuna_study=study, spec_problem=problem)


def _read_spec(stored: Any) -> tuple[SweepSpec | None, str]:
    """The stored sweep spec and "", or None and why it cannot be read ("" if there is none)."""
    if not isinstance(stored, dict) or not stored:
        return None, ""
    try:
        return SweepSpec.from_dict(stored), ""
    except (TypeError, KeyError, ValueError, AttributeError) as e:
        first = (str(e).strip().splitlines() or [""])[0]
        return None, type(e).__name__ + (f": {first}" if first else "")


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
            "final_loss_median": t.final_loss_median,
            "duration_s": t.duration_s,
            "note": a.get("error") or a.get("cause") or "",
        }
        for i, v in enumerate(t.values or []):
            row[f"value{i}"] = v
        for k, v in t.params.items():
            row[f"param:{k}"] = v
        rows.append(row)
    return pd.DataFrame(rows)
