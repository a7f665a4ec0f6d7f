"""What ``spikebench spikes`` read before :mod:`spikebench.runs`: a plain CSV or JSONL log
with a step and a loss column, and spikebench's own run folders (``metrics.jsonl`` with
``config.json``: the built-in loop's or the run API's, whose parameters and seed it
records)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from spikebench.runs import meta
from spikebench.runs.model import RunLog
from spikebench.runs.table import build, flatten, seed_of
from spikebench.runs.text import read_table
from spikebench.study import layout as L


def read_file(path: Path, *, name: str, fmt: str, step: str | None = None,
              metric: str | None = None, grad_metric: str | None = None, extra: dict[str, str] | None = None,
              params: dict[str, Any] | None = None, seed: int | None = None,
              table: tuple[list[str], Any] | None = None) -> RunLog:
    """A CSV/TSV or JSONL log, every column read (validation loss and learning rate too);
    ``table``: its columns and cells where already read."""
    cols, cells = table or read_table(path)
    return build(path, cols, cells, name=name, fmt=fmt, step=step, metric=metric,
                 grad_metric=grad_metric, extra=extra, params=params, seed=seed)


def read_spikebench(folder: Path, *, name: str, step: str | None = None,
                    metric: str | None = None, grad_metric: str | None = None,
         extra: dict[str, str] | None = None) -> RunLog:
    """A spikebench run folder. The built-in loop's ``config.json`` is the whole config
    (``optim.lr``, ``train.seed``, ...); the run API's and a command trial's hold the
    trainer's own ``params`` and the ``seed``."""
    params: dict[str, Any] = {}
    seed = None
    if (folder / L.CONFIG_JSON).is_file():
        config = meta.table(folder / L.CONFIG_JSON, meta.read_json(folder / L.CONFIG_JSON))
        if isinstance(config.get("params"), dict):
            params = flatten(config["params"])
            seed = seed_of(config)
        else:
            params = flatten(config)
            seed = seed_of(params, ("train.seed", "seed"))
    return read_file(folder / L.METRICS, name=name, fmt="spikebench", step=step,
                     metric=metric, grad_metric=grad_metric, extra=extra, params=params, seed=seed)
