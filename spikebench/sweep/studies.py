"""Optuna studies of a sweep: creation, the sampler and pruner, the enqueued plan, and
recovery (the storage itself: :mod:`.storage`).

The study's user attributes hold the resolved sweep (``spec``) and the number of trials the
sweep wants (``target_trials``), so ``spikebench worker`` on another server and
``spikebench report`` need nothing but the storage URL and the study name. Storage URLs are
never stored, and printed only through :func:`~.storage.mask_url`.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import threading
import time
import warnings
from typing import Any

import optuna
from optuna.trial import TrialState

from spikebench import __version__
from spikebench.errors import UserError
from spikebench.sweep.pruner import SpikeTolerantPruner
from spikebench.sweep.spec import CLIP_ON, Param, SweepSpec, resolve_config

DONE_STATES = (TrialState.COMPLETE, TrialState.PRUNED)


def make_sampler(spec: SweepSpec, seed: int = 0) -> optuna.samplers.BaseSampler:
    """Seeded samplers: one driver is reproducible with the default seed; every worker on a
    shared study passes its own (:func:`worker_seed`), or all would draw the same trials.
    Single-objective constraints reach TPE and NSGA-II through ``Trial.set_constraint``."""
    if spec.sampler == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if spec.sampler == "nsga2":
        return optuna.samplers.NSGAIISampler(seed=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return optuna.samplers.TPESampler(seed=seed, multivariate=True, group=True)


def worker_seed(study_name: str) -> int:
    """A sampler seed of this worker's own: host, process and start time, hashed."""
    key = f"{study_name}:{socket.gethostname()}:{os.getpid()}:{time.time_ns()}"
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:4], "big")


def make_pruner(spec: SweepSpec) -> optuna.pruners.BasePruner:
    if spec.pruner == "none" or spec.objective == "multi":
        return optuna.pruners.NopPruner()
    if spec.pruner == "median":
        return optuna.pruners.MedianPruner(n_warmup_steps=spec.eval_every)
    inner = optuna.pruners.HyperbandPruner(min_resource=spec.eval_every,
                                           max_resource=spec.steps, reduction_factor=3)
    if spec.pruner == "spike_tolerant_hyperband":  # Hyperband, patient only around a rise
        return SpikeTolerantPruner(inner, patience=2)
    # Patient around Hyperband: a trial must fail to improve for two evaluations in a row
    # before Hyperband may stop it (in practice: it almost never prunes).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return optuna.pruners.PatientPruner(inner, patience=2)


def check_study(spec: SweepSpec, storage: optuna.storages.BaseStorage) -> None:
    """Refuse a study of this name that exists with other objectives or another sweep
    definition, reading only: a refused sweep writes nothing (:func:`open_study` writes)."""
    try:
        study = optuna.load_study(study_name=spec.name, storage=storage)
    except KeyError:
        return  # no such study yet: it will be created
    _check_same(spec, study)


def _check_same(spec: SweepSpec, study: optuna.Study) -> None:
    directions = ["minimize", "minimize"] if spec.objective == "multi" else ["minimize"]
    if [d.name.lower() for d in study.directions] != directions:
        raise UserError(f"study {spec.name!r}: exists with {len(study.directions)} "
                          f"objective(s); study.objective = {spec.objective!r} needs "
                          f"{len(directions)} (use another study.name)")
    old = study.user_attrs.get("spec")
    if old is not None:
        # Through SweepSpec, so a field added since the study was created takes its default.
        try:
            old = SweepSpec.from_dict(old).to_dict()
        except TypeError:
            pass  # written by a newer spikebench: compared as stored (and so refused)
    if old is not None and _comparable(old) != _comparable(spec.to_dict()):
        raise UserError(f"study {spec.name!r}: exists with a different sweep definition; "
                          "resume with the same file and --set values, or use another "
                          "study.name")


def open_study(spec: SweepSpec, storage: optuna.storages.BaseStorage) -> optuna.Study:
    directions = ["minimize", "minimize"] if spec.objective == "multi" else ["minimize"]
    study = optuna.create_study(storage=storage, study_name=spec.name, load_if_exists=True,
                                directions=directions, sampler=make_sampler(spec, spec.sampler_seed),
                                pruner=make_pruner(spec))
    _check_same(spec, study)
    if study.user_attrs.get("spec") is None:
        study.set_user_attr("spec", spec.to_dict())
        study.set_user_attr("spikebench_version", __version__)
    study.set_user_attr("target_trials", len(spec.arms) + spec.trials)
    return study


def _comparable(spec: dict) -> dict:
    # The trial count may grow between runs of the same sweep; storage and path may move.
    # Through JSON, as the stored copy went: tuples (choices) come back as lists.
    return json.loads(json.dumps(
        {k: v for k, v in spec.items() if k not in ("trials", "storage", "path")}))


def load_spec(study: optuna.Study) -> SweepSpec:
    data = study.user_attrs.get("spec")
    if data is None:
        raise UserError(f"study {study.study_name!r}: not a spikebench study (no sweep "
                          "definition in its user attributes)")
    return SweepSpec.from_dict(data)


# A half-precision step's cost against fp32 on a CPU: emulated 1.7x, real bf16 1.5x
# (`benchmarks/precision_speed.py`). On a GPU half is not slower, so there only the tokens count.
CPU_HALF_COST = 1.6


def arm_cost(spec: SweepSpec, arm: str, *, gpu: bool = False) -> float:
    """An arm's expected training cost, in relative units: tokens, times the cost of its
    precision on the device. Only the order it gives matters (:func:`enqueue_plan`)."""
    if spec.trainer:
        return 1.0  # a trainer's own parameters: no cost known, the spec's order stands
    cfg = resolve_config(spec.base, spec.arms[arm])
    tokens = cfg.train.steps * cfg.data.batch_size * cfg.data.seq_len
    return tokens * (CPU_HALF_COST if cfg.precision.mode != "fp32" and not gpu else 1.0)


def enqueue_plan(study: optuna.Study, spec: SweepSpec, *, gpu: bool = False) -> int:
    """Enqueue the designed comparison's arms x seeds once; returns how many were added.

    The costliest arms go first (longest processing time first), so the trials left to
    start when workers begin to run out are the short ones and fewer workers sit idle at
    the end; arms of equal cost keep the spec's order. Reports show the arms in the spec's
    order, whatever their trial numbers. Arms already in the study (in any state) are not
    enqueued again, so a sweep killed while enqueuing resumes cleanly.
    """
    present = {t.user_attrs.get("arm") for t in study.get_trials(deepcopy=False)}
    added = 0
    for arm in sorted(spec.arms, key=lambda a: -arm_cost(spec, a, gpu=gpu)):
        if arm in present:
            continue
        study.enqueue_trial(fixed_params(spec.space, spec.arms[arm]), user_attrs={"arm": arm})
        added += 1
    return added


def fixed_params(space: list[Param], values: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for p in space:
        out.update(p.fixed(values[p.key]))
    return out


def suggest(trial: optuna.Trial, space: list[Param]) -> dict[str, Any]:
    """Sample (or read the enqueued values of) every dimension; returns config overrides."""
    out: dict[str, Any] = {}
    for p in space:
        if p.off and not trial.suggest_categorical(p.key + CLIP_ON, [True, False]):
            out[p.key] = None
        elif p.choices is not None:
            out[p.key] = trial.suggest_categorical(p.key, list(p.choices))
        elif p.integer:
            out[p.key] = trial.suggest_int(p.key, int(p.low), int(p.high), log=p.log)
        else:
            out[p.key] = trial.suggest_float(p.key, p.low, p.high, log=p.log)
    return out


def recover_interrupted(study: optuna.Study, spec: SweepSpec, owner: str | None = None) -> int:
    """Fail trials a dead driver left RUNNING and enqueue them again with the same params.

    ``owner`` None: every RUNNING trial (a storage this driver alone uses: the default
    SQLite file, guarded by the lock file). Else only the RUNNING trials whose ``driver``
    user attribute is ``owner``: on a shared storage, the trials of this results folder's
    previous driver (dead, since this one holds the lock), never another server's.
    """
    stale = [t for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
             if owner is None or t.user_attrs.get("driver") == owner]
    interrupted = set(study.user_attrs.get("interrupted", []))
    for t in stale:
        study.tell(t.number, state=TrialState.FAIL)
        interrupted.add(t.number)
        requeue(study, spec, t)
    if stale:
        study.set_user_attr("interrupted", sorted(interrupted))
    return len(stale)


def requeue(study: optuna.Study, spec: SweepSpec, t: optuna.trial.FrozenTrial | optuna.Trial,
            *, retry: bool = True) -> None:
    """Enqueue a retry of trial ``t``, marked ``retry_of`` (so ``t`` no longer counts).

    An arm is pinned by its definition (the trial may have died before its params were
    suggested, and then a sampler would pick the retry's values); a search trial is retried
    with the params it had. ``retry`` False: the trial never ran (its worker could not
    start it), so the retry does not count toward its chain's limit of retries.
    """
    arm = t.user_attrs.get("arm")
    params = fixed_params(spec.space, spec.arms[arm]) if arm in spec.arms else t.params
    attrs = {"arm": arm} if arm else {}
    study.enqueue_trial(params, user_attrs={**attrs, "retry_of": t.number,
                                            "retries": t.user_attrs.get("retries", 0) + int(retry)})


def give_back(study: optuna.Study, spec: SweepSpec, trial: optuna.Trial, error: str, *,
              retry: bool = True) -> None:
    """End a RUNNING trial that failed for its worker's reasons, not its own: it is failed
    with ``error`` and ``given_back``, and a retry is enqueued first, so that at no moment
    does it count toward the target (:func:`count_done`)."""
    trial.set_user_attr("error", error)
    trial.set_user_attr("given_back", True)
    requeue(study, spec, trial, retry=retry)
    study.tell(trial, state=TrialState.FAIL)


class Heartbeat:
    """Records a heartbeat for each trial running here, at once and then every storage
    heartbeat interval from a daemon thread: what ``study.optimize`` does for its trial,
    done for trials run by ask and tell (a driver's, a worker's)."""

    def __init__(self, storage: optuna.storages.BaseStorage):
        self.storage = storage
        self.ids: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def add(self, trial_id: int) -> None:
        self.storage.record_heartbeat(trial_id)
        self.ids.add(trial_id)

    def discard(self, trial_id: int) -> None:
        self.ids.discard(trial_id)

    def _run(self) -> None:
        while not self._stop.wait(self.storage.get_heartbeat_interval() or 30):
            for trial_id in list(self.ids):
                try:
                    self.storage.record_heartbeat(trial_id)
                except Exception:  # noqa: BLE001 - the database is down past the storage's
                    pass  # retries: beat again next time (the trial may go stale meanwhile)

    def stop(self) -> None:
        self._stop.set()


class RetryStaleTrial:
    """Heartbeat callback: a trial whose worker died is retried like an interrupted one
    (:func:`requeue`), at most ``max_retry`` times along one chain of retries; after that
    the failure stands and counts as a finished (crashed) trial."""

    def __init__(self, max_retry: int = 2):
        self.max_retry = max_retry

    def __call__(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        if trial.user_attrs.get("retries", 0) < self.max_retry:
            requeue(study, load_spec(study), trial)


def count_done(study: optuna.Study, trials: list | None = None) -> int:
    """Finished trials that count toward the target: complete, pruned, or failed for a
    reason of their own (crashed), but not those interrupted by a killed driver."""
    trials = study.get_trials(deepcopy=False) if trials is None else trials
    retried = set(study.user_attrs.get("interrupted", []))
    retried |= {t.user_attrs["retry_of"] for t in trials if "retry_of" in t.user_attrs}
    for t in trials:  # retries by Optuna's own callback, as earlier versions used
        retried.update(t.system_attrs.get("retry_history", ()))
    return sum(t.state in DONE_STATES
               or (t.state == TrialState.FAIL and t.number not in retried)
               for t in trials)
