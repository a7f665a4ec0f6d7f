"""A shared study's storage against a real PostgreSQL server that restarts, and the repair of
stale trials (spikebench.sweep.resilience); the [study] settings that time them."""

from __future__ import annotations

import datetime
import threading

import optuna
import pytest
from optuna.trial import TrialState
from pgserver import pg_ctl, postgres_server, restart
from sweep_helpers import write_sweep

from spikebench.errors import UserError
from spikebench.sweep.resilience import STALE, TargetGate, fail_stale, tune
from spikebench.sweep.spec import load_sweep
from spikebench.sweep.storage import make_storage
from spikebench.sweep.studies import count_done, enqueue_plan, open_study


@pytest.fixture(scope="module")
def pg_url():
    with postgres_server() as url:
        yield url


@pytest.mark.parametrize("extra, fragment", [
    ("heartbeat_s = 0", "study.heartbeat_s = 0: must be a whole number of seconds >= 1"),
    ("heartbeat_s = 1.5", "study.heartbeat_s = 1.5: must be a whole number"),
    ("heartbeat_s = 5\nheartbeat_grace_s = 9",
     "study.heartbeat_grace_s = 9: must be a whole number of seconds >= 2 x heartbeat_s (10)"),
    ("storage_retry_s = -1", "study.storage_retry_s = -1: must be a number of seconds in"),
])
def test_timing_settings_refused_in_one_line(tmp_path, extra, fragment):
    with pytest.raises(UserError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        load_sweep(write_sweep(tmp_path, extra_study=extra))


def test_storage_calls_outlast_a_restart_and_fail_without_retries(pg_url, tmp_path):
    spec = load_sweep(write_sweep(tmp_path, name="restart", extra_study="storage_retry_s = 30"))
    storage = make_storage(pg_url, heartbeat=True)
    study = open_study(spec, storage)
    tune(storage, spec)
    assert storage.retry_s == 30 and storage.heartbeat_interval == 30
    trial = study.ask()
    pg_ctl(pg_url, "stop", "-m", "fast")  # the trial finishes while the server is down
    back = threading.Timer(2.0, pg_ctl, (pg_url, "start"))
    back.start()
    try:
        study.tell(trial, [1.0, 2.0])  # told once the server is back
    finally:
        back.join()
    assert study.get_trials()[-1].state == TrialState.COMPLETE
    storage.retry_s = 0  # the same, without retries: the call fails
    pg_ctl(pg_url, "stop", "-m", "immediate")
    try:
        with pytest.raises(optuna.exceptions.StorageInternalError):
            storage.set_study_user_attr(study._study_id, "x", 1)
    finally:
        pg_ctl(pg_url, "start")


def _stale_study(pg_url, tmp_path, name):
    spec = load_sweep(write_sweep(tmp_path, name=name, trials=0,
                                  extra_study="heartbeat_s = 1\nheartbeat_grace_s = 2"))
    storage = make_storage(pg_url, heartbeat=True)
    study = open_study(spec, storage)
    tune(storage, spec)
    enqueue_plan(study, spec)
    return spec, storage, study


def test_a_trial_failed_stale_without_its_retry_is_retried_once(pg_url, tmp_path):
    # A worker killed between failing a stale trial and queuing its retry: the next worker
    # holding the gate queues it, and a second look queues nothing more.
    spec, storage, study = _stale_study(pg_url, tmp_path, "repair")
    trial = study.ask()
    storage.set_trial_system_attr(trial._trial_id, STALE, True)
    storage.set_trial_state_values(trial._trial_id, TrialState.FAIL)
    assert count_done(study) == 1  # as a crash, until repaired
    for _ in range(2):
        fail_stale(study, spec, storage, repair=True, max_retry=2)
    retries = [t for t in study.get_trials() if t.user_attrs.get("retry_of") == trial.number]
    assert len(retries) == 1 and retries[0].user_attrs["arm"] == trial.user_attrs["arm"]
    assert count_done(study) == 0
    # Without the gate only the worker that failed it may queue its retry.
    other = study.ask()
    storage.set_trial_system_attr(other._trial_id, STALE, True)
    storage.set_trial_state_values(other._trial_id, TrialState.FAIL)
    fail_stale(study, spec, storage, repair=False, max_retry=2)
    assert not [t for t in study.get_trials() if t.user_attrs.get("retry_of") == other.number]


def test_a_trial_that_never_beat_is_failed_after_the_grace(pg_url, tmp_path):
    # Its worker died between creating it and its first heartbeat: Optuna never fails it.
    spec, storage, study = _stale_study(pg_url, tmp_path, "orphan")
    orphan, beating = study.ask(), study.ask()
    storage.record_heartbeat(beating._trial_id)
    fail_stale(study, spec, storage, repair=True, max_retry=2)
    assert study.get_trials()[orphan.number].state == TrialState.RUNNING  # within the grace
    start = datetime.datetime.now() - datetime.timedelta(seconds=5)
    with storage.engine.begin() as conn:  # as if created 5 s ago (the grace is 2 s)
        conn.exec_driver_sql("UPDATE trials SET datetime_start = %(t)s WHERE trial_id = %(i)s",
                             {"t": start, "i": orphan._trial_id})
    storage.record_heartbeat(beating._trial_id)
    fail_stale(study, spec, storage, repair=True, max_retry=2)
    trials = study.get_trials()
    assert trials[orphan.number].state == TrialState.FAIL
    assert trials[beating.number].state == TrialState.RUNNING
    assert [t.user_attrs.get("retry_of") for t in trials].count(orphan.number) == 1


def test_the_gate_is_taken_again_after_a_restart(pg_url, tmp_path):
    storage = make_storage(pg_url)
    gate = TargetGate(storage, "gate")
    assert gate.real
    gate.acquire()
    restart(pg_url, "fast")  # the lock went with its connection
    gate.release()
    gate.acquire()
    assert gate.held
    gate.close()
