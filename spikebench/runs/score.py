"""One run's line in ``spikebench spikes FOLDER``: its events by the same whole-log detector as
a single log (:func:`spikebench.spikes.offline.score_log`), its worst event and, given a
target, the first step that reached it."""

from __future__ import annotations

import math
from typing import Any

from spikebench import metrics as M
from spikebench.runs.model import RunLog
from spikebench.runs.table import to_log
from spikebench.values import json_safe

EVENT_KEYS = ("onset", "peak", "metric", "height_sigma", "recovery_steps", "height", "area")


def time_to_target(run: RunLog, target: float) -> dict[str, Any]:
    """The first step whose loss is at or below ``target``: the validation loss where the
    run logged one (as spikebench's own scores), else the training loss; ``step`` None if
    never."""
    key = M.VAL_LOSS if any(M.VAL_LOSS in r for r in run.records) else M.TRAIN_LOSS
    step = next((r[M.STEP] for r in run.records
                 if r.get(key) is not None and math.isfinite(r[key]) and r[key] <= target), None)
    return {"target": target, "metric": key, "step": step}


def score_run(run: RunLog, *, rule: str = "default", gap: int = 5,
              target: float | None = None) -> dict[str, Any]:
    """JSON-safe: the run's name, format, columns, step count, loss events (count, worst
    area), every event, the OLMo spike scores, seed and parameters, time to target."""
    from spikebench.spikes.offline import score_log

    res = score_log(to_log(run), rule=rule, gap=gap)
    loss = [e for e in res["events"] if e["metric"] == "loss"]
    areas = [e["area"] for e in loss if e["area"] is not None]
    out = {
        "run": run.name, "format": run.format, "path": str(run.path),
        "step_column": run.step_column, "loss_column": run.loss_column,
        "grad_column": run.grad_column,
        "steps": res["steps"], "n_events": len(loss),
        "worst_severity": max(areas) if areas else None,
        "events": [{k: e[k] for k in EVENT_KEYS} for e in res["events"]],
        "spike_score": res["spike_score"], "seed": run.seed, "params": run.params,
        "note": run.note,
    }
    if target is not None:
        out["time_to_target"] = time_to_target(run, target)
    return json_safe(out)
