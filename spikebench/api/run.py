"""A run of the team's own training loop: ``run = spikebench.init(...)``, ``run.log(step,
loss=...)`` each step, ``run.finish()``.

The run folder it writes is the built-in loop's (``config.json``, ``meta.json``,
``metrics.jsonl``, ``summary.json`` with the same scores), so sweeps, reports and benches
read either alike. A step costs O(1) host work: values are kept as logged, tensors read back
together every ``sync_every`` logged steps (one transfer per device, no sync of their own
in between), then the rows go to the log and the online spike monitor.
"""

from __future__ import annotations

import fcntl
import math
import os
import time
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from spikebench import metrics as M
from spikebench.api import checks, context, folder
from spikebench.api.decision import Decision, TrialPruned
from spikebench.api.warning import Watch
from spikebench.errors import UserError
from spikebench.precursors.rule import WarningRule
from spikebench.runio import atomic_write_json
from spikebench.scoring.run import summarize
from spikebench.spikes.events import Event
from spikebench.spikes.monitor import SpikeMonitor
from spikebench.spikes.reports import Report
from spikebench.study import layout as L
from spikebench.train.sinks import JsonlSink, Sink

# The short names a loop may log under (kept here: the integrations import them).
ALIASES = checks.ALIASES
STATUSES = ("completed", "diverged", "failed", "pruned")
_is_tensor = checks.is_tensor


def _read_back(rows: list[dict[str, Any]]) -> None:
    """Replace every tensor in ``rows`` by a float: one stacked transfer per device."""
    import torch

    by_device: dict[Any, list[tuple[dict, str, Any]]] = {}
    for row in rows:
        for k, v in row.items():
            if _is_tensor(v):
                by_device.setdefault(v.device, []).append((row, k, v))
    for items in by_device.values():
        values = torch.stack([v.detach().float().reshape(()) for _, _, v in items]).tolist()
        for (row, k, _), x in zip(items, values, strict=True):
            row[k] = x


class Run:
    """One seed of a training run; see :func:`spikebench.init`."""

    def __init__(self, *, params: Mapping[str, Any] | None = None, seed: int | None = None,
                 run_dir: str | Path | None = None, detector: str = "default", gap: int = 5,
                 target_loss: float | None = None, sync_every: int = 10,
                 sinks: Sequence[Sink] = (), metrics_port: int | None = None,
                 device: Any = None, out_dir: str | Path = "results/runs", warning: Any = None):
        ctx = context.from_env()
        a = checks.init_args({
            "params": params, "seed": ctx.seed if ctx.seed is not None else seed,
            "run_dir": ctx.run_dir or run_dir, "detector": ctx.detector or detector,
            "gap": ctx.gap if ctx.gap is not None else gap,
            "target_loss": ctx.target_loss if ctx.target_loss is not None else target_loss,
            "sync_every": sync_every, "sinks": sinks, "out_dir": out_dir, "warning": warning,
            "metrics_port": ctx.metrics_port if metrics_port is None else metrics_port})
        self.params: dict[str, Any] = {**(params or {}), **ctx.params}
        self.seed = 0 if a["seed"] is None else a["seed"]
        self.detector, self.gap, self.target_loss = a["detector"], a["gap"], a["target_loss"]
        self.sync_every = a["sync_every"]
        self.rank = int(os.environ.get("RANK", "0") or 0)
        self._prune_file = ctx.prune_file
        self.dir = Path(ctx.run_dir or run_dir or folder.new_dir(Path(out_dir), self.seed))
        self.status: str | None = None
        self.diverged_step: int | None = None
        self.last_event: Event | None = None  # the newest loss event the rule confirmed
        self.last_report: Report | None = None  # the newest loss spike told (SPIKE)
        self.warning: WarningRule | None = a["warning"]  # the early-warning rule, if any
        self._pending: list[dict[str, Any]] = []
        self._history: list[dict[str, Any]] = []
        self._last_step: int | None = None
        self._t0 = time.perf_counter()
        self.summary: dict[str, Any] | None = None
        if self.rank != 0:  # data-parallel: rank 0 writes; the others only see prunes
            self._log, self._sinks, self._monitor, self._watch = None, [], None, None
            return
        self._watch = Watch(self.warning) if self.warning is not None else None
        self._monitor = SpikeMonitor(self.detector, (M.TRAIN_LOSS, M.GRAD_NORM), gap=self.gap)
        self._start(device, list(sinks), a["metrics_port"])

    def _start(self, device: Any, sinks: list[Sink], port: int | None) -> None:
        from spikebench.runio import environment

        if (self.dir / L.SUMMARY_JSON).exists():
            raise UserError(f"run folder {self.dir}: the run already finished (it has a "
                            "summary.json); give another run_dir")
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise UserError(f"run folder {self.dir}: cannot be created ({e.strerror or e})"
                            ) from None
        self._lock()
        try:
            if not os.access(self.dir, os.W_OK):
                raise PermissionError(13, "Permission denied")
            folder.keep_killed_rows(self.dir)
            atomic_write_json(self.dir / L.CONFIG_JSON, {
                "trainer": "api", "params": self.params, "seed": self.seed,
                "spikes": {"detector": self.detector, "gap": self.gap,
                           "target_loss": self.target_loss},
                "warning": self.warning.to_mapping() if self.warning is not None else None})
            meta = {"trainer": "api", "environment": environment(device or folder.device_name())}
            atomic_write_json(self.dir / L.META_JSON, meta)
            self._log = JsonlSink(self.dir / L.METRICS)
        except OSError as e:
            self._unlock()
            raise UserError(f"run folder {self.dir}: cannot be written ({e.strerror or e})"
                            ) from None
        if port is not None:
            sinks.append(folder.prometheus(port))
        self._sinks = [self._log, *sinks]
        for s in self._sinks:
            s.start({**meta, "run_dir": str(self.dir)})

    def _lock(self) -> None:
        """One live run per folder, in this process or another: an exclusive ``flock`` on
        the folder, released by :meth:`finish`, by the run's end as an object, or by its
        process's end (a killed run holds none)."""
        fd = os.open(self.dir, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise UserError(f"run folder {self.dir}: another live run writes to it (finish() "
                            "that one, or give another run_dir)") from None
        self._unlock = weakref.finalize(self, os.close, fd)

    def abandon(self, keep_log: bool = True) -> None:
        """Leave the run unfinished, as a kill does, and free its folder for the next run
        of it. Its log stays ``.partial`` (the next :func:`init` keeps it aside), unless
        ``keep_log`` is False: a scratch view of a log kept elsewhere, deleted."""
        if self.rank == 0 and self.status is None and hasattr(self, "_unlock"):
            self._log.flush()
            self._log._f.close()
            if not keep_log:
                self._log.partial.unlink(missing_ok=True)
            self._unlock()
            self.status = "abandoned"

    # ------------------------------------------------------------------ logging

    def log(self, step: int, metrics: Mapping[str, Any] | None = None, /,
            **values: Any) -> Decision:
        """Record step ``step``'s metrics (``loss``, ``grad_norm``, ``lr``, ``val_loss``,
        ``tokens`` or any metric name; floats or 0-d tensors) and say what happened. Steps
        must increase. Tensors are read back with the next ``sync_every``-th logged step
        (or a validation loss); decisions about them come then."""
        if self.status is not None:
            raise UserError(f"run {self.dir}: log() after finish()")
        if type(step) is not int:
            step = checks.step(step, self._last_step)
        if self._last_step is not None and step <= self._last_step:
            raise UserError(f"log(step={step!r}): steps must be increasing integers (last "
                            f"{self._last_step})")
        row: dict[str, Any] = {M.STEP: step}
        if metrics is not None:
            if not isinstance(metrics, Mapping):
                raise UserError(f"log(metrics={checks.short(metrics)}): must be a dict of "
                                "metric names and values")
            checks.add(row, metrics)
        if values:
            checks.add(row, values)
        self._last_step = step
        if self.rank != 0:
            return Decision.PRUNE if self._pruned() else Decision.CONTINUE
        self._pending.append(row)
        if len(self._pending) < self.sync_every and M.VAL_LOSS not in row:
            return Decision.CONTINUE
        return self._flush()

    def _flush(self) -> Decision:
        rows, self._pending = self._pending, []
        if not rows:
            return Decision.CONTINUE
        _read_back(rows)
        decision = Decision.CONTINUE
        for row in rows:
            row.setdefault(M.ELAPSED_S, time.perf_counter() - self._t0)
            loss = row.get(M.TRAIN_LOSS)
            if loss is not None and not math.isfinite(float(loss)) and self.diverged_step is None:
                self.diverged_step = int(row[M.STEP])
            before = self._monitor.n_reported(M.TRAIN_LOSS)
            events = self._monitor.n_events(M.TRAIN_LOSS)
            self._monitor.update(row[M.STEP], row)
            row[M.SPIKE_EVENTS] = self._monitor.n_events(M.TRAIN_LOSS)
            row[M.SPIKE_REPORTED] = self._monitor.n_reported(M.TRAIN_LOSS)
            row[M.SPIKE_WITHDRAWN] = self._monitor.n_withdrawn(M.TRAIN_LOSS)
            if row[M.SPIKE_REPORTED] > before:  # a loss spike told (grad norms: precursors)
                decision = Decision.SPIKE
                self.last_report = self._monitor.reports(M.TRAIN_LOSS)[-1]
            if row[M.SPIKE_EVENTS] > events:
                self.last_event = self._monitor.loss_events()[-1]
            if self._watch is not None and self._watch.observe(row) and (
                    decision is Decision.CONTINUE):
                decision = Decision.WARNING  # a spike told in the same read-back wins
            for s in self._sinks:
                s.write(row)
        self._log.flush()  # a live reader (the sweep's follower) sees these rows now
        self._history.extend(rows)
        if self.diverged_step is not None:
            return Decision.DIVERGED
        if self._pruned():
            return Decision.PRUNE
        return decision

    def _pruned(self) -> bool:
        return self._prune_file is not None and self._prune_file.exists()

    @property
    def warnings(self) -> int:
        """The warnings the rule gave so far (0 without one, and on ranks other than 0)."""
        return self._watch.count if self._watch is not None else 0

    @property
    def last_warning(self) -> dict[str, Any] | None:
        """The newest warning: its ``step``, ``score`` and the signal's ``value``."""
        return self._watch.last if self._watch is not None else None

    def should_prune(self) -> bool:
        """True once the sweep has pruned this trial (Optuna's ``trial.should_prune``)."""
        return self._pruned()

    def check_prune(self) -> None:
        """Raise :class:`TrialPruned` once the sweep has pruned this trial."""
        if self._pruned():
            raise TrialPruned(f"the sweep pruned this trial at step {self._last_step}")

    # ------------------------------------------------------------------ the end

    def finish(self, status: str | None = None, *, steps: int | None = None
               ) -> dict[str, Any] | None:
        """Close the run: ``completed`` unless a loss was non-finite (``diverged``, and then
        ``completed`` is refused) or ``status`` says otherwise (``failed``, ``pruned``).
        ``steps``: the steps trained, for a loop whose step numbers start at 0 (the last
        logged step otherwise). Writes ``summary.json`` with the scores the built-in loop
        writes and returns it (None on ranks other than 0)."""
        if self.status is not None:
            return self.summary
        if status is not None and status not in STATUSES:
            raise UserError(f"finish(status={status!r}): allowed: " + ", ".join(STATUSES))
        if self.rank != 0:
            self.status = status or "completed"
            return None
        self._flush()
        if status == "completed" and self.diverged_step is not None:
            raise UserError(f"finish(status='completed'): the loss was not finite at step "
                            f"{self.diverged_step}; finish() records it as diverged")
        self.status = status or ("diverged" if self.diverged_step is not None else "completed")
        self._monitor.finish()
        evals = [(int(r[M.STEP]), float(r[M.VAL_LOSS])) for r in self._history
                 if r.get(M.VAL_LOSS) is not None]
        finite_vals = [v for _, v in evals if math.isfinite(v)]
        last = self._history[-1] if self._history else {}
        summary = {
            "status": self.status,
            "steps": self.diverged_step if self.diverged_step is not None else (
                self._last_step or 0) if steps is None else steps,
            "tokens": last.get(M.TOKENS),
            "seconds": last.get(M.ELAPSED_S, time.perf_counter() - self._t0),
            "diverged_step": self.diverged_step,
            "initial_val_loss": evals[0][1] if evals else None,
            "final_val_loss": evals[-1][1] if evals and self.status == "completed" else None,
            "best_val_loss": min(finite_vals) if finite_vals else None,
            "evals": [{M.STEP: s, M.VAL_LOSS: v} for s, v in evals],
        }
        summary["spikes"] = summarize(
            self._history, rule=self.detector, tokens_key=M.TOKENS, seconds_key=M.ELAPSED_S,
            target=self.target_loss, diverged_step=self.diverged_step,
            events=self._monitor.events, gap=self.gap,
            reports=self._monitor.reports(M.TRAIN_LOSS))
        if self._watch is not None:
            summary["warnings"] = self._watch.summary()
        for s in self._sinks:  # after the spikes: the end settles their counts
            s.close(summary)
        atomic_write_json(self.dir / L.SUMMARY_JSON, summary)
        self.summary = summary
        self._unlock()
        return summary

    def __enter__(self) -> Run:
        return self

    def __exit__(self, kind, exc, tb) -> bool:
        if kind is None:
            self.finish()
        elif issubclass(kind, TrialPruned):
            self.finish("pruned")
        else:
            self.finish("failed")
        return False

    def __repr__(self) -> str:
        return f"Run(dir={str(self.dir)!r}, seed={self.seed}, status={self.status!r})"

    # ------------------------------------------------------------------ checkpoints

    def state_dict(self) -> dict[str, Any]:
        """The run's state for the training loop's checkpoint: the online spike monitor, the
        last logged step, status and divergence, and the log so far (the text of
        ``metrics.jsonl``, with the rows not yet read back: read back now, one transfer),
        so that :meth:`load_state_dict` on a new run of the same folder continues it without
        a duplicate step. Plain JSON (no NaN literals), for a JSON trainer state or
        ``torch.save``; it grows with the log. Ranks other than 0: the last step only."""
        import dataclasses

        from spikebench.values import enc_float

        state: dict[str, Any] = {"version": 1, "rank": self.rank,
                                 "last_step": self._last_step, "status": self.status,
                                 "diverged_step": self.diverged_step}
        if self.rank != 0 or self.status is not None:
            return state
        pending = [dict(r) for r in self._pending]
        _read_back(pending)
        size = self._log.sync()  # on disk up to here: the checkpoint's cut
        with open(self._log.partial, "rb") as f:
            text = f.read(size).decode("utf-8")
        report = getattr(self, "last_report", None)
        state.update({
            "detector": self.detector, "gap": self.gap,
            "monitor": self._monitor.state_dict(),
            "last_event": self.last_event.state() if self.last_event is not None else None,
            "last_report": dataclasses.asdict(report) if report is not None else None,
            "elapsed_s": time.perf_counter() - self._t0,
            "warning": self._watch.state_dict() if self._watch is not None else None,
            "log": text, "log_bytes": size,
            "pending": [{k: enc_float(v) if isinstance(v, float) else v for k, v in r.items()}
                        for r in pending]})
        return state

    def load_state_dict(self, d: Mapping[str, Any]) -> None:
        """Continue the run of :meth:`state_dict` (a checkpoint's): its monitor, step and
        divergence, its log rewritten into this run's ``metrics.jsonl`` (the rows logged
        after the checkpoint, by a run that was killed, are dropped). Call it before the
        first :meth:`log`; the run's spike rule and gap must be the checkpoint's."""
        import json

        from spikebench.values import dec_float

        if not isinstance(d, Mapping) or d.get("version") != 1:
            raise UserError(f"run {self.dir}: load_state_dict() needs a Run.state_dict() "
                            "(version 1)")
        if self.status is not None or self._last_step is not None or self._pending:
            raise UserError(f"run {self.dir}: load_state_dict() must come before the run's "
                            "first log()")
        if d["status"] is not None:
            raise UserError(f"run {self.dir}: the checkpoint's run had finished (status "
                            f"{d['status']!r}); start a new run instead of continuing it")
        if self.rank != 0:
            self._last_step, self.diverged_step = d["last_step"], d["diverged_step"]
            return
        if "monitor" not in d:
            raise UserError(f"run {self.dir}: the state is rank {d.get('rank')}'s, which "
                            "holds no monitor; load rank 0's")
        if (d["detector"], d["gap"]) != (self.detector, self.gap):
            raise UserError(f"run {self.dir}: the checkpoint's spike rule is "
                            f"{d['detector']!r} with gap {d['gap']}, this run's "
                            f"{self.detector!r} with gap {self.gap}; continue it with the same")
        if self._log.sync() != 0:
            raise UserError(f"run {self.dir}: its log already has rows; load_state_dict() "
                            "must come before anything is logged")
        rows = [json.loads(line) for line in d["log"].splitlines()]
        for row in rows:  # the same text: json.dumps(json.loads(line)) == line
            self._log.write(row)
        self._log.flush()
        self._monitor.load_state_dict(d["monitor"])
        if self._watch is not None and d.get("warning"):
            self._watch.load_state_dict(d["warning"])
        elif self._watch is not None:  # saved without the rule: rebuilt from the log's rows
            self._watch.replay(rows)
        self._history = rows
        self._pending = [{k: dec_float(v) for k, v in r.items()} for r in d["pending"]]
        self._last_step, self.diverged_step = d["last_step"], d["diverged_step"]
        self.last_event = Event.from_state(d["last_event"]) if d["last_event"] else None
        if d.get("last_report") is not None and hasattr(self, "last_report"):
            from spikebench.spikes.reports import Report

            self.last_report = Report(**d["last_report"])
        self._t0 = time.perf_counter() - float(d["elapsed_s"])


def init(**kwargs: Any) -> Run:
    """Start a run of your own training loop (``wandb.init``'s role).

    Inside a sweep trial, the sweep's parameters, seed, run folder and spike settings come
    from the environment (:mod:`spikebench.api.context`) and take precedence; outside one,
    the arguments: ``params`` (dict), ``seed`` (0), ``run_dir`` (a new folder under
    ``out_dir``, ``results/runs``), ``detector`` and ``gap`` (the spike rule, "default"
    and 5), ``target_loss`` (for time to target), ``sync_every`` (tensors read back every
    N logged steps, 10), ``sinks``, ``metrics_port`` (Prometheus), ``device``,
    ``warning`` (an early-warning rule, log-only: :mod:`spikebench.api.warning`). Each is
    checked here (one ``UserError`` line). One live run per folder; a killed run's log
    found there is kept aside as ``metrics.jsonl.partial.killed``, never overwritten.
    """
    checks.init_args(kwargs)
    return Run(**kwargs)
