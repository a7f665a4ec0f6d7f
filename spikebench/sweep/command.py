"""A command trial: the team's own trainer, run per seed (``[trainer]`` in a sweep file).

``python -m spikebench.sweep.command TRIAL_DIR`` is the trial's process, as
:mod:`.runner` is the built-in engine's: it reads ``TRIAL_DIR/trial.json`` (the trainer
table, the trial's parameters, the seeds), and for each seed starts the command in the
seed's run folder ``TRIAL_DIR/seed-<n>/`` with the macros expanded and the environment
variables of :mod:`spikebench.api.context` set. The command dies with this process
(PR_SET_PDEATHSIG, and its own process group, which a SIGTERM here reaches: SIGTERM, then
SIGKILL after ``grace_s``). Its stdout and stderr go to the run folder's ``stdout.log`` and
``stderr.log``.

After it exits 0 the seed's summary is the run folder's ``summary.json`` when the script
used the API (:func:`spikebench.init`); else its log (``log``: a file or folder in any
format :mod:`spikebench.runs` reads, read as ``spikebench spikes`` reads it) is read whole
and scored by the API's own code, which writes ``summary.json``; a log that ends short of
the budget, or runs past it, fails the seed. A non-zero exit fails the trial with the last
line of the command's stderr. While a seed runs, its ``log`` is scored as it grows
(:class:`LiveLog` over :class:`spikebench.runs.tail.Tail`: the run folder's
``metrics.jsonl.partial``, which the sweep's live metrics follow); the first seed's
validation losses (from ``log`` or the API's ``metrics.jsonl``) are printed as the built-in
runner prints them, so the driver prunes command trials as it prunes its own.
``TRIAL_DIR/result.json`` is written as :mod:`.runner` writes it.
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from spikebench import metrics as M
from spikebench.api import context
from spikebench.api.decision import Decision
from spikebench.errors import UserError
from spikebench.runio import atomic_write_json, die_with_parent, kill_with_parent
from spikebench.runs.tail import Tail
from spikebench.study import layout as L
from spikebench.sweep.trainer_table import ARGS_MACRO

POLL_S = 0.2  # how often the first seed's log is read for new validation losses
PRUNE_FILE = "prune"  # in the trial folder: made by the driver when it prunes the trial
API_LOG = L.METRICS  # what spikebench.init writes in the run folder
TRACEBACK = "Traceback (most recent call last):"
TORCHRUN_LOG = re.compile(r"[IWEF]\d{4} \d\d:\d\d:\d\d")  # torchrun's lines ("W1203 17:04:25")


def flag_value(value: Any) -> str:
    """A parameter as ``{args}`` writes it: strings as they are, other values as JSON."""
    return value if isinstance(value, str) else json.dumps(value)


def expand(command: list[str], *, params: dict[str, Any], params_file: Path, run_dir: Path,
           seed: int, trial_dir: Path) -> list[str]:
    """The command with its macros replaced by this seed's values; the element ``{args}``
    becomes one ``--key=value`` flag per parameter."""
    values = {"params_file": str(params_file), "params_json": json.dumps(params),
              "run_dir": str(run_dir), "seed": str(seed), "trial_dir": str(trial_dir),
              "checkpoint_dir": str(run_dir / "checkpoints")}
    out: list[str] = []
    for element in command:
        if element == ARGS_MACRO:
            out += [f"--{k}={flag_value(v)}" for k, v in params.items()]
            continue
        for name, value in values.items():
            element = element.replace("{" + name + "}", value)
        out.append(element)
    return out


def seed_env(job: dict[str, Any], trial_dir: Path, run_dir: Path, seed: int) -> dict[str, str]:
    """The command's environment: this process's, the trainer's ``env``, and the sweep's
    context (:mod:`spikebench.api.context`)."""
    spikes = job["spikes"]
    env = {**os.environ, **job["trainer"]["env"],
           context.RUN_DIR: str(run_dir), context.SEED: str(seed),
           context.PARAMS_FILE: str(trial_dir / "params.json"),
           context.PRUNE_FILE: str(trial_dir / PRUNE_FILE),
           context.DETECTOR: str(spikes["detector"]), context.GAP: str(spikes["gap"]),
           context.TARGET_LOSS: repr(float(spikes["target_loss"]))}
    env.pop("SPIKEBENCH_PARENT_PID", None)  # the command's parent is this process
    return env


def read_log(path: Path, job: dict[str, Any]) -> list[dict[str, Any]]:
    """A trainer's own log read whole, as ``spikebench spikes`` reads it: its one run's
    records. A log of several runs, one that ends short of the budget (``[trainer]
    steps``: its last step and the log's own interval fall short of it) or one that runs
    past it is refused in one line."""
    from spikebench.runs import read_runs

    name = job["trainer"]["log"]
    runs = read_runs(path)
    if len(runs) != 1:
        shown = ", ".join(repr(r.name) for r in runs[:5]) + (", ..." if len(runs) > 5 else "")
        raise UserError(f"its log {name!r} holds {len(runs)} runs ({shown}); a seed's log "
                        "is one run")
    records = runs[0].records
    budget = int(job["trainer"]["steps"])
    train = [r[M.STEP] for r in records if M.TRAIN_LOSS in r]
    last = train[-1]
    every = max((b - a for a, b in zip(train, train[1:], strict=False)), default=1)
    if last > budget:
        raise UserError(f"its log {name!r} reaches step {last}, past the budget of {budget} "
                        "steps ([trainer] steps): the command must stop there")
    diverged = any(not math.isfinite(r[M.TRAIN_LOSS]) for r in records if M.TRAIN_LOSS in r)
    if last + every < budget and not diverged:
        raise UserError(f"its log {name!r} ends at step {last}, short of the budget of "
                        f"{budget} steps, though the command exited 0")
    return records


def score_log(path: Path, run_dir: Path, job: dict[str, Any], seed: int) -> dict[str, Any]:
    """Score a trainer's own log by the API's code (:class:`spikebench.api.run.Run`), which
    writes the run folder's ``metrics.jsonl``, ``meta.json`` and ``summary.json``."""
    from spikebench.api.run import Run

    records = read_log(path, job)  # read whole before writing
    spikes = job["spikes"]
    run = Run(params=job["params"], seed=seed, run_dir=run_dir, detector=spikes["detector"],
              gap=spikes["gap"], target_loss=spikes["target_loss"], device="cpu")
    for rec in records:
        rec = dict(rec)
        step = rec.pop(M.STEP)
        if run.log(step, rec) is Decision.DIVERGED:
            break  # the built-in loop stops at a non-finite loss too
    return run.finish()


class LiveLog:
    """A trainer's own log scored while it grows, so a sweep's live metrics see its loss
    and spike events: its new rows feed a run of the API (online monitor, the run folder's
    ``metrics.jsonl.partial``, which the sweep's follower exports like any trial's log).
    The tail gives a step once a later one began; a step that goes back (a script
    resumed from its checkpoint) ends it: at the end the whole log is read again and scored
    (:func:`score_log`)."""

    def __init__(self, path: Path, run_dir: Path, job: dict[str, Any], seed: int):
        self.tail = Tail(path)
        self.run_dir, self.job, self.seed = run_dir, job, seed
        self.run = None
        self.live = True

    def poll(self, final: bool = False) -> list[dict[str, Any]]:
        """Read and feed what the log gained; returns its new records."""
        records = self.tail.poll(final)
        if self.live:
            for rec in records:
                self._feed(rec)
        return records

    def _feed(self, rec: dict[str, Any]) -> None:
        from spikebench.api.run import Run

        step = rec[M.STEP]
        if M.TRAIN_LOSS not in rec:
            return  # an evaluation without a training loss: the whole read scores it
        try:
            if self.run is None:
                spikes = self.job["spikes"]
                self.run = Run(params=self.job["params"], seed=self.seed,
                               run_dir=self.run_dir, detector=spikes["detector"],
                               gap=spikes["gap"], target_loss=spikes["target_loss"],
                               sync_every=1, device="cpu")
            self.run.log(step, {k: v for k, v in rec.items() if k != M.STEP})
        except UserError:  # the folder cannot take a live view: the end's scoring decides
            self.live = False

    def close(self) -> None:
        """Close the live run's log unfinished (the whole log is scored next)."""
        if self.run is None:
            return
        # Frees the folder for the scoring, and drops the live copy: the whole log is read
        # from the trainer's own file next, so nothing is lost (no .killed file is left).
        self.run.abandon(keep_log=False)


class _Stop(Exception):
    pass


def log_size(path: Path) -> int:
    """How much a log holds now: a file's size, a folder's files' sizes summed (a
    TensorBoard folder), the API's ``metrics.jsonl.partial`` beside a ``metrics.jsonl``
    that is not there yet; -1 when nothing is there."""
    paths = [path, path.with_name(path.name + ".partial")] if path.name == API_LOG else [path]
    total = -1
    for p in paths:
        try:
            if p.is_dir():
                total = max(total, 0) + sum(f.stat().st_size for f in p.rglob("*") if f.is_file())
            elif p.exists():
                total = max(total, 0) + p.stat().st_size
        except OSError:  # a file rotated away while read: counted at the next look
            pass
    return total


class Clock:
    """A seed's time limits (``[trainer] timeout_s`` and ``stall_s``; 0 is none): how long
    its command may run, and how long its log may go without growing (counted from the
    start, so a command that never writes a row stalls too)."""

    def __init__(self, trainer: dict[str, Any], log: Path):
        self.timeout, self.stall = trainer.get("timeout_s", 0), trainer.get("stall_s", 0)
        self.log, self.name = log, trainer["log"] or f"{API_LOG} (spikebench.init)"
        self.start = self.grown = time.monotonic()
        self.size = log_size(log) if self.stall else -1

    def expired(self) -> str:
        """Why the command must stop now ("" while it may go on)."""
        now = time.monotonic()
        then = " (stopped: SIGTERM, then SIGKILL after grace_s)"
        if self.timeout and now - self.start >= self.timeout:
            return f"timed out: still running after timeout_s = {self.timeout:g} s" + then
        if self.stall:
            size = log_size(self.log)
            if size != self.size:
                self.size, self.grown = size, now
            elif now - self.grown >= self.stall:
                return (f"stalled: its log {self.name!r} did not grow for stall_s = "
                        f"{self.stall:g} s" + then)
        return ""


_proc: subprocess.Popen | None = None
_grace = 10.0


def stop(proc: subprocess.Popen, grace: float) -> None:
    """SIGTERM the command's process group, SIGKILL it after ``grace`` seconds."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, None)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def _on_sigterm(signum, frame) -> None:
    """Pruned (or the sweep stopped): end the command gently, then this process."""
    if _proc is not None and _proc.poll() is None:
        stop(_proc, _grace)
    sys.stderr.flush()
    os._exit(128 + signal.SIGTERM)


def _last_line(path: Path) -> str:
    """The last line of the command's stderr. When torchrun's failure report ends it (the
    launcher's own traceback, ruled off with "="), the last line before that report that
    torchrun did not log: the failed rank's ("[rank0]: ValueError: bad lr")."""
    try:
        lines = [s.strip() for s in path.read_text(errors="replace").splitlines() if s.strip()]
    except OSError:
        return ""
    if lines and set(lines[-1]) == {"="} and TRACEBACK in lines:
        report = len(lines) - 1 - lines[::-1].index(TRACEBACK)
        own = [s for s in lines[:report] if not TORCHRUN_LOG.match(s)]
        if own:
            return own[-1]
    return lines[-1] if lines else ""


def run_seed(job: dict[str, Any], trial_dir: Path, seed: int, report: bool) -> dict[str, Any]:
    """Run the command for one seed; its summary. Raises :class:`_Stop` with the reason
    when the seed fails."""
    global _proc
    run_dir = trial_dir / L.seed_name(seed)
    if job.get("carried_over", {}).get(str(seed)) == "done":
        return json.loads((run_dir / L.SUMMARY_JSON).read_text())
    run_dir.mkdir(parents=True, exist_ok=True)
    t = job["trainer"]
    argv = expand(t["command"], params=job["params"], params_file=trial_dir / "params.json",
                  run_dir=run_dir, seed=seed, trial_dir=trial_dir)
    log = run_dir / t["log"] if t["log"] else None
    # A log of the script's own is scored as it grows (every seed: live metrics); the
    # API's log is followed for the first seed's validation losses (pruning).
    live = LiveLog(log, run_dir, job, seed) if log is not None else None
    follow = None
    if report and log is None:  # the API writes metrics.jsonl.partial until it finishes
        follow = Tail(run_dir / API_LOG, before=run_dir / (API_LOG + ".partial"))
    with open(run_dir / "stdout.log", "ab") as out, open(run_dir / L.STDERR, "ab") as err:
        try:
            _proc = subprocess.Popen(argv, cwd=run_dir, env=seed_env(job, trial_dir, run_dir, seed),
                                     stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                     start_new_session=True, preexec_fn=kill_with_parent)
        except (OSError, ValueError) as e:  # ValueError: a NUL byte in an argument
            raise _Stop(f"cannot start {argv[0]!r}: {getattr(e, 'strerror', None) or e}"
                        ) from None
        clock = Clock(t, log if log is not None else run_dir / API_LOG)
        while _proc.poll() is None:
            _poll(live, follow, report, seed)
            why = clock.expired()
            if why:  # a hung or stalled command: stopped, its seed failed, the sweep goes on
                stop(_proc, float(t["grace_s"]))
                raise _Stop(why)
            time.sleep(POLL_S)
    _poll(live, follow, report, seed, final=True)
    if live is not None:
        live.close()
    code = _proc.returncode
    if code != 0:
        last = _last_line(run_dir / L.STDERR)
        how = f"exit code {code}" if code > 0 else f"killed by signal {-code}"
        raise _Stop(f"{how}: {last}" if last else f"{how} (nothing on its stderr)")
    if (run_dir / L.SUMMARY_JSON).is_file():
        summary = json.loads((run_dir / L.SUMMARY_JSON).read_text())
    elif log is not None and log.exists():
        try:
            summary = score_log(log, run_dir, job, seed)
        except UserError as e:
            raise _Stop(str(e)) from None
    else:
        raise _Stop("exited 0 but wrote neither summary.json (spikebench.init) nor "
                    + (f"its log {t['log']!r}" if log is not None else
                       "a log ([trainer] log names the file it writes)"))
    if summary.get("status") not in ("completed", "diverged"):
        raise _Stop(f"its run ended {summary.get('status')!r}")
    return summary


def _poll(live: LiveLog | None, follow: Tail | None, report: bool, seed: int,
          final: bool = False) -> None:
    records = (live.poll(final) if live is not None else
               follow.poll(final) if follow is not None else [])
    if report:
        _report(records, seed)


def _report(records: list[dict[str, Any]], seed: int) -> None:
    for rec in records:
        v = rec.get(M.VAL_LOSS)
        if v is not None and math.isfinite(v) and rec[M.STEP] > 0:
            print(json.dumps({"seed": seed, M.STEP: rec[M.STEP], M.VAL_LOSS: v}), flush=True)


def reap(folder: Path) -> int:
    """Kill the processes still working in ``folder`` (their current directory inside it);
    how many. These are what a killed sweep left of an interrupted trial: torchrun starts its
    ranks in sessions of their own, so its death (SIGKILL, which it cannot pass on) leaves
    them running, and only where they run says whose they are. Linux's /proc; elsewhere 0."""
    root = str(folder.resolve())
    n = 0
    try:
        entries = list(os.scandir("/proc"))
    except OSError:
        return 0
    for entry in entries:
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cwd = os.readlink(f"/proc/{entry.name}/cwd")
        except OSError:
            continue
        if cwd == root or cwd.startswith(root + os.sep):
            try:
                os.kill(int(entry.name), signal.SIGKILL)
                n += 1
            except OSError:
                pass
    return n


def note(run_dir: Path, line: str) -> None:
    """Why a seed failed, as the last line of its own ``stderr.log`` (beside what the
    command wrote there), where the sweep's all-failed line points."""
    try:
        with open(run_dir / L.STDERR, "a") as f:
            f.write(line + "\n")
    except OSError:  # its folder is gone or full: the trial's error still says it
        pass


def run(trial_dir: Path) -> int:
    global _grace
    job = json.loads((trial_dir / L.TRIAL_JSON).read_text())
    _grace = float(job["trainer"]["grace_s"])
    if job.get("resume_from") and Path(job["resume_from"]).is_dir():
        n = reap(Path(job["resume_from"]))
        if n:
            print(f"stopped {n} process(es) the interrupted trial left running in "
                  f"{job['resume_from']}", file=sys.stderr, flush=True)
    atomic_write_json(trial_dir / "params.json", job["params"])
    results = []
    pruned = trial_dir / PRUNE_FILE
    for i, seed in enumerate(job["seeds"]):
        if pruned.exists():  # the sweep pruned the trial: no further seed starts
            return 0
        try:
            summary = run_seed(job, trial_dir, seed, report=i == 0)
        except _Stop as e:
            if pruned.exists():  # it ended as pruned (run.finish("pruned")), as it should
                return 0
            print(f"seed {seed}: {e}", file=sys.stderr, flush=True)
            note(trial_dir / L.seed_name(seed), f"spikebench: seed {seed} failed: {e}")
            return 1
        results.append({"seed": seed, "summary": summary,
                        "carried_over": job.get("carried_over", {}).get(str(seed), "")})
    atomic_write_json(trial_dir / L.RESULT_JSON, {"seeds": results, "warm": False})
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not die_with_parent():
        return 3
    signal.signal(signal.SIGTERM, _on_sigterm)
    return run(Path(argv[0]))


if __name__ == "__main__":
    sys.exit(main())
