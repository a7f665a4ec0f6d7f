"""What a run resolves before it trains: the device, and the checks a dry run makes."""

from __future__ import annotations

from pathlib import Path

import torch

from spikebench.config import Config
from spikebench.errors import UserError
from spikebench.model import model_class

DEVICES = "auto, cpu, cuda or cuda:N"


def resolve_device(name: str) -> torch.device:
    """The device to train on; only CPU and CUDA are supported (other torch device types
    parse, but the loop's fused optimizer and metrics do not run there)."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except (RuntimeError, ValueError):
        raise UserError(f"train.device = {name!r}: must be {DEVICES}") from None
    if device.type not in ("cpu", "cuda"):
        raise UserError(f"train.device = {name!r}: must be {DEVICES}")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UserError(f"train.device = {name!r}: CUDA is not available on this machine")
    if device.type == "cuda" and (device.index or 0) >= torch.cuda.device_count():
        raise UserError(f"train.device = {name!r}: this machine has "
                        f"{torch.cuda.device_count()} CUDA device(s)")
    return device


def _path_exists(key: str, value: str) -> bool:
    try:
        return Path(value).expanduser().exists()
    except (OSError, ValueError) as e:  # a name too long for the file system
        why = getattr(e, "strerror", None) or str(e)
        raise UserError(f"{key} = {value[:60]!r}...: not a usable path ({why})") from None


def preflight(cfg: Config) -> None:
    """The cheap checks a run makes before it reads data: the device exists, the model is
    built from its config (on the meta device: no memory), the corpus and output paths are
    usable. Raises UserError (one line)."""
    resolve_device(cfg.train.device)
    build_model_meta(cfg.model)
    for key, value in (("data.corpus", cfg.data.corpus),
                       ("faults.domain_corpus", cfg.faults.domain_corpus)):
        if value and value != "stdlib" and not _path_exists(key, value):
            raise UserError(f"{key} = {value!r}: no such file or folder")
    out = Path(cfg.run.out_dir)
    _path_exists("run.out_dir", cfg.run.out_dir)
    for parent in (out, *out.parents):
        if parent.exists() and not parent.is_dir():
            raise UserError(f"run.out_dir = {cfg.run.out_dir!r}: {str(parent)!r} is a file, "
                            "not a folder")
    if cfg.run.name:
        _path_exists("run.name", str(out / cfg.run.name))


def build_model_meta(cfg) -> None:
    """Build the model on the meta device, so a class that is no ``nn.Module`` or does not
    take the model config is refused before any data is read."""
    cls = model_class(cfg)
    if not (isinstance(cls, type) and issubclass(cls, torch.nn.Module)):
        raise UserError(f"model.cls = {cfg.cls!r}: not a torch.nn.Module subclass")
    try:
        with torch.device("meta"):
            cls(cfg)
    except Exception as e:  # noqa: BLE001 - a user's class can fail in any way
        raise UserError(f"model.cls = {cfg.cls!r}: cannot be built from the model config "
                        f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})"
                        ) from None
