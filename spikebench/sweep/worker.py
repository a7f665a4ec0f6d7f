"""Shared sweeps (``spikebench worker``): any number of servers run trials of one study on a
PostgreSQL storage, with heartbeats; the trials of dead workers are retried.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import TrialState

from spikebench.errors import UserError
from spikebench.sweep import spares
from spikebench.sweep.slots import worker_slot
from spikebench.sweep.studies import (
    count_done,
    is_sqlite,
    load_spec,
    make_pruner,
    make_sampler,
    make_storage,
    mask_url,
    worker_seed,
)
from spikebench.sweep.trial import Outcome, record, run_trial

# How often an idle worker looks again at trials running elsewhere.
_POLL_S = 5.0


class _TargetGate:
    """A cross-server mutex around "check the target, then create a trial".

    On PostgreSQL a session-level advisory lock keyed by the study name; on other shared
    backends a no-op (workers may then overshoot the target by at most one trial each).
    """

    def __init__(self, storage: optuna.storages.BaseStorage, study_name: str):
        import sqlalchemy

        self._sql = sqlalchemy.text
        self.held = False
        engine = getattr(storage, "engine", None)
        self.conn = None
        if engine is not None and engine.dialect.name == "postgresql":
            self.conn = engine.connect().execution_options(isolation_level="AUTOCOMMIT")
            self.key = self.conn.execute(self._sql("SELECT hashtext(:s)"),
                                         {"s": f"spikebench:{study_name}"}).scalar()

    def acquire(self) -> None:
        if self.conn is not None and not self.held:
            self.conn.execute(self._sql("SELECT pg_advisory_lock(:k)"), {"k": self.key})
            self.held = True

    def release(self) -> None:
        if self.conn is not None and self.held:
            self.conn.execute(self._sql("SELECT pg_advisory_unlock(:k)"), {"k": self.key})
            self.held = False

    def close(self) -> None:
        self.release()
        if self.conn is not None:
            self.conn.close()


def run_worker(url: str, study_name: str, *, results: str | Path = "results",
               log: Callable[[str], None] | None = None, metrics: Any = None) -> int:
    """Join a shared study and run trials until it has its target number of finished ones.

    Heartbeats mark this worker alive; trials of a worker that died are failed after the
    grace period and retried by whichever worker notices. A worker stops starting trials
    once finished plus running trials reach the target, so workers do not overshoot it.
    """
    log = log or (lambda s: print(s, file=sys.stderr, flush=True))
    if is_sqlite(url):
        raise UserError(f"--storage {mask_url(url)}: SQLite cannot be shared by workers on "
                          "several machines; use PostgreSQL (postgresql://user:pass@host/db), "
                          "or run `spikebench sweep --jobs N` on one machine")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = make_storage(url, heartbeat=True)
    try:
        spec = load_spec(optuna.load_study(study_name=study_name, storage=storage))
    except KeyError:
        raise UserError(f"--study {study_name!r}: no such study in {mask_url(url)}") from None
    study = optuna.load_study(study_name=study_name, storage=storage,
                              sampler=make_sampler(spec, worker_seed(study_name)),
                              pruner=make_pruner(spec))
    slot = worker_slot(int(spec.base.get("train.nproc", 1)))
    trials_dir = Path(results) / spec.name / "trials"
    target = study.user_attrs.get("target_trials", len(spec.arms) + spec.trials)

    def objective(trial: optuna.Trial):
        gate.release()  # the trial exists (RUNNING): other workers may check the target now
        try:
            # Warm the next process only while every busy worker (those running, and this
            # one) still has a trial to come after this one: a spare at the end goes unused.
            out = run_trial(trial, spec, slot, trials_dir, nullcontext(),
                            warm_next=left[0] - 1 >= left[1] + 1)
        except Exception as e:  # noqa: BLE001 - record it and keep the worker alive
            out = Outcome(TrialState.FAIL, attrs={"error": f"{type(e).__name__}: {e}"})
        record(trial, out)
        if out.state == TrialState.PRUNED:
            raise optuna.TrialPruned()
        if out.state == TrialState.FAIL:
            raise RuntimeError(out.attrs.get("error", "trial failed"))
        return out.values

    def counts(study: optuna.Study) -> tuple[int, int, int]:
        """(done, running, running on workers). Trials of dead workers or drivers (stale
        heartbeat) are failed and queued again first."""
        optuna.storages.fail_stale_trials(study)
        trials = study.get_trials(deepcopy=False)  # one read: no trial counted twice
        running = [t for t in trials if t.state == TrialState.RUNNING]
        # A driver's trial is its driver's to retry (on its next run); only workers' trials,
        # which beat until they finish or go stale, are worth waiting for.
        on_workers = sum("driver" not in t.user_attrs for t in running)
        return count_done(study, trials), len(running), on_workers

    ran = 0
    left = [0, 0]  # trials to start, and trials running, as of this worker's last look
    gate = _TargetGate(storage, study_name)
    follower = None
    if metrics is not None:  # this worker's trials, read from the logs they write
        from spikebench.live.follow import Follower

        follower = Follower(metrics, trials_dir).start()
    spares.open_()
    try:
        while True:
            # Checking the target and creating the next trial are one step across workers,
            # else two workers that both see one trial left both start one.
            gate.acquire()
            done, running, on_workers = counts(study)
            left[:] = [target - done - running, running]
            if metrics is not None:
                metrics.sweep_progress(done, running, sum(
                    t.state == TrialState.FAIL for t in study.get_trials(deepcopy=False)))
            if done >= target or (done + running >= target and not on_workers):
                break
            if done + running >= target:
                # The rest is running elsewhere. Stay until it finishes or its worker's
                # heartbeat goes stale, so a dead worker's trial is still retried.
                gate.release()
                time.sleep(_POLL_S)
                continue
            try:
                study.optimize(objective, n_trials=1, catch=(RuntimeError,))
            finally:
                gate.release()
            ran += 1
    finally:
        spares.close()
        gate.close()
        if follower is not None:
            follower.stop()
    log(f"worker done: study {study_name!r} has {count_done(study)}/{target} finished "
        f"trials; this worker ran {ran}")
    return 0
