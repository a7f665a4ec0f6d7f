"""What a run resolves before it trains: the device, and the checks a dry run makes."""

from __future__ import annotations

from pathlib import Path

import torch

from spikebench.config import Config
from spikebench.errors import UserError
from spikebench.model import model_class


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise UserError(f"train.device = {name!r}: must be auto, cpu, cuda or cuda:N") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UserError(f"train.device = {name!r}: CUDA is not available on this machine")
    return device


def preflight(cfg: Config) -> None:
    """The cheap checks a run makes before it reads data: the device exists, the model class
    imports, the corpus path exists. Raises UserError (one line)."""
    resolve_device(cfg.train.device)
    model_class(cfg.model)
    source = cfg.data.corpus
    if source != "stdlib" and not Path(source).expanduser().exists():
        raise UserError(f"data.corpus = {source!r}: no such file or folder")
