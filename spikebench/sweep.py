"""The sweep driver: trials in fresh worker processes, scored and told to Optuna.

Local sweeps (``spikebench sweep``): the driver process alone talks to the storage (ask/tell
under one lock), so parallel workers never meet SQLite's "database is locked"; joblib runs
one thread per worker slot, and each thread runs its trial as a fresh subprocess pinned to a
GPU (``CUDA_VISIBLE_DEVICES``) or to its share of the CPU cores. A lock file keeps a second
driver off the same results folder; on start, trials a killed driver left running are
failed and enqueued again, so a sweep resumes with the same command.

Shared sweeps (``spikebench worker``): any number of servers run ``study.optimize`` against
one PostgreSQL storage with heartbeats; trials of dead workers are retried.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from queue import Queue
from typing import Any

import optuna
from joblib import Parallel, delayed
from optuna.trial import TrialState

from spikebench import objectives
from spikebench.config import ConfigError
from spikebench.runio import atomic_write_json, atomic_write_text
from spikebench.studies import (
    count_done,
    default_storage,
    enqueue_plan,
    is_sqlite,
    load_spec,
    make_pruner,
    make_sampler,
    make_storage,
    mask_url,
    open_study,
    recover_interrupted,
    suggest,
)
from spikebench.sweepfile import SweepSpec, resolve_config


@dataclass
class Slot:
    """Where one trial runs: environment for its process and its torch thread count."""

    name: str
    env: dict[str, str] = field(default_factory=dict)
    threads: int = 1


def make_slots(jobs: int | None) -> list[Slot]:
    """The worker slots on this machine (see :func:`plan_slots`)."""
    import torch

    gpus: list[str] = []
    if torch.cuda.is_available():
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        gpus = visible.split(",") if visible else [str(i) for i in range(
            torch.cuda.device_count())]
    return plan_slots(jobs, os.cpu_count() or 1, gpus)


def plan_slots(jobs: int | None, cores: int, gpus: list[str]) -> list[Slot]:
    """One slot per GPU id in ``gpus`` (when ``jobs`` is None), pinned to it with
    ``CUDA_VISIBLE_DEVICES``; else ``jobs`` CPU workers (None: one per core) with the
    cores split between them so they do not oversubscribe. Every slot gets >= 1 thread."""
    if gpus and jobs is None:
        per = max(1, cores // len(gpus))
        return [Slot(f"cuda:{i}", {"CUDA_VISIBLE_DEVICES": i}, per) for i in gpus]
    n = jobs or cores
    per = max(1, cores // n)
    return [Slot(f"cpu{i}", {"CUDA_VISIBLE_DEVICES": ""}, per) for i in range(n)]


@dataclass
class Outcome:
    state: TrialState
    values: list[float] | None = None
    attrs: dict[str, Any] = field(default_factory=dict)
    constraints: dict[str, float] = field(default_factory=dict)


# How often an idle worker looks again at trials running elsewhere.
_POLL_S = 5.0

_children: set[subprocess.Popen] = set()
_children_lock = threading.Lock()


def run_trial(trial: optuna.Trial, spec: SweepSpec, slot: Slot, trials_dir: Path,
              lock: threading.Lock | nullcontext) -> Outcome:
    """Run one trial (all its seeds) in a fresh process and score it. Never raises for a
    failing trial: a crash is an ``Outcome`` in state FAIL with the error in its attrs."""
    with lock:
        params = suggest(trial, spec.space)
        arm = trial.user_attrs.get("arm", "search")
    cfg = resolve_config(spec.base, spec.arms.get(arm, {}), params)
    cfg.train.progress = False
    cfg.train.threads = slot.threads
    cfg.spikes.target_loss = spec.target_loss
    if slot.name.startswith("cpu"):
        cfg.train.device = "cpu"
    trial_dir = trials_dir / f"{trial.number:05d}"
    trial_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_json(trial_dir / "trial.json", {
        "number": trial.number, "arm": arm, "params": trial.params, "overrides": params,
        "seeds": spec.seeds, "slot": slot.name, "config": cfg.to_dict()})
    env = {**os.environ, **slot.env, "OMP_NUM_THREADS": str(slot.threads),
           "SPIKEBENCH_PARENT_PID": str(os.getpid()), "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, "-m", "spikebench.trial_runner", str(trial_dir)]
    attrs: dict[str, Any] = {"arm": arm, "dir": str(trial_dir), "slot": slot.name,
                             "overrides": dict(params)}
    with open(trial_dir / "stderr.log", "w") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, env=env)
        with _children_lock:
            _children.add(proc)
        pruned = False
        try:
            for line in proc.stdout:
                if spec.objective != "single":
                    continue  # Optuna cannot prune multi-objective studies
                try:
                    report = json.loads(line)
                except json.JSONDecodeError:
                    continue
                with lock:
                    trial.report(report["val/loss"], report["step"])
                    pruned = trial.should_prune()
                if pruned:
                    proc.kill()
                    attrs["pruned_at_step"] = report["step"]
                    break
            proc.wait()
        finally:
            with _children_lock:
                _children.discard(proc)
    if pruned:
        return Outcome(TrialState.PRUNED, attrs=attrs)
    result_path = trial_dir / "result.json"
    if proc.returncode != 0 or not result_path.exists():
        tail = (trial_dir / "stderr.log").read_text().strip().splitlines()
        attrs["error"] = tail[-1] if tail else f"exit code {proc.returncode}"
        return Outcome(TrialState.FAIL, attrs=attrs)
    return score(json.loads(result_path.read_text()), spec, attrs)


def score(result: dict[str, Any], spec: SweepSpec, attrs: dict[str, Any]) -> Outcome:
    per_seed = [{"seed": r["seed"], **objectives.seed_values(
        r["summary"], steps=spec.steps, target=spec.target_loss)} for r in result["seeds"]]
    agg = objectives.aggregate(per_seed, spike_metric=spec.spike_metric)
    attrs = {**attrs, "per_seed": per_seed, **agg}
    diverged = [s for s in per_seed if s["status"] == "diverged"]
    if diverged:
        attrs["cause"] = "non-finite loss or gradient norm"
        attrs["diverged_step"] = min(s["diverged_step"] or 0 for s in diverged)
    return Outcome(TrialState.COMPLETE, objectives.objective_values(agg, spec.objective),
                   attrs, objectives.constraints(agg, spec.spike_limit)
                   if spec.objective == "single" else {})


def _tell(study: optuna.Study, trial: optuna.Trial, out: Outcome) -> None:
    for k, v in out.attrs.items():
        trial.set_user_attr(k, v)
    for k, v in out.constraints.items():
        trial.set_constraint(k, v)
    study.tell(trial, out.values if out.state == TrialState.COMPLETE else None,
               state=out.state)


@contextmanager
def _exclusive(study_dir: Path):
    study_dir.mkdir(parents=True, exist_ok=True)
    f = open(study_dir / ".lock", "w")  # noqa: SIM115 - held for the whole sweep
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.close()
        raise ConfigError(f"results folder {str(study_dir)!r}: another sweep is running "
                          "on this study (its lock file is held)") from None
    try:
        yield
    finally:
        f.close()


def _kill_children() -> None:
    with _children_lock:
        for p in list(_children):
            p.kill()


def _sigterm(signum, frame):
    raise KeyboardInterrupt


class Progress:
    """One line per finished trial: a bar, counts, and the best so far."""

    def __init__(self, total: int, done: int, spec: SweepSpec, stream=None):
        self.total, self.done, self.spec = total, done, spec
        self.stream = stream or sys.stderr
        self.running = 0
        self.diverged = 0
        self.t0 = time.perf_counter()

    def line(self, study: optuna.Study, trial: optuna.Trial | None, out: Outcome | None):
        width = 20
        fill = int(width * self.done / max(1, self.total))
        bar = "#" * fill + "." * (width - fill)
        text = (f"[{bar}] {self.done}/{self.total} done, {self.running} running, "
                f"{self.diverged} diverged")
        if trial is not None and out is not None:
            what = out.attrs.get("arm", "search")
            if out.state == TrialState.COMPLETE:
                v = out.attrs
                text += (f" | #{trial.number} {what}: spikes {v['spikes']:.2f}, "
                         f"conv {v['convergence']:.0f}")
            else:
                text += f" | #{trial.number} {what}: {out.state.name.lower()}"
                if "error" in out.attrs:
                    text += f" ({out.attrs['error'][:80]})"
        best = best_summary(study)
        if best:
            text += f" | best {best}"
        self.stream.write(f"{text} [{time.perf_counter() - self.t0:.0f}s]\n")
        self.stream.flush()


def best_summary(study: optuna.Study) -> str:
    try:
        best = study.best_trials
    except ValueError:
        return ""
    if not best:
        return ""
    if len(study.directions) == 1:
        t = best[0]
        return f"#{t.number} convergence {t.values[0]:.0f}"
    return f"{len(best)} on the Pareto front"


def export_trials(study: optuna.Study, study_dir: Path) -> Path:
    """``trials.csv``: one row per trial with params, values, states and scores."""
    df = study.trials_dataframe(attrs=("number", "state", "values", "params", "user_attrs",
                                       "duration"))
    df = df.drop(columns=[c for c in df.columns if c.endswith("per_seed")], errors="ignore")
    path = study_dir / "trials.csv"
    atomic_write_text(path, df.to_csv(index=False))
    return path


def run_sweep(spec: SweepSpec, *, results: str | Path = "results", jobs: int | None = None,
              storage: str | None = None, log: Callable[[str], None] | None = None) -> dict:
    """Run (or resume) the sweep until ``len(arms) + trials`` trials are done."""
    log = log or (lambda s: print(s, file=sys.stderr, flush=True))
    study_dir = Path(results) / spec.name
    url = storage or spec.storage or default_storage(study_dir)
    slots = make_slots(jobs) if jobs != 0 else []  # 0: create the study for workers only
    with _exclusive(study_dir):
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        # On a shared storage the driver's trials beat like a worker's, so that if this
        # driver dies for good, workers retry its trials once they go stale.
        shared = not is_sqlite(url)
        storage = make_storage(url, heartbeat=shared)
        study = open_study(spec, storage)
        # SQLite serves one machine and the lock file one driver: what is RUNNING is stale.
        # On a shared storage, only the trials this results folder's last driver left.
        owner = f"{socket.gethostname()}:{study_dir.resolve()}"
        recovered = recover_interrupted(study, spec, owner if shared else None)
        enqueue_plan(study, spec)
        total = len(spec.arms) + spec.trials
        done = count_done(study)
        log(f"study {spec.name!r} in {study_dir}/ (storage {mask_url(url)}): {done}/{total} "
            f"trials done" + (f", {recovered} interrupted trial(s) to retry" if recovered
                              else "") + f"; {len(slots)} worker(s): "
            + ", ".join(f"{s.name}x{s.threads}t" for s in slots))
        progress = Progress(total, done, spec)
        lock = threading.Lock()
        free: Queue[Slot] = Queue()
        for s in slots:
            free.put(s)
        trials_dir = study_dir / "trials"
        stopping = threading.Event()

        def task() -> None:
            slot = free.get()
            try:
                with lock, warnings.catch_warnings():
                    # Optuna warns that heartbeats are meant for optimize(): we beat ourselves.
                    warnings.simplefilter("ignore", UserWarning)
                    trial = study.ask()
                    trial.set_user_attr("driver", owner)
                    progress.running += 1
                if heart:
                    heart.add(trial._trial_id)
                try:
                    out = run_trial(trial, spec, slot, trials_dir, lock)
                except Exception as e:  # noqa: BLE001 - one broken trial must not end the sweep
                    out = Outcome(TrialState.FAIL, attrs={"error": f"{type(e).__name__}: {e}"})
                if heart:
                    heart.discard(trial._trial_id)
                if stopping.is_set():
                    return  # interrupted: left RUNNING, so the next run retries it
                with lock:
                    _tell(study, trial, out)
                    progress.running -= 1
                    progress.done += 1
                    progress.diverged += bool(out.attrs.get("diverged_seeds"))
                    progress.line(study, trial, out)
            finally:
                free.put(slot)

        heart = _Heartbeat(storage) if shared else None
        old = signal.signal(signal.SIGTERM, _sigterm)
        try:
            remaining = max(0, total - done) if slots else 0
            runner = Parallel(n_jobs=max(1, len(slots)), backend="threading",
                              return_as="generator_unordered")
            for _ in runner(delayed(task)() for _ in range(remaining)):
                pass
        except KeyboardInterrupt:
            stopping.set()
            _kill_children()
            log("interrupted: finished trials are kept; run the same command to resume")
            raise
        finally:
            if heart:
                heart.stop()
            signal.signal(signal.SIGTERM, old)
            export_trials(study, study_dir)
        n_done = count_done(study)
        return {"study": spec.name, "dir": str(study_dir), "done": n_done, "total": total,
                "trials_csv": str(study_dir / "trials.csv")}


class _Heartbeat:
    """Records a heartbeat for each trial running here, at once and then every storage
    heartbeat interval from a daemon thread: what ``study.optimize`` does for a worker's
    trial, done for the driver's ask/tell."""

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
                self.storage.record_heartbeat(trial_id)

    def stop(self) -> None:
        self._stop.set()


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
               log: Callable[[str], None] | None = None) -> int:
    """Join a shared study and run trials until it has its target number of finished ones.

    Heartbeats mark this worker alive; trials of a worker that died are failed after the
    grace period and retried by whichever worker notices. A worker stops starting trials
    once finished plus running trials reach the target, so workers do not overshoot it.
    """
    log = log or (lambda s: print(s, file=sys.stderr, flush=True))
    if is_sqlite(url):
        raise ConfigError(f"--storage {mask_url(url)}: SQLite cannot be shared by workers on "
                          "several machines; use PostgreSQL (postgresql://user:pass@host/db), "
                          "or run `spikebench sweep --jobs N` on one machine")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = make_storage(url, heartbeat=True)
    try:
        spec = load_spec(optuna.load_study(study_name=study_name, storage=storage))
    except KeyError:
        raise ConfigError(f"--study {study_name!r}: no such study in {mask_url(url)}") from None
    study = optuna.load_study(study_name=study_name, storage=storage,
                              sampler=make_sampler(spec), pruner=make_pruner(spec))
    slot = make_slots(1)[0]
    trials_dir = Path(results) / spec.name / "trials"
    target = study.user_attrs.get("target_trials", len(spec.arms) + spec.trials)

    def objective(trial: optuna.Trial):
        gate.release()  # the trial exists (RUNNING): other workers may check the target now
        try:
            out = run_trial(trial, spec, slot, trials_dir, nullcontext())
        except Exception as e:  # noqa: BLE001 - record it and keep the worker alive
            out = Outcome(TrialState.FAIL, attrs={"error": f"{type(e).__name__}: {e}"})
        for k, v in out.attrs.items():
            trial.set_user_attr(k, v)
        for k, v in out.constraints.items():
            trial.set_constraint(k, v)
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
    gate = _TargetGate(storage, study_name)
    try:
        while True:
            # Checking the target and creating the next trial are one step across workers,
            # else two workers that both see one trial left both start one.
            gate.acquire()
            done, running, on_workers = counts(study)
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
        gate.close()
    log(f"worker done: study {study_name!r} has {count_done(study)}/{target} finished "
        f"trials; this worker ran {ran}")
    return 0
