"""Weights & Biases exports (the library is not needed: these are its files).

- A run's history (``run.history()`` / ``run.scan_history()`` written to CSV or JSONL):
  one row per ``wandb.log`` call, ``_step`` (W&B's count of those calls), ``_runtime``,
  ``_timestamp`` and the logged keys. The HF Trainer logs ``train/loss``,
  ``train/grad_norm``, ``train/learning_rate``, ``eval/loss`` and its own
  ``train/global_step`` on every row; that, not ``_step``, is the step (see
  :mod:`.columns`; ``--step _step`` reads W&B's). Parameters: ``config/<key>`` or
  ``config.<key>`` columns where the export has them, and a W&B ``config.yaml``
  (``<key>: {value: ...}``, as in a run's ``files/``) beside the file.
- A panel's CSV export: an x-axis column (``Step``, or the panel's x metric) and, per run
  shown, ``<run> - <metric>`` with ``__MIN``/``__MAX`` companions. Every run is read, each
  under its own name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from spikebench.errors import UserError
from spikebench.runs import meta
from spikebench.runs.model import RunLog
from spikebench.runs.table import build, flatten, plain_value, scalar_text, seed_of
from spikebench.runs.text import read_table

HISTORY, CHART = "wandb-history", "wandb-chart"
CONFIG_PREFIXES = ("config/", "config.")


def _config(path: Path, cols: list[str], cells) -> dict[str, Any]:
    params: dict[str, Any] = {}
    beside = path.parent / "config.yaml"
    if beside.is_file():
        for k, v in meta.table(beside, meta.read_yaml(beside)).items():
            if str(k).startswith("_wandb"):
                continue  # W&B's own bookkeeping, not a hyperparameter
            params.update(flatten(v.get("value") if isinstance(v, dict) and "value" in v
                                  else v, str(k)))
    for c in cols:
        prefix = next((p for p in CONFIG_PREFIXES if c.lower().startswith(p)), None)
        if prefix is None:
            continue
        value = next((v for v in cells[c] if v not in (None, "")), None)
        params[c[len(prefix):]] = (scalar_text(value) if isinstance(value, str)
                                   else plain_value(value))
    return params


def read_history(path: Path, *, name: str, step: str | None = None,
                 metric: str | None = None, grad_metric: str | None = None,
         extra: dict[str, str] | None = None) -> RunLog:
    cols, cells = read_table(path)
    params = _config(path, cols, cells)
    data = [c for c in cols if not c.lower().startswith(CONFIG_PREFIXES)]
    return build(path, data, cells, name=name, fmt=HISTORY, step=step, metric=metric,
                 grad_metric=grad_metric, extra=extra, params=params, seed=seed_of(params))


def read_chart(path: Path, *, prefix: str = "", step: str | None = None,
               metric: str | None = None, grad_metric: str | None = None,
         extra: dict[str, str] | None = None) -> list[RunLog]:
    """Every run of a panel export, called ``<prefix><run>``."""
    cols, cells = read_table(path)
    xs = [c for c in cols if " - " not in c]
    if len(xs) != 1:
        raise UserError(f"{path}: not a W&B chart export (expected one x-axis column beside "
                        f"'<run> - <metric>' columns; found {len(xs)})")
    runs: dict[str, dict[str, str]] = {}  # run -> metric -> column
    for c in cols:
        if c == xs[0] or c.endswith(("__MIN", "__MAX")):
            continue  # the band of a grouped or sampled line, not a run's values
        run, _, key = c.rpartition(" - ")
        runs.setdefault(run.strip(), {})[key.strip()] = c
    out = []
    for run, metrics in runs.items():
        sub = {xs[0]: cells[xs[0]], **{k: cells[c] for k, c in metrics.items()}}
        out.append(build(path, [xs[0], *metrics], sub, name=f"{prefix}{run}", fmt=CHART,
                         step=step, metric=metric, grad_metric=grad_metric, extra=extra,
                         where=f"{path}, run {run!r}"))
    return out
