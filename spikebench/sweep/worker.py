"""Shared sweeps (``spikebench worker``): any number of servers run trials of one study on a
PostgreSQL storage, with heartbeats; the trials of dead workers are retried.

A worker must never use up a shared study by failing for reasons of its own: its results
folder is checked before it asks for a trial; a trial it cannot start (its folder or
process cannot be made: an ``OSError``) and a trial that fails at once (within
``INSTANT_S``: often a server's environment, such as a corpus missing there or a broken
install) are given back, not counted, and a worker whose trials fail at once
``MAX_INSTANT`` times in a row stops with one line. A trial that fails at once on every
worker is given back at most ``MAX_RETRY`` times; then its failure counts.
"""

from __future__ import annotations

import sys
import time
import warnings
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import TrialState

from spikebench.errors import UserError
from spikebench.study import StudyLayout
from spikebench.study.artifacts import open_store
from spikebench.sweep import spares
from spikebench.sweep.folders import make_folder
from spikebench.sweep.preempt import Stop
from spikebench.sweep.resilience import TargetGate, fail_stale, tune
from spikebench.sweep.slots import worker_slot
from spikebench.sweep.storage import is_sqlite, make_storage, mask_url
from spikebench.sweep.studies import (
    Heartbeat,
    count_done,
    give_back,
    load_spec,
    make_pruner,
    make_sampler,
    worker_seed,
)
from spikebench.sweep.trial import Outcome, kill_children, record, run_trial

# How often an idle worker looks again at trials running elsewhere.
_POLL_S = 5.0
# A failure this soon after its trial started: the trial never really trained, so it may
# well be this server's fault; so many in a row, and this worker stops.
INSTANT_S = 30.0
MAX_INSTANT = 3
# Times a trial that fails at once is given back; after that it fails everywhere: it counts.
MAX_RETRY = 2


def run_worker(url: str, study_name: str, *, results: str | Path = "results",
               log: Callable[[str], None] | None = None, metrics: Any = None) -> int:
    """Join a shared study and run trials until it has its target number of finished ones.

    Heartbeats mark this worker alive; trials of a worker that died are failed after the
    grace period and retried by whichever worker notices. A worker stops starting trials
    once finished plus running trials reach the target, so workers do not overshoot it.
    Trials this worker could not run for its own reasons are given back (module docstring).
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
    tune(storage, spec)  # the study's heartbeat, grace and retry settings
    trials_dir = StudyLayout.of(results, spec.name).trials
    make_folder(trials_dir, results)  # before the first trial is asked for
    if spec.artifacts:  # a store this worker cannot write: refused before any trial
        open_store(spec.artifacts)
    study = optuna.load_study(study_name=study_name, storage=storage,
                              sampler=make_sampler(spec, worker_seed(study_name)),
                              pruner=make_pruner(spec))
    slot = worker_slot(1 if spec.trainer else int(spec.base.get("train.nproc", 1)))
    target = study.user_attrs.get("target_trials", len(spec.arms) + spec.trials)

    def run(trial: optuna.Trial) -> str | None:
        """Run and tell one trial; returns its error if it was given back (it could not
        start here, or failed at once), else None."""
        started = time.monotonic()
        heart.add(trial._trial_id)
        own = None
        try:
            # Warm the next process only while every busy worker (those running, and this
            # one) still has a trial to come after this one: a spare at the end goes unused.
            with stop.interruptible():  # SIGTERM/USR1 here: given back (below)
                out = run_trial(trial, spec, slot, trials_dir, nullcontext(),
                                warm_next=left[0] - 1 >= left[1] + 1)
        except OSError as e:  # its folder or its process could not be made here
            own = f"{type(e).__name__}: {e}"
        except Exception as e:  # noqa: BLE001 - record it and keep the worker alive
            out = Outcome(TrialState.FAIL, attrs={"error": f"{type(e).__name__}: {e}"})
        except BaseException:  # interrupted: the trial is not its fault either
            kill_children()
            try:
                give_back(study, spec, trial, "its worker was interrupted", retry=False)
                log(f"trial #{trial.number} given back to the study: this worker was stopped")
            except Exception:  # noqa: BLE001 - left RUNNING: retried once its heartbeat is stale
                pass
            raise
        finally:
            heart.discard(trial._trial_id)
        if own is not None:
            give_back(study, spec, trial, own, retry=False)
            return own
        error = out.attrs.get("error", "trial failed")
        try:
            record(trial, out, spec.artifacts)
            if (out.state == TrialState.FAIL and time.monotonic() - started < INSTANT_S
                    and trial.user_attrs.get("retries", 0) < MAX_RETRY):
                give_back(study, spec, trial, error)
                return error
            study.tell(trial, out.values if out.state == TrialState.COMPLETE else None,
                       state=out.state)
        except (optuna.exceptions.UpdateFinishedTrialError, ValueError):
            if not study._storage.get_trial(trial._trial_id).state.is_finished():
                raise
            # Its beat went stale (the database was down past the grace period): another
            # worker failed it and queued its retry, so this result must not count too.
            log(f"trial #{trial.number} was failed as stale while it ran here; its retry "
                "counts instead")
            return None
        if out.state == TrialState.FAIL:
            log(f"trial #{trial.number} ({out.attrs.get('arm')}) failed: {error[:300]}")
        return None

    def counts(study: optuna.Study) -> tuple[int, int, int]:
        """(done, running, running on workers). Trials of dead workers or drivers (stale
        heartbeat) are failed and queued again first."""
        fail_stale(study, spec, storage, repair=gate.real, max_retry=MAX_RETRY)
        trials = study.get_trials(deepcopy=False)  # one read: no trial counted twice
        running = [t for t in trials if t.state == TrialState.RUNNING]
        # A driver's trial is its driver's to retry (on its next run); only workers' trials,
        # which beat until they finish or go stale, are worth waiting for.
        on_workers = sum("driver" not in t.user_attrs for t in running)
        return count_done(study, trials), len(running), on_workers

    ran = 0
    left = [0, 0]  # trials to start, and trials running, as of this worker's last look
    instant: list[str] = []  # errors of the trials in a row that failed at once here
    gate = TargetGate(storage, study_name)
    heart = Heartbeat(storage)
    follower = None
    if metrics is not None:  # this worker's trials, read from the logs they write
        from spikebench.live.follow import Follower

        follower = Follower(metrics, trials_dir).start()
    spares.open_()
    stop = Stop()  # a signal (Slurm's time limit, preemption) stops it: see preempt.py
    try:
        while True:
            stop.check()
            # Checking the target and creating the next trial are one step across workers,
            # else two workers that both see one trial left both start one.
            gate.acquire()
            try:
                done, running, on_workers = counts(study)
                left[:] = [target - done - running, running]
                if metrics is not None:
                    metrics.sweep_progress(done, running, sum(
                        t.state == TrialState.FAIL for t in study.get_trials(deepcopy=False)))
                if done >= target or (done + running >= target and not on_workers):
                    break
                trial = None
                if done + running < target:
                    with warnings.catch_warnings():
                        # Optuna warns that heartbeats are meant for optimize(): we beat.
                        warnings.simplefilter("ignore", UserWarning)
                        trial = study.ask()
            finally:
                gate.release()  # the trial exists (RUNNING): others may check the target
            if trial is None:
                # The rest is running elsewhere. Stay until it finishes or its worker's
                # heartbeat goes stale, so a dead worker's trial is still retried.
                with stop.interruptible():
                    time.sleep(_POLL_S)
                continue
            error = run(trial)
            ran += 1
            if error is None and instant:  # a trial ran: those were not all this worker's
                log(f"{len(instant)} trial(s) failed at once here and were given back "
                    f"(last: {instant[-1][:300]})")
            instant = instant + [error] if error is not None else []
            if len(instant) >= MAX_INSTANT:
                raise UserError(
                    f"{len(instant)} trials in a row failed at once on this worker, so it "
                    f"stops (last: {instant[-1][:300]}); they were given back to study "
                    f"{study_name!r}: check this server's --results folder, corpus and "
                    "installation, then start the worker again")
    finally:
        stop.restore()
        spares.close()
        heart.stop()
        gate.close()
        if follower is not None:
            follower.stop()
    log(f"worker done: study {study_name!r} has {count_done(study)}/{target} finished "
        f"trials; this worker ran {ran}")
    return 0
