"""The local sweep driver (``spikebench sweep``): trials in fresh worker processes, told to
Optuna by this process alone.

The driver alone talks to the storage (ask/tell under one lock), so parallel workers never
meet SQLite's "database is locked"; joblib runs one thread per worker slot, each running
its trial as a subprocess (:mod:`.trial`). A lock file keeps a second driver off the same
results folder; on start, trials a killed driver left running are failed and enqueued
again, so a sweep resumes with the same command.
"""

from __future__ import annotations

import fcntl
import itertools
import re
import signal
import socket
import sys
import threading
import time
import warnings
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from queue import Queue
from typing import Any

import optuna
from joblib import Parallel, delayed
from optuna.trial import TrialState

from spikebench.errors import UserError
from spikebench.runio import atomic_write_text
from spikebench.study import layout as L
from spikebench.study.artifacts import open_store
from spikebench.sweep import claims, spares
from spikebench.sweep.folders import check_folder, make_folder
from spikebench.sweep.resilience import tune
from spikebench.sweep.slots import Slot, make_slots
from spikebench.sweep.spec import SweepSpec
from spikebench.sweep.storage import (
    check_storage,
    default_storage,
    is_sqlite,
    make_storage,
    mask_url,
)
from spikebench.sweep.studies import (
    Heartbeat,
    check_study,
    count_done,
    enqueue_plan,
    give_back,
    open_study,
    recover_interrupted,
)
from spikebench.sweep.trial import Outcome, help_trial, kill_children, record, run_trial
from spikebench.sweep.utilisation import measure


@contextmanager
def _exclusive(study_dir: Path):
    study_dir.mkdir(parents=True, exist_ok=True)  # run_sweep checked it first (make_folder)
    f = open(study_dir / L.LOCK, "w")  # noqa: SIM115 - held for the whole sweep
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.close()
        raise UserError(f"results folder {str(study_dir)!r}: another sweep is running "
                          "on this study (its lock file is held)") from None
    try:
        yield
    finally:
        f.close()


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
                    text += f" ({clip(out.attrs['error'])})"
        best = best_summary(study)
        if best:
            text += f" | best {best}"
        self.stream.write(f"{text} [{time.perf_counter() - self.t0:.0f}s]\n")
        self.stream.flush()


def clip(text: str, width: int = 80) -> str:
    """``text`` cut to ``width`` characters at a word's end, with an ellipsis: a cut inside
    a quoted name would read as another name ("nor its log 't")."""
    if len(text) <= width:
        return text
    cut = text[:width - 1]
    return (cut[:cut.rfind(" ")] if " " in cut else cut).rstrip(" ,;:") + "…"


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
              storage: str | None = None, log: Callable[[str], None] | None = None,
              metrics: Any = None) -> dict:
    """Run (or resume) the sweep until ``len(arms) + trials`` trials are done. ``metrics``
    (a :class:`~spikebench.live.exporter.Exporter`) is fed the running trials' logs and the
    sweep's progress."""
    log = log or (lambda s: print(s, file=sys.stderr, flush=True))
    study_dir = Path(results) / spec.name
    url = storage or spec.storage or default_storage(study_dir)
    # Everything a sweep refuses is refused before it writes a file: the storage URL, the
    # results folder, then the storage itself and the study in it (read only). Only a new
    # SQLite file of its own, which holds nothing to refuse, waits for its folder and lock.
    check_storage(url)
    check_folder(study_dir / L.TRIALS, results)
    if spec.artifacts and jobs != 0:  # a store it cannot write: refused before any trial
        open_store(spec.artifacts)
    # Each trial's ranks: GPUs, else processes (a [trainer] command starts its own).
    nproc = 1 if spec.trainer else int(spec.base.get("train.nproc", 1))
    slots = make_slots(jobs, nproc) if jobs != 0 else []  # 0: create the study for workers only
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    # On a shared storage the driver's trials beat like a worker's, so that if this
    # driver dies for good, workers retry its trials once they go stale.
    shared = not is_sqlite(url)
    opened = None
    if url != default_storage(study_dir) or (study_dir / L.STUDY_DB).exists():
        opened = make_storage(url, heartbeat=shared)
        check_study(spec, opened)
    make_folder(study_dir / L.TRIALS, results)
    with _exclusive(study_dir):
        storage = opened or make_storage(url, heartbeat=shared)
        study = open_study(spec, storage)
        tune(storage, spec)  # its trials beat as the study says, as workers' do
        # SQLite serves one machine and the lock file one driver: what is RUNNING is stale.
        # On a shared storage, only the trials this results folder's last driver left.
        owner = f"{socket.gethostname()}:{study_dir.resolve()}"
        recovered = recover_interrupted(study, spec, owner if shared else None)
        enqueue_plan(study, spec, gpu=any(s.gpu for s in slots))
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
        trials_dir = study_dir / L.TRIALS
        stopping = threading.Event()
        failed = [sum(t.state == TrialState.FAIL for t in study.get_trials(deepcopy=False))]
        follower = None
        if metrics is not None:
            from spikebench.live.follow import Follower

            follower = Follower(metrics, trials_dir).start()
            metrics.sweep_progress(done, 0, failed[0])

        def task() -> None:
            slot = free.get()
            try:
                if given_back:
                    return  # this results folder failed a trial: ask for no more
                with lock, warnings.catch_warnings():
                    # Optuna warns that heartbeats are meant for optimize(): we beat ourselves.
                    warnings.simplefilter("ignore", UserWarning)
                    trial = study.ask()
                    trial.set_user_attr("driver", owner)
                    progress.running += 1
                    asked[0] += 1
                    # Warm a process for this slot's next trial only while every slot
                    # still has one to come: a spare at the sweep's end would go unused.
                    warm_next = remaining - asked[0] >= len(slots)
                    if metrics is not None:
                        metrics.sweep_progress(progress.done, progress.running, failed[0])
                if heart:
                    heart.add(trial._trial_id)
                trial_dir = trials_dir / L.trial_name(trial.number)
                ran.append(trial_dir)
                with lock:
                    running.append(trial_dir)
                own = None
                try:
                    out = run_trial(trial, spec, slot, trials_dir, lock, warm_next)
                except OSError as e:  # its folder or process could not be made: not its fault
                    own = f"{type(e).__name__}: {e}"
                except Exception as e:  # noqa: BLE001 - one broken trial must not end the sweep
                    out = Outcome(TrialState.FAIL, attrs={"error": f"{type(e).__name__}: {e}"})
                finally:
                    with lock:
                        running.remove(trial_dir)
                if heart:
                    heart.discard(trial._trial_id)
                if stopping.is_set():
                    return  # interrupted: left RUNNING, so the next run retries it
                if own is not None:  # given back, not counted: the next run retries it
                    with lock:
                        give_back(study, spec, trial, own, retry=False)
                        given_back.append(f"trial #{trial.number}: {own}")
                        progress.running -= 1
                    return
                with lock:
                    record(trial, out, spec.artifacts)
                    study.tell(trial, out.values if out.state == TrialState.COMPLETE else None,
                               state=out.state)
                    progress.running -= 1
                    progress.done += 1
                    progress.diverged += bool(out.attrs.get("diverged_seeds"))
                    failed[0] += out.state == TrialState.FAIL
                    progress.line(study, trial, out)
                    if metrics is not None:
                        metrics.sweep_progress(progress.done, progress.running, failed[0])
            finally:
                with lock:
                    finished[0] += 1
                free.put(slot)

        running: list[Path] = []  # trial folders whose process runs now
        finished = [0]  # trial tasks ended (the helpers stop when all have)

        def helper() -> None:
            """Once every trial has started, a worker that would sit idle helps a running
            trial with its seeds (spikebench.sweep.claims), the one with most left."""
            slot = free.get()
            try:
                while not stopping.is_set():
                    with lock:
                        left = {d: len(claims.unclaimed(d, claims.helpable(spec.seeds))) for d in running
                                if (d / L.TRIAL_JSON).is_file()}
                        if finished[0] == remaining:
                            return
                    target = max(left, key=left.get, default=None)
                    if target is not None and left[target]:
                        help_trial(target, slot)
                    else:  # a trial is starting, or the running ones have no seed left
                        time.sleep(0.2)
            finally:
                free.put(slot)

        heart = Heartbeat(storage) if shared else None
        given_back: list[str] = []  # trials this results folder could not start
        old = signal.signal(signal.SIGTERM, _sigterm)
        ran: list[Path] = []  # the trial folders this run started
        asked = [0]
        started = time.monotonic()
        spares.open_()
        try:
            remaining = max(0, total - done) if slots else 0
            runner = Parallel(n_jobs=max(1, len(slots)), backend="threading",
                              return_as="generator_unordered")
            # Helpers only for single-process trials: a data-parallel trial's ranks
            # train every seed together.
            # A command trial runs its seeds itself (no helpers).
            helpers = len(slots) - 1 if remaining and nproc == 1 and not spec.trainer else 0
            for _ in runner(itertools.chain((delayed(task)() for _ in range(remaining)),
                                            (delayed(helper)() for _ in range(helpers)))):
                pass
        except KeyboardInterrupt:
            stopping.set()
            kill_children()
            log("interrupted: finished trials are kept; run the same command to resume")
            raise
        finally:
            spares.close()
            if heart:
                heart.stop()
            if follower is not None:
                follower.stop()
            signal.signal(signal.SIGTERM, old)
            export_trials(study, study_dir)
        if given_back:
            raise UserError(f"results folder {str(study_dir)!r}: {given_back[0][:300]}; "
                            f"{len(given_back)} trial(s) given back to the study, not counted: "
                            "fix the folder and run the same command")
        n_done = count_done(study)
        used = measure(ran, len(slots), time.monotonic() - started)
        if ran:
            log(used.line())
        return {"study": spec.name, "dir": str(study_dir), "done": n_done, "total": total,
                "trials_csv": str(study_dir / "trials.csv"), "utilisation": used,
                "all_failed": all_failed(study)}


def all_failed(study: optuna.Study) -> str:
    """One line when every trial that counts failed (none completed or was pruned): the
    sweep's work failed, and the line says where to look; "" otherwise."""
    trials = study.get_trials(deepcopy=False)
    if not trials or any(t.state in (TrialState.COMPLETE, TrialState.PRUNED) for t in trials):
        return ""
    counted = count_done(study, trials)  # with none complete or pruned: the failed ones
    failed = [t for t in trials if t.state == TrialState.FAIL]
    if not counted or not failed:
        return ""
    first = failed[0]
    error = str(first.user_attrs.get("error", "no error recorded"))
    folder = Path(str(first.user_attrs.get("dir", "")))
    log = folder / L.STDERR
    seed = re.match(r"seed (\d+): ", error)  # a command trial's seed names its own log
    if seed and (folder / L.seed_name(int(seed[1])) / L.STDERR).is_file():
        log = folder / L.seed_name(int(seed[1])) / L.STDERR
    where = f"; its log: {log}" if first.user_attrs.get("dir") and log.is_file() else ""
    return (f"all {counted} trial(s) failed; the first, #{first.number} "
            f"({first.user_attrs.get('arm', 'search')}): {clip(error, 160)}{where}")

