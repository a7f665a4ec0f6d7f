"""``spikebench sweep --dry-run``: the resolved search space and trial plan, as text."""

from __future__ import annotations

import json
import os
import shlex

from spikebench.study import layout as L
from spikebench.sweep.folders import check_folder
from spikebench.sweep.spec import SweepSpec
from spikebench.sweep.storage import check_storage, default_storage, mask_url


def describe_plan(spec: SweepSpec, *, jobs: int | None = None, storage: str | None = None,
                  results: str = "results") -> str:
    """The plan, after what a run would refuse before it starts and that needs no
    connection: the storage URL (unparsable, in memory) and the results folder."""
    from pathlib import Path

    url = storage or spec.storage or default_storage(Path(results) / spec.name)
    check_storage(url)
    check_folder(Path(results) / spec.name / L.TRIALS, results)
    runs = (len(spec.arms) + spec.trials) * len(spec.seeds)
    lines = [
        f"study {spec.name!r} from {spec.path}",
        f"  storage: {mask_url(url)}",
        f"  objective: {spec.objective} ("
        + ("minimise [spikes, convergence]; Pareto front" if spec.objective == "multi" else
           f"minimise convergence; constraints: median spike events <= {spec.spike_limit:g}, "
           "no diverged seed") + f"), spikes = {spec.spike_metric}",
        f"  target validation loss: {spec.target_loss:g} within {spec.steps} steps"
        + (f" (train.tokens = {spec.base['train.tokens']})" if "train.tokens" in spec.base
           else ""),
        *([f"  trainer: {shlex.join(spec.trainer['command'])} (metrics from "
           + (f"its log {spec.trainer['log']!r}" if spec.trainer["log"] else
              "spikebench.init in the script") + ")"] if spec.trainer else []),
        f"  sampler: {spec.sampler}, pruner: {spec.pruner}",
        f"  seeds per trial: {spec.seeds}",
        f"  workers: {jobs if jobs is not None else 'auto'} (cores here: {os.cpu_count()})"
        + (f", {spec.base['train.nproc']} data-parallel ranks per trial"
           if not spec.trainer and spec.base.get("train.nproc", 1) > 1 else ""),
        "trainer parameters:" if spec.trainer else "base config overrides:",
        *[f"  {k} = {json.dumps(v, ensure_ascii=False)}" for k, v in spec.base.items()],
        "search space:",
        *[f"  {p.key}: {p.describe()}" for p in spec.space],
        f"plan: {len(spec.arms)} comparison arms + {spec.trials} search trials, "
        f"x {len(spec.seeds)} seeds = {runs} training runs",
    ]
    if spec.grid:
        at = spec.arms["baseline"]
        lines.append("  grid: every arm at " + "; ".join(
            f"{k} in {json.dumps(v)}" for k, v in spec.grid.items()) + " (the arms at "
            + ", ".join(f"{k}={json.dumps(at[k])}" for k in spec.grid) + " keep their names)")
    for arm, values in spec.arms.items():
        note = " (the article's recipe: the file declares none)" if (
            arm == "recipe" and spec.default_recipe) else ""
        lines.append(f"  arm {arm!r}{note}: " + ", ".join(
            f"{k}={'off' if v is None else json.dumps(v, ensure_ascii=False)}" for k, v in values.items()))
    if spec.trials:
        lines.append(f"  then {spec.trials} trials sampled by {spec.sampler}")
    return "\n".join(lines)
