"""Loading a study into records: the study, its sweep spec, its trials.

From a results folder, ``results/<study>/study.db`` holds one Optuna study, opened
read-only, and the trial folders beside it hold the logs; from a storage URL
(:func:`load_study_from_storage`), the records each trial left in the storage stand in for
its folder (:mod:`spikebench.study.records`). The study's user attributes hold the sweep
spec, read through the driver's own :class:`~spikebench.sweep.spec.SweepSpec` so report and
sweep agree on each field. Trial files are read lazily and tolerantly: each value is fitted
to the shape sections read (:data:`ATTRS`, :data:`SUMMARY`, :data:`META`), and one that does
not fit is dropped and noted in its trial's ``damaged``, never raised.
"""

from __future__ import annotations

import sqlite3
import statistics
import warnings
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import optuna
import pandas as pd

from spikebench.errors import UserError
from spikebench.report.files import read_object, read_rows
from spikebench.report.shapes import (
    ATTRS,
    BAD,
    JOB,
    META,
    SPEC,
    SUMMARY,
    fit,
)
from spikebench.report.storage import check_storage, find_storage, read_only
from spikebench.study import layout as L
from spikebench.study.records import StoredTrial
from spikebench.study.records import load as load_records
from spikebench.sweep.spec import Param, SweepSpec
from spikebench.values import finite


@dataclass
class TrialRecord:
    """One Optuna trial with what the report needs; ``folder`` is None if it has none (or
    cannot be seen from here), and then ``stored`` (its records in the storage) stands in."""

    number: int
    state: str
    arm: str
    params: dict[str, Any]
    values: list[float] | None
    attrs: dict[str, Any]
    folder: Path | None
    duration_s: float | None
    # What was dropped as damaged, e.g. 'seed-0/summary.json: spikes = "x" is not a table';
    # a seed's files add theirs when they are first read.
    damaged: list[str] = field(default_factory=list)
    stored: StoredTrial | None = None

    def note(self, problems: list[str]) -> None:
        self.damaged.extend(p for p in problems if p not in self.damaged)

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
    study, one stored by a version with other fields, or one with a field of the wrong type);
    ``spec_problem`` then says why when there was one. The properties read as empty without
    a spec.
    """

    name: str
    folder: Path | None
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
    def own_trainer(self) -> bool:
        """The trials ran a team's own command (a ``[trainer]``): their parameters are its
        own, so spikebench cannot tell which is the LR or what a strategy switched."""
        return bool(self.spec and self.spec.trainer)

    @property
    def compare(self) -> dict[str, Any] | None:
        """What ``spikebench compare`` recorded when it imported runs read from disk as this
        study (groups, baseline, recipe, pairing, what was cut); None for a sweep's study."""
        c = self.user_attrs.get("compare")
        return c if isinstance(c, dict) and isinstance(c.get("baseline"), str) else None

    @property
    def baseline_arm(self) -> str:
        """The arm every other is compared with: ``baseline``, or the group a comparison of
        runs names (``spikebench compare --baseline``)."""
        c = self.compare
        return c["baseline"] if c else "baseline"

    @property
    def recipe_arm(self) -> str | None:
        """The arm the article's claims are tested on: ``recipe``, or the group a
        comparison of runs names (``--recipe``); None where there is none."""
        c = self.compare
        if c is not None:
            r = c.get("recipe")
            return r if isinstance(r, str) and r in self.arms else None
        return "recipe" if "recipe" in self.arms else None

    def paired(self, arm: str) -> bool:
        """Whether ``arm`` is compared with the baseline seed by seed. A sweep's arms run on
        the same seeds; a group of runs read from disk is paired only where
        ``spikebench compare`` matched every run of it and of the baseline by a known seed."""
        c = self.compare
        if c is None:
            return True
        entry = (c.get("pairing") if isinstance(c.get("pairing"), dict) else {}).get(arm)
        return isinstance(entry, dict) and entry.get("paired") is True

    @property
    def spike_metric(self) -> str:
        return self.spec.spike_metric if self.spec else "severity"

    @property
    def damaged(self) -> list[str]:
        """Every trial's damage notes so far, as ``trial <n>: <note>`` lines."""
        return [f"trial {t.number}: {d}" for t in self.trials for d in t.damaged]

    def arm_trial(self, arm: str) -> TrialRecord | None:
        """The completed trial of a comparison arm; the latest one if a retry ran it twice."""
        done = [t for t in self.trials if t.arm == arm and t.complete]
        return done[-1] if done else None

    @cached_property
    def metas(self) -> dict[int, dict[str, Any]]:
        """``meta.json`` of the first seed folder of each trial that has a readable one."""
        out = {}
        for t in self.trials:
            for seed in trial_seed_numbers(t):
                meta = _trial_file(t, f"{L.seed_name(seed)}/{L.META_JSON}", META)
                if meta is not None:
                    out[t.number] = meta
                    break
        return out

    @property
    def source(self) -> str:
        """Where the study was read from, for the report's opening line."""
        return f"Results folder {self.folder}" if self.folder is not None else (
            f"Storage {self.storage_url}, study {self.name}")


def _trial_file(trial: TrialRecord, name: str, shape: dict) -> dict | None:
    """A JSON file of the trial's folder (``name`` relative to it) fitted to ``shape``, its
    damage noted on ``trial``; None where it is missing or unreadable."""
    if trial.folder is None:
        return _stored_file(trial, name, shape)
    data, problem = read_object(trial.folder / name)
    notes = [problem] if problem else []
    if data is not None:
        data = fit(data, shape, "", notes)
    trial.note([f"{name}: {n}" for n in notes])
    return data


def _stored_file(trial: TrialRecord, name: str, shape: dict) -> dict | None:
    """What the storage holds of the trial's file ``name`` (``trial.json``,
    ``seed-<n>/summary.json`` or ``seed-<n>/meta.json``), fitted to ``shape``."""
    st = trial.stored
    if st is None:
        return None
    if name == L.TRIAL_JSON:
        data = st.job
    else:
        seed_dir, _, file = name.partition("/")
        rec = st.seeds.get(L.seed_number(seed_dir)) or {}
        data = rec.get({L.SUMMARY_JSON: "summary", L.META_JSON: "meta"}.get(file, ""))
    if not isinstance(data, dict):
        return None
    notes: list[str] = []
    data = fit(data, shape, "", notes)
    trial.note([f"{name} (stored): {n}" for n in notes])
    return data


def trial_job(trial: TrialRecord) -> dict[str, Any] | None:
    """The trial's ``trial.json`` (its resolved config), with ``config.spikes`` a table."""
    return _trial_file(trial, L.TRIAL_JSON, JOB)


def seed_metas(trial: TrialRecord) -> list[dict[str, Any]]:
    """Every readable ``seed-<n>/meta.json`` of a trial, in seed order."""
    metas = (_trial_file(trial, f"{L.seed_name(s)}/{L.META_JSON}", META)
             for s in trial_seed_numbers(trial))
    return [m for m in metas if m is not None]


def seed_dirs(trial: TrialRecord) -> list[Path]:
    """A trial's ``seed-<n>`` folders in seed order (numeric, so seed-10 after seed-9)."""
    return L.seed_dirs(trial.folder)


def trial_seed_numbers(trial: TrialRecord) -> list[int]:
    """The seeds a trial has logs of: its seed folders, or the seeds it stored."""
    if trial.folder is None:
        return sorted(trial.stored.seeds) if trial.stored is not None else []
    return [n for d in seed_dirs(trial) if (n := L.seed_number(d)) is not None]


def _pick_study(names: list[str], folder: str, url_text: str) -> str:
    if not names:
        raise UserError(f"{url_text}: no study in the storage")
    if len(names) == 1:
        return names[0]
    if folder in names:
        return folder
    raise UserError(f"{url_text}: {len(names)} studies ({', '.join(sorted(names)[:5])}); "
                      "expected one, or one named like the folder")


def _trial_folder(results_dir: Path, number: int, recorded: Any) -> Path | None:
    # The folder's own layout first, so a results folder that was moved or copied still
    # finds its logs; the recorded path second (it may be relative to the sweep's cwd).
    own = L.StudyLayout(results_dir).trial(number)
    if own.is_dir():
        return own
    try:
        if isinstance(recorded, str) and Path(recorded).is_dir():
            return Path(recorded)
    except (OSError, ValueError):  # a name too long, or with a NUL byte
        pass
    return None


def _record(results_dir: Path | None, t: optuna.trial.FrozenTrial) -> TrialRecord:
    duration = None
    if t.datetime_start is not None and t.datetime_complete is not None:
        duration = (t.datetime_complete - t.datetime_start).total_seconds()
    values = list(t.values) if t.values is not None else None
    if values is not None and not all(finite(v) for v in values):
        values = None
    notes: list[str] = []
    attrs = fit(dict(t.user_attrs), ATTRS, "", notes)
    return TrialRecord(
        number=t.number, state=t.state.name, arm=attrs.get("arm", "search"),
        params=dict(t.params), values=values, attrs=attrs,
        folder=_trial_folder(results_dir, t.number, attrs.get("dir"))
        if results_dir is not None else None, duration_s=duration,
        damaged=[f"user attribute {n}" for n in notes], stored=load_records(t.system_attrs))


def load_study(results_dir: str | Path) -> Study:
    """Open ``results_dir/study.db`` read-only and load its single study and every trial.

    Raises :class:`UserError` (one line) for a missing folder, a folder without
    ``study.db``, a file that is not a whole Optuna storage, one that holds no study,
    several studies none named like the folder, or a study with no trials. A study without
    a readable spikebench sweep spec is loaded with ``spec=None`` and ``spec_problem``.
    """
    results_dir = Path(results_dir)
    db = find_storage(results_dir)
    check_storage(db)
    url = f"sqlite:///{db.resolve()}"
    # Optuna's warnings about a damaged storage are multi-line logs: the one line below says it.
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            storage = optuna.storages.RDBStorage(
                url, engine_kwargs={"creator": lambda: read_only(db)})
            name = _pick_study(optuna.get_all_study_names(storage), results_dir.name, str(db))
            return _load(storage, name, results_dir, url)
    except UserError:
        raise
    except Exception as e:  # noqa: BLE001 - SQLAlchemy and Optuna errors vary
        chain = [e]
        while chain[-1].__cause__ is not None:  # Optuna wraps SQLite's error in a vaguer one
            chain.append(chain[-1].__cause__)
        e = next((c for c in chain if isinstance(c, sqlite3.Error)), e)
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        if "readonly" in first:
            first += "; it needs a repair, and a report opens it read-only"
        raise UserError(f"{db}: cannot read the Optuna storage ({first})") from None


def load_study_from_storage(url: str, name: str) -> Study:
    """Load study ``name`` from the storage at ``url`` alone, on a machine that may see no
    trial folder: each trial's stored records stand in for its folder. Reads only: a URL
    naming a database without Optuna's tables is refused, not given them."""
    from spikebench.report.remote import open_storage

    storage, shown = open_storage(url)
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    names = optuna.get_all_study_names(storage)
    if name not in names:
        listed = ", ".join(sorted(names)[:5]) + (" ..." if len(names) > 5 else "")
        raise UserError(f"--study {name!r}: no such study in {shown} "
                        f"({'studies: ' + listed if names else 'it holds none'})")
    return _load(storage, name, None, shown)


def _load(storage: optuna.storages.BaseStorage, name: str, results_dir: Path | None,
          url: str) -> Study:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        study = optuna.load_study(study_name=name, storage=storage)
        frozen = study.get_trials(deepcopy=False)
    if not frozen:
        where = results_dir if results_dir is not None else url
        raise UserError(f"{where}: study {name!r} has no trials yet")
    spec, problem = _read_spec(study.user_attrs.get("spec"))
    return Study(
        name=name, folder=results_dir, storage_url=url, spec=spec,
        directions=[d.name.lower() for d in study.directions],
        trials=[_record(results_dir, t) for t in sorted(frozen, key=lambda t: t.number)],
        user_attrs=dict(study.user_attrs), optuna_study=study, spec_problem=problem)


def _read_spec(stored: Any) -> tuple[SweepSpec | None, str]:
    """The stored sweep spec and "", or None and why it cannot be read ("" if there is none).
    A field of the wrong type makes the whole spec unreadable: a section cannot do without
    the field it reads."""
    if stored is None or stored == {}:
        return None, ""
    notes: list[str] = []
    if fit(stored, SPEC, "spec", notes) is BAD or notes:
        return None, notes[0] + (f" (and {len(notes) - 1} more)" if len(notes) > 1 else "")
    try:
        return SweepSpec.from_dict(stored), ""
    except (TypeError, KeyError, ValueError, AttributeError) as e:
        first = (str(e).strip().splitlines() or [""])[0]
        return None, type(e).__name__ + (f": {first}" if first else "")


def seed_log(trial: TrialRecord, seed: int) -> dict[str, Any] | None:
    """One seed's logs: metric rows, summary and meta (None where a file is missing or
    unreadable), or None if the seed has no folder at all. Damage is noted on ``trial``."""
    name = L.seed_name(seed)
    if trial.folder is None:
        rec = trial.stored.seeds.get(seed) if trial.stored is not None else None
        if rec is None:
            return None
        return {"rows": rec["rows"],
                "summary": _trial_file(trial, f"{name}/{L.SUMMARY_JSON}", SUMMARY),
                "meta": _trial_file(trial, f"{name}/{L.META_JSON}", META)}
    d = trial.folder / name
    if not d.is_dir():
        return None
    rows, problems = read_rows(d / L.METRICS)
    trial.note([f"{name}/{L.METRICS}: {p}" for p in problems])
    return {"rows": rows, "summary": _trial_file(trial, f"{name}/{L.SUMMARY_JSON}", SUMMARY),
            "meta": _trial_file(trial, f"{name}/{L.META_JSON}", META)}


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
