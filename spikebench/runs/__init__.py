"""Runs other tools wrote, read as :class:`RunLog`: TensorBoard event files, the HF Trainer's
``trainer_state.json``, Lightning's CSVLogger, W&B exports, MLflow's file store,
long-format CSV, and plain CSV/JSONL logs and spikebench's own run folders.

``read_runs(path)`` takes a file or a folder of runs (walked, each format detected from
content and layout: :mod:`.detect`, :mod:`.discover`); one module per format reads it.
Where a source offers several candidate step or loss columns the read stops naming them
(``--step`` / ``--metric`` choose), so no run is read from a wrong column unsaid
(:mod:`.columns`). This package is the one log layer: ``spikebench spikes``, command
trials (read whole, and followed as they grow: :mod:`.tail`), ``compare``, ``bench`` and
the run API's consumers read logs only through it. The submodules are imported on use.
"""

from __future__ import annotations

from pathlib import Path

from spikebench.runs.model import RunLog

FORMATS = ("tensorboard", "hf-trainer-state", "lightning-csv", "wandb-history", "wandb-chart",
           "mlflow", "long-csv", "csv", "jsonl", "spikebench")


def read_runs(path: str | Path, *, step: str | None = None, metric: str | None = None,
              grad_metric: str | None = None,
              extra: dict[str, str] | None = None) -> list[RunLog]:
    """Every run in file or folder ``path``, names unique. ``step``/``metric``/
    ``grad_metric``: the source's names for the step, loss and grad-norm columns (or tags,
    or metric keys) where the guess could be wrong; ``extra``: record key -> a column the
    caller names (absent: one line). Every problem raises
    :class:`~spikebench.errors.UserError` with one line."""
    from spikebench.runs.discover import discover

    return discover(path, step=step, metric=metric, grad_metric=grad_metric, extra=extra).runs


__all__ = ["FORMATS", "RunLog", "read_runs"]
