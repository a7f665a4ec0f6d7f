"""Groups of runs written as a spikebench study: the one interface the report reads.

A sweep's results folder is ``study.db`` (an Optuna study whose user attributes hold the
sweep spec) and ``trials/<n>/seed-<k>/`` run folders. A comparison of runs read from disk
is written the same way, so :func:`spikebench.report.build_report` renders it unchanged:
each group is one trial (``arm`` = the group's name) whose seeds are its runs, each run
scored by the run API's own code (:class:`spikebench.api.run.Run`, as a command trial's log
is: its online monitor, ``summarize``, the run folder's ``metrics.jsonl``/``summary.json``),
and the trial's attributes by the sweep's :func:`~spikebench.scoring.trial.score_trial`.
The spec's ``trainer`` marks the parameters as the runs' own (the sections about the
built-in engine's switches then say why they are empty), and the study's ``compare``
attribute holds what only a comparison has: the baseline and recipe named, each group's
pairing with the baseline, what was cut.
"""

from __future__ import annotations

import contextlib
import json
import os
import warnings
from pathlib import Path
from typing import Any

from spikebench import metrics as M
from spikebench.api import context
from spikebench.compare.align import Prepared
from spikebench.runio import atomic_write_json
from spikebench.study import layout as L

MARKER = "compare.json"  # in a study folder spikebench compare wrote (and may replace)
SPIKE_LIMIT = 2.0
SYNC_EVERY = 256


@contextlib.contextmanager
def _outside_a_sweep():
    """The run API takes a sweep's run folder, seed and spike rule from the environment; a
    comparison scores runs of its own, whatever environment it runs in."""
    names = (context.RUN_DIR, context.SEED, context.PARAMS_FILE, context.PRUNE_FILE,
             context.DETECTOR, context.GAP, context.TARGET_LOSS, context.METRICS_PORT)
    saved = {n: os.environ.pop(n) for n in names if n in os.environ}
    try:
        yield
    finally:
        os.environ.update(saved)


def score_run(p: Prepared, run_dir: Path, *, label: int, params: dict[str, Any],
              detector: str, gap: int, target: float) -> dict[str, Any]:
    """Score one run's cut records through the run API into ``run_dir`` (its online
    monitor, as a command trial's log is scored) and return its ``summary.json``. A run
    whose records carry no elapsed time has no seconds (the API would count its own)."""
    from spikebench.api.decision import Decision
    from spikebench.api.run import Run

    with _outside_a_sweep():
        run = Run(params=params, seed=label, run_dir=run_dir, detector=detector, gap=gap,
                  target_loss=target, sync_every=SYNC_EVERY, device="cpu")
    for rec in p.records:
        values = {k: v for k, v in rec.items() if k != M.STEP}
        if run.log(int(rec[M.STEP]), values) is Decision.DIVERGED:
            break
    summary = run.finish()
    source = {"name": p.run.name, "path": str(p.run.path), "format": p.run.format,
              "step_column": p.run.step_column, "loss_column": p.run.loss_column,
              "seed": p.run.seed, "cut": p.cut}
    # The API's meta.json describes the machine it ran on: here, the one that scored the
    # run, not the one that trained it.
    atomic_write_json(run_dir / L.META_JSON, {"trainer": "imported", "source": source})
    if not p.timed:
        summary["seconds"] = None
        ttt = (summary.get("spikes") or {}).get("time_to_target")
        if isinstance(ttt, dict):
            ttt["seconds"] = None
        atomic_write_json(run_dir / L.SUMMARY_JSON, summary)
        _drop_column(run_dir / L.METRICS, M.ELAPSED_S)
    return summary


def _drop_column(path: Path, key: str) -> None:
    if not path.is_file():
        return
    lines = []
    for line in path.read_text().splitlines():
        row = json.loads(line)
        row.pop(key, None)
        lines.append(json.dumps(row))
    path.write_text("".join(line + "\n" for line in lines))


def write_study(folder: Path, final: Path, *, name: str, groups: dict[str, list[Prepared]],
                seed_labels: dict[str, int], params: dict[str, dict[str, Any]],
                spec: dict[str, Any], info: dict[str, Any], detector: str, gap: int,
                target: float, steps: int) -> None:
    """Write the comparison into ``folder`` (empty) as it will lie at ``final``: one trial
    per group, in order, and ``study.db``."""
    import optuna
    from optuna.trial import TrialState

    from spikebench import __version__
    from spikebench.compare import plain
    from spikebench.scoring.trial import score_trial

    trials = []
    for number, (group, runs) in enumerate(groups.items()):
        trial_dir = folder / L.TRIALS / L.trial_name(number)
        seeds = []
        for p in runs:
            label = seed_labels[p.run.name]
            summary = score_run(p, trial_dir / L.seed_name(label), label=label,
                                params=plain(p.run.params), detector=detector, gap=gap,
                                target=target)
            seeds.append({"seed": label, "summary": summary})
        seeds.sort(key=lambda s: s["seed"])
        atomic_write_json(trial_dir / L.TRIAL_JSON, {
            "number": number, "arm": group, "params": params[group],
            "seeds": [s["seed"] for s in seeds],
            "runs": {str(seed_labels[p.run.name]): p.run.name for p in runs},
            "config": {"spikes": {"detector": detector, "gap": gap}}})
        values, attrs, _ = score_trial(seeds, steps=steps, target=target,
                                       spike_metric=spec["spike_metric"],
                                       objective=spec["objective"], spike_limit=SPIKE_LIMIT)
        trials.append((values, {"arm": group, "dir": str(final / L.TRIALS / L.trial_name(number)),
                                "overrides": params[group], **attrs}))
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        storage = optuna.storages.RDBStorage(f"sqlite:///{(folder / L.STUDY_DB).resolve()}")
        study = optuna.create_study(storage=storage, study_name=name,
                                    directions=["minimize", "minimize"])
        study.set_user_attr("spec", spec)
        study.set_user_attr("compare", info)
        study.set_user_attr("spikebench_version", __version__)
        for values, attrs in trials:
            study.add_trial(optuna.trial.create_trial(
                state=TrialState.COMPLETE, values=values, user_attrs=plain(attrs)))
        storage.engine.dispose()
    atomic_write_json(folder / MARKER, info)
