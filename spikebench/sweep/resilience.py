"""A shared study that outlives its database server's restarts and its workers' deaths.

- :class:`RetryingRDBStorage`: every storage call that fails because the server cannot be
  reached (restarting, a dropped connection) is retried with backoff for ``retry_s``
  seconds; pooled connections are checked before use (``pool_pre_ping``). A trial that
  finishes while the server is down is told once it is back.
- :func:`fail_stale`: trials whose worker stopped beating are failed, marked, and queued
  again; a worker killed between the two steps leaves a marked failure without a retry,
  which the next worker holding the target gate queues (never two retries of one trial).
- :class:`TargetGate`: the PostgreSQL advisory lock around "check the target, create a
  trial", reconnected after a restart.

What a retry cannot tell apart: a write whose COMMIT reached the server just before the
connection dropped, with the answer lost. Finishing a trial is checked (the state it
already has is the state asked for: done); creating a trial is not (a RUNNING trial with
no owner, failed once stale: :func:`fail_stale` treats a trial without any beat as one).
"""

from __future__ import annotations

import datetime
import functools
import threading
import time
from typing import Any

import optuna
from optuna.trial import TrialState

STALE = "spikebench:stale"  # trial system attribute: failed because its worker stopped beating
# Storage calls retried; private ones are what Optuna's cached storage calls beneath.
_RETRIED = ("create_new_study", "delete_study", "set_study_user_attr", "set_study_system_attr",
            "get_study_id_from_name", "get_study_name_from_id", "get_study_directions",
            "get_study_user_attrs", "get_study_system_attrs", "get_all_studies",
            "create_new_trial", "_create_new_trial", "set_trial_param", "get_trial_param",
            "set_trial_state_values", "set_trial_intermediate_value", "set_trial_user_attr",
            "set_trial_system_attr", "get_trial_user_attrs", "get_trial_system_attrs",
            "get_trial_id_from_study_id_trial_number", "get_trial", "get_all_trials",
            "_get_trials", "get_best_trial", "record_heartbeat", "_get_stale_trial_ids")


def transient(e: BaseException) -> bool:
    """The server could not be reached or dropped the connection (what a retry may fix),
    looked for along the chain of causes: Optuna wraps SQLAlchemy's errors."""
    import sqlalchemy.exc as sa

    seen = 0
    while e is not None and seen < 8:
        if isinstance(e, sa.OperationalError | sa.InterfaceError | sa.DisconnectionError |
                      sa.PendingRollbackError):
            return True
        if isinstance(e, sa.DBAPIError) and e.connection_invalidated:
            return True
        e, seen = e.__cause__ or e.__context__, seen + 1
    return False


def _backoff(retry_s: float):
    """Sleeps between tries (0.25 s doubling to 5 s) until ``retry_s`` has passed."""
    end, pause = time.monotonic() + retry_s, 0.25
    while time.monotonic() < end:
        time.sleep(min(pause, max(0.0, end - time.monotonic())))
        yield
        pause = min(pause * 2, 5.0)


def _retrying(method):
    @functools.wraps(method)
    def call(self, *args, **kwargs):
        local = self._retry_local
        if getattr(local, "depth", 0):  # inside a retried call: the outer one retries
            return method(self, *args, **kwargs)
        local.depth = 1
        try:
            try:
                return method(self, *args, **kwargs)
            except Exception as e:  # noqa: BLE001 - only transient errors are retried
                if not transient(e) or self.retry_s <= 0:
                    raise
                first = e
            for _ in _backoff(self.retry_s):
                try:
                    return method(self, *args, **kwargs)
                except optuna.exceptions.UpdateFinishedTrialError:
                    if method.__name__ == "set_trial_state_values" and _already(self, *args,
                                                                                 **kwargs):
                        return True  # the first try's COMMIT went through
                    raise
                except Exception as e:  # noqa: BLE001
                    if not transient(e):
                        raise
            raise first
        finally:
            local.depth = 0
    return call


def _already(storage: optuna.storages.RDBStorage, trial_id: int, state: TrialState,
             values: Any = None, **_: Any) -> bool:
    trial = storage.get_trial(trial_id)
    return trial.state == state and (values is None or list(values) == trial.values)


class RetryingRDBStorage(optuna.storages.RDBStorage):
    """Optuna's RDB storage whose calls outlast the database being unreachable for up to
    ``retry_s`` seconds (set from the study's ``storage_retry_s`` by :func:`tune`)."""

    def __init__(self, *args: Any, retry_s: float = 60.0, **kwargs: Any):
        self.retry_s = retry_s
        self._retry_local = threading.local()
        super().__init__(*args, **kwargs)

    def __getstate__(self) -> dict:
        state = super().__getstate__()
        state.pop("_retry_local", None)
        return state

    def __setstate__(self, state: dict) -> None:
        self._retry_local = threading.local()
        super().__setstate__(state)


for _name in _RETRIED:
    setattr(RetryingRDBStorage, _name, _retrying(getattr(optuna.storages.RDBStorage, _name)))


def tune(storage: optuna.storages.BaseStorage, spec: Any) -> None:
    """The study's heartbeat, grace and retry settings (``[study]``), so that every worker
    and driver of one study agrees on when a trial is stale."""
    if getattr(storage, "heartbeat_interval", None):  # RDB, or the proxy's client
        storage.heartbeat_interval = spec.heartbeat_s
        storage.grace_period = spec.heartbeat_grace_s
    if isinstance(storage, RetryingRDBStorage):
        storage.retry_s = spec.storage_retry_s


def fail_stale(study: optuna.Study, spec: Any, storage: Any, *, repair: bool,
               max_retry: int) -> None:
    """Fail the running trials whose heartbeat is older than the grace period (or that
    never beat since they started that long ago: a worker killed between creating its
    trial and its first beat), then queue a retry of each, at most ``max_retry`` along one
    chain. A trial is marked :data:`STALE` before it is failed; a trial finished meanwhile
    by its worker stays finished. ``repair``: the caller holds the target gate, so it also
    queues the retry a worker killed between the two steps did not (one caller at a time:
    never two retries); without the gate, only the trials this call failed."""
    from spikebench.sweep.studies import requeue

    won = []
    for trial_id in _stale_ids(study, storage):
        try:
            storage.set_trial_system_attr(trial_id, STALE, True)
            if storage.set_trial_state_values(trial_id, state=TrialState.FAIL):
                won.append(trial_id)
        except optuna.exceptions.UpdateFinishedTrialError:
            pass  # its worker told it meanwhile, or another worker failed it
    trials = study.get_trials(deepcopy=False)
    retried = {t.user_attrs.get("retry_of") for t in trials}
    for t in trials:
        if (t.state == TrialState.FAIL and t.system_attrs.get(STALE)
                and (repair or t._trial_id in won) and t.number not in retried
                and t.user_attrs.get("retries", 0) < max_retry):
            requeue(study, spec, t)


def _stale_ids(study: optuna.Study, storage: Any) -> list[int]:
    ids = set(storage._get_stale_trial_ids(study._study_id))
    if getattr(storage, "engine", None) is None:
        return sorted(ids)  # the gRPC proxy's client counts a trial that never beat itself
    # Optuna skips a trial that never beat; one started a grace period ago never will.
    grace = datetime.timedelta(seconds=storage.grace_period or 2 * storage.heartbeat_interval)
    beats = _beating(storage, study._study_id)
    now = datetime.datetime.now()
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if (t._trial_id not in beats and "driver" not in t.user_attrs
                and t.datetime_start is not None and now - t.datetime_start > grace):
            ids.add(t._trial_id)
    return sorted(ids)


def _beating(storage: Any, study_id: int) -> set[int]:
    """Ids of this study's trials that have a heartbeat row."""
    import sqlalchemy

    sql = sqlalchemy.text("SELECT h.trial_id FROM trial_heartbeats h JOIN trials t "
                          "ON t.trial_id = h.trial_id WHERE t.study_id = :s")
    with storage.engine.connect() as conn:
        return {row[0] for row in conn.execute(sql, {"s": study_id})}


class TargetGate:
    """A cross-server mutex around "check the target, then create a trial".

    On PostgreSQL a session-level advisory lock keyed by the study name, on a connection of
    its own (reopened after the server restarts: the lock went with the old one); on other
    storages a no-op (``real`` False: workers may then overshoot the target by at most one
    trial each, and only the worker that failed a stale trial queues its retry).
    """

    def __init__(self, storage: optuna.storages.BaseStorage, study_name: str):
        import sqlalchemy

        self._sql = sqlalchemy.text
        self.held = False
        self.engine = getattr(storage, "engine", None)
        self.retry_s = getattr(storage, "retry_s", 0.0)
        self.name = f"spikebench:{study_name}"
        self.real = self.engine is not None and self.engine.dialect.name == "postgresql"
        self.conn = None

    def _execute(self, sql: str) -> Any:
        try:
            if self.conn is None:
                self.conn = self.engine.connect().execution_options(
                    isolation_level="AUTOCOMMIT")
            return self.conn.execute(self._sql(sql), {"s": self.name}).scalar()
        except Exception as e:
            if transient(e):
                self._drop()
            raise

    def _drop(self) -> None:
        conn, self.conn, self.held = self.conn, None, False
        if conn is not None:
            try:
                conn.close()
            except Exception:  # noqa: BLE001 - a dead connection may fail to close
                pass

    def acquire(self) -> None:
        if not self.real or self.held:
            return
        tries = _backoff(self.retry_s)
        while True:
            try:
                self._execute("SELECT pg_advisory_lock(hashtext(:s))")
                self.held = True
                return
            except Exception as e:
                if not transient(e) or next(tries, "end") == "end":
                    raise

    def release(self) -> None:
        if self.real and self.held:
            try:
                self._execute("SELECT pg_advisory_unlock(hashtext(:s))")
            except Exception as e:
                if not transient(e):
                    raise  # a dropped connection released it already
            self.held = False

    def close(self) -> None:
        self.release()
        self._drop()
