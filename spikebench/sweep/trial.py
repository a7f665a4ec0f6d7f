"""One sweep trial: its seeds trained in a fresh process, scored, and recorded on the trial.

The process (:mod:`.runner`) is pinned to a slot; while its first seed trains it streams
validation losses back for the pruner. A crash or an out-of-memory kill is an ``Outcome``
in state FAIL with the error, never an exception out of the sweep.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import TrialState

from spikebench import metrics as M
from spikebench.runio import atomic_write_json
from spikebench.scoring.trial import score_trial
from spikebench.study import layout as L
from spikebench.study import records
from spikebench.study.artifacts import open_store, upload_seeds
from spikebench.sweep import spares
from spikebench.sweep.runner import carry_over
from spikebench.sweep.slots import Slot
from spikebench.sweep.spares import slot_env
from spikebench.sweep.spec import SweepSpec, resolve_config
from spikebench.sweep.studies import suggest
from spikebench.train.launch import command


@dataclass
class Outcome:
    state: TrialState
    values: list[float] | None = None
    attrs: dict[str, Any] = field(default_factory=dict)
    constraints: dict[str, float] = field(default_factory=dict)


# The trial processes running now, killed together when the sweep is interrupted.
_children: set[subprocess.Popen] = set()
_children_lock = threading.Lock()


def run_trial(trial: optuna.Trial, spec: SweepSpec, slot: Slot, trials_dir: Path,
              lock: threading.Lock | nullcontext, warm_next: bool = True) -> Outcome:
    """Run one trial (all its seeds) in a fresh process and score it. Never raises for a
    failing trial: a crash is an ``Outcome`` in state FAIL with the error in its attrs.
    ``warm_next``: start the slot's next process now (more trials will follow here)."""
    with lock:
        params = suggest(trial, spec.space)
        arm = trial.user_attrs.get("arm", "search")
    if spec.trainer:
        return _run_command_trial(trial, spec, slot, trials_dir, lock, params, arm)
    cfg = resolve_config(spec.base, spec.arms.get(arm, {}), params)
    cfg.train.progress = False
    cfg.train.threads = slot.threads
    cfg.spikes.target_loss = spec.target_loss
    if slot.name.startswith("cpu"):
        cfg.train.device = "cpu"
    trial_dir, old, carried = _trial_folder(trial, spec, trials_dir)
    atomic_write_json(trial_dir / L.TRIAL_JSON, {
        "number": trial.number, "arm": arm, "params": trial.params, "overrides": params,
        "seeds": spec.seeds, "slot": slot.name, "config": cfg.to_dict(),
        "resume_from": str(old) if old is not None and old.is_dir() else None,
        "carried_over": carried})
    # Each rank of a data-parallel trial gets its share of the slot's threads.
    env = slot_env(slot, max(1, slot.threads // cfg.train.nproc))
    cmd = [sys.executable, "-m", "spikebench.sweep.runner", str(trial_dir)]
    if cfg.train.nproc > 1:
        cmd = command(cfg.train.nproc, "spikebench.sweep.runner", str(trial_dir))
    attrs: dict[str, Any] = {"arm": arm, "dir": str(trial_dir), "slot": slot.name,
                             "overrides": dict(params)}
    with open(trial_dir / L.STDERR, "w") as err:
        # A warm process of this slot when there is one (it writes stderr.log itself).
        proc = (spares.take(slot, trials_dir, trial_dir, start_next=warm_next)
                if cfg.train.nproc == 1 else None)
        if proc is None:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True,
                                    env=env)
        with _children_lock:
            _children.add(proc)
        try:
            pruned = _follow(proc, trial, spec, lock, attrs, proc.kill)
            proc.wait()
        except BaseException:  # interrupted here (a worker's SIGTERM): the trial's
            proc.kill()  # process goes now, not only once this one exits
            raise
        finally:
            with _children_lock:
                _children.discard(proc)
            _stop_helpers(trial_dir)
    return _outcome(proc, pruned, trial_dir, spec, attrs)


def _trial_folder(trial: optuna.Trial, spec: SweepSpec, trials_dir: Path
                  ) -> tuple[Path, Path | None, dict[str, str]]:
    """The trial's folder, made; the folder of the trial it retries (None); and the seeds
    carried over from it. A retry continues from what the trial it retries left: its
    finished seeds and its checkpoints, when that folder is here (a results folder shared
    between servers)."""
    trial_dir = trials_dir / L.trial_name(trial.number)
    trial_dir.mkdir(parents=True, exist_ok=True)
    retry_of = trial.user_attrs.get("retry_of")
    old = trials_dir / L.trial_name(retry_of) if isinstance(retry_of, int) else None
    carried = {str(s): how for s in spec.seeds if (how := carry_over(
        old / L.seed_name(s) if old is not None else None, trial_dir / L.seed_name(s)))}
    return trial_dir, old, carried


def _follow(proc: subprocess.Popen, trial: optuna.Trial, spec: SweepSpec,
            lock: threading.Lock | nullcontext, attrs: dict[str, Any], stop) -> bool:
    """Report each validation loss the trial's process prints (``{"step", "val/loss"}``
    lines) to the pruner; on a prune, ``stop()`` it and return True."""
    for line in proc.stdout:
        if spec.objective != "single":
            continue  # Optuna cannot prune multi-objective studies
        try:
            report = json.loads(line)
        except json.JSONDecodeError:
            continue
        with lock:
            trial.report(report[M.VAL_LOSS], report[M.STEP])
            pruned = trial.should_prune()
        if pruned:
            stop()
            attrs["pruned_at_step"] = report[M.STEP]
            return True
    return False


def _outcome(proc: subprocess.Popen, pruned: bool, trial_dir: Path, spec: SweepSpec,
             attrs: dict[str, Any]) -> Outcome:
    if pruned:
        return Outcome(TrialState.PRUNED, attrs=attrs)
    result_path = trial_dir / L.RESULT_JSON
    if proc.returncode != 0 or not result_path.exists():
        tail = (trial_dir / L.STDERR).read_text().strip().splitlines()
        attrs["error"] = tail[-1] if tail else f"exit code {proc.returncode}"
        return Outcome(TrialState.FAIL, attrs=attrs)
    return score(json.loads(result_path.read_text()), spec, attrs)


def command_argv(spec: SweepSpec) -> list[str]:
    """The trainer's command, each element naming a file beside the sweep file (a relative
    path such as ``train.py``) made absolute: the command runs in the seed's run folder."""
    here = Path(spec.path).resolve().parent
    out = []
    for element in spec.trainer["command"]:
        if (element and not element.startswith(("-", "{")) and not Path(element).is_absolute()
                and (here / element).is_file()):
            element = str(here / element)
        out.append(element)
    return out


def _run_command_trial(trial: optuna.Trial, spec: SweepSpec, slot: Slot, trials_dir: Path,
                       lock: threading.Lock | nullcontext, params: dict[str, Any],
                       arm: str) -> Outcome:
    """A ``[trainer]`` trial (:mod:`.command`): the trainer's parameters are the base, the
    arm's and the sampled values, free-form. Pruned: the trial's prune file is made, and
    after ``grace_s`` its process, if still running, gets SIGTERM (which it passes on, then
    SIGKILL after ``grace_s``)."""
    values = {**spec.base, **spec.arms.get(arm, {}), **params}
    # The command runs in its seed's folder: every path it is given must be absolute.
    trial_dir, old, carried = _trial_folder(trial, spec, trials_dir.resolve())
    spikes = {"detector": "default", "gap": 5, "target_loss": spec.target_loss}
    trainer = {**spec.trainer, "command": command_argv(spec)}
    atomic_write_json(trial_dir / L.TRIAL_JSON, {
        "number": trial.number, "arm": arm, "params": values, "overrides": params,
        "seeds": spec.seeds, "slot": slot.name, "trainer": trainer, "spikes": spikes,
        "config": {"spikes": spikes},
        "resume_from": str(old) if old is not None and old.is_dir() else None,
        "carried_over": carried})
    attrs: dict[str, Any] = {"arm": arm, "dir": str(trial_dir), "slot": slot.name,
                             "overrides": dict(params)}
    cmd = [sys.executable, "-m", "spikebench.sweep.command", str(trial_dir)]
    with open(trial_dir / L.STDERR, "w") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True,
                                env=slot_env(slot, slot.threads))
        with _children_lock:
            _children.add(proc)
        def stop() -> None:
            # SPIKEBENCH_PRUNE_FILE first: a command on the run API sees PRUNE at its next
            # run.log and finishes as pruned (its rows kept) if given grace_s to do so.
            (trial_dir / L.PRUNE).touch()
            try:
                proc.wait(timeout=float(spec.trainer["grace_s"]))
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGTERM)  # the runner: SIGTERM, grace, SIGKILL

        try:
            pruned = _follow(proc, trial, spec, lock, attrs, stop)
            proc.wait()
        except BaseException:  # interrupted here (a worker's SIGTERM): the trial's
            proc.kill()  # process goes now, not only once this one exits
            raise
        finally:
            with _children_lock:
                _children.discard(proc)
    return _outcome(proc, pruned, trial_dir, spec, attrs)


# Helpers (spikebench.sweep.claims) running now, by the trial folder they help.
_helpers: dict[Path, set[subprocess.Popen]] = {}


def help_trial(trial_dir: Path, slot: Slot) -> None:
    """Train seeds of the running trial in ``trial_dir`` on ``slot`` until none is left to
    claim (``runner --help-trial``). Its failures are the trial's to see: the trial's
    process takes over a seed whose helper died."""
    with open(trial_dir / f"helper-{slot.name}.log", "w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "spikebench.sweep.runner", "--help-trial", str(trial_dir)],
            stdout=subprocess.DEVNULL, stderr=err, env=slot_env(slot, slot.threads))
        with _children_lock:
            _children.add(proc)
            _helpers.setdefault(trial_dir, set()).add(proc)
        try:
            proc.wait()
        finally:
            with _children_lock:
                _children.discard(proc)
                _helpers.get(trial_dir, set()).discard(proc)


def _stop_helpers(trial_dir: Path) -> None:
    """The trial's process ended (done, pruned or failed): its helpers have no work left."""
    with _children_lock:
        procs = list(_helpers.pop(trial_dir, ()))
    for p in procs:
        p.kill()


def score(result: dict[str, Any], spec: SweepSpec, attrs: dict[str, Any]) -> Outcome:
    carried = {str(r["seed"]): r["carried_over"] for r in result["seeds"]
               if r.get("carried_over")}
    if carried:  # seeds taken over from the interrupted trial this one retries
        attrs = {**attrs, "carried_over": carried}
    values, scored, limits = score_trial(
        result["seeds"], steps=spec.steps, target=spec.target_loss,
        spike_metric=spec.spike_metric, objective=spec.objective, spike_limit=spec.spike_limit)
    return Outcome(TrialState.COMPLETE, values, {**attrs, **scored}, limits)


def record(trial: optuna.Trial, out: Outcome, artifacts: str = "") -> None:
    """Put an outcome's attributes and constraints on its trial (before it is told), and
    what its folder holds for a report (:mod:`spikebench.study.records`), so the storage
    alone can be reported from a machine that cannot see this one's folders. ``artifacts``
    (the sweep's ``study.artifacts``): each seed's full logs are uploaded there too."""
    for k, v in out.attrs.items():
        trial.set_user_attr(k, v)
    for k, v in out.constraints.items():
        trial.set_constraint(k, v)
    folder = out.attrs.get("dir")
    if isinstance(folder, str) and Path(folder).is_dir():
        full = (upload_seeds(trial, open_store(artifacts), artifacts, Path(folder))
                if artifacts else None)
        records.store(trial.storage, trial._trial_id, Path(folder), full)


def kill_children() -> None:
    spares.close()
    with _children_lock:
        for p in list(_children):
            p.kill()
