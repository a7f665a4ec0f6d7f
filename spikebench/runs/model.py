"""A run read from disk, whatever wrote it: the one shape readers produce and every consumer
(``spikebench spikes``, ``spikebench compare``, scoring through the run API) reads."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class RunLog:
    """One run of one seed.

    ``records``: one dict per logged step in ascending step order, keyed by the names of
    :mod:`spikebench.metrics` (``M.STEP`` always; ``M.TRAIN_LOSS``, ``M.GRAD_NORM``,
    ``M.VAL_LOSS``, ``M.LR``, ``M.TOKENS`` where the run logged them), the shape
    :meth:`spikebench.api.run.Run.log` takes. ``params``: the run's hyperparameters from its
    own metadata (HF's config, Lightning's ``hparams.yaml``, TensorBoard hparams, W&B config
    columns), flattened to dotted keys. ``seed``: None where the run does not say.
    """

    name: str  # unique among the runs read together (a relative path, a W&B run name)
    path: Path  # the file or folder it was read from
    format: str  # the reader's name, e.g. "tensorboard", "hf-trainer-state"
    records: list[dict[str, Any]]
    step_column: str  # the source's name for the step and for the loss
    loss_column: str
    params: dict[str, Any] = field(default_factory=dict)
    seed: int | None = None
    grad_column: str | None = None  # the source's name for the grad norm, where logged
    # Every series read: record key -> the source's column (tag, metric key).
    columns: dict[str, str] = field(default_factory=dict)
    # How a choice was made where the source offered several candidates (W&B's _step
    # beside the trainer's step, a summary beside the loss series), for the user to see.
    note: str = ""
