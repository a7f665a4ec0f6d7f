"""Lightning's CSVLogger: ``<save_dir>/<name>/version_<n>/metrics.csv`` with ``hparams.yaml``
beside it.

``metrics.csv`` has a ``step`` column (the optimizer steps taken before the logged batch,
from 0) and an ``epoch`` column, and one column per logged name: ``train_loss`` where the
loss is logged per step only, ``train_loss_step`` and ``train_loss_epoch`` where also per
epoch (the step one is the loss), ``val_loss`` on validation rows. A step's training,
validation and epoch-end rows are written apart and merged here. ``hparams.yaml`` holds
``save_hyperparameters()``'s values; a ``seed`` there is the run's seed.
"""

from __future__ import annotations

from pathlib import Path

from spikebench.runs import meta
from spikebench.runs.model import RunLog
from spikebench.runs.plain import read_file
from spikebench.runs.table import flatten, seed_of

FORMAT = "lightning-csv"


def read(csv_path: Path, *, name: str, step: str | None = None, metric: str | None = None,
         grad_metric: str | None = None,
         extra: dict[str, str] | None = None) -> RunLog:
    hparams = csv_path.parent / "hparams.yaml"
    params = {}
    if hparams.is_file():
        params = flatten(meta.table(hparams, meta.read_yaml(hparams)))
    return read_file(csv_path, name=name, fmt=FORMAT, step=step, metric=metric,
                     grad_metric=grad_metric, extra=extra, params=params, seed=seed_of(params))
