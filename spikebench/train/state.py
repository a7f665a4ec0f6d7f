"""What a checkpoint holds and how a run takes it back, so a resumed run continues exactly.

Taken at a read-back, right after the step's records were logged, so no metric is pending:
model, optimizer and loss scaler; every RNG stream; the step, tokens and clock; the spike
monitor's state; the validation history; and how many bytes of ``metrics.jsonl`` were
written, so the resumed log is cut back to exactly those rows. The batch stream, the
curricula, the faults and the LR schedule are pure functions of the step, so the step is
their whole position.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from spikebench.config import Config
from spikebench.precision import Precision
from spikebench.spikes.logs import parse_json
from spikebench.spikes.monitor import SpikeMonitor

# What may differ between the run that saved a checkpoint and the one resuming it: where
# and how fast it runs, never what it computes (other threads change float rounding, so
# bit-identity then holds only on the same CPU and thread count).
_LOCAL_KEYS = {"train": ("device", "threads", "progress", "dist_timeout_s"),
               "run": ("out_dir", "name")}


@dataclass
class Progress:
    step: int = 0
    position: int = 0  # in the LR schedule and data: behind ``step`` after a rollback
    tokens: int = 0
    skipped: int = 0
    elapsed: float = 0.0
    val_history: list[tuple[int, float]] = field(default_factory=list)


def config_key(cfg: Config) -> str:
    """The config as JSON without the keys a resume may change."""
    d = cfg.to_dict()
    for table, keys in _LOCAL_KEYS.items():
        for k in keys:
            d.get(table, {}).pop(k, None)
    return json.dumps(d, sort_keys=True)


def train_state(model: torch.nn.Module, opt: torch.optim.Optimizer, precision: Precision,
                parts: dict[str, Any]) -> dict[str, Any]:
    """What the next update depends on: model, optimizer, loss scaler, RNG streams, and the
    state of each part (ZClip, skip-step: objects with ``state_dict``; None when off).
    References, not copies: a caller that keeps it must copy it."""
    cuda = torch.cuda.is_available() and torch.cuda.is_initialized()
    return {
        "model": model.state_dict(),
        "optim": opt.state_dict(),
        "scaler": precision.scaler.state_dict() if precision.scaler else None,
        "rng": {"cpu": torch.get_rng_state(),
                "cuda": torch.cuda.get_rng_state_all() if cuda else []},
        "parts": {k: p.state_dict() if p is not None else None for k, p in parts.items()},
    }


def load_train_state(state: dict[str, Any], model: torch.nn.Module,
                     opt: torch.optim.Optimizer, precision: Precision,
                     parts: dict[str, Any]) -> None:
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["optim"])
    if precision.scaler is not None and state["scaler"] is not None:
        precision.scaler.load_state_dict(state["scaler"])
    torch.set_rng_state(state["rng"]["cpu"])
    if state["rng"]["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["rng"]["cuda"])
    for k, p in parts.items():
        if p is not None and state["parts"].get(k) is not None:
            p.load_state_dict(state["parts"][k])


def capture(cfg: Config, model: torch.nn.Module, opt: torch.optim.Optimizer,
            precision: Precision, monitor: SpikeMonitor, progress: Progress,
            log_bytes: int, parts: dict[str, Any]) -> dict[str, Any]:
    """The checkpoint's contents: tensors and plain values only (weights-only loadable)."""
    return {
        "config": config_key(cfg),
        **train_state(model, opt, precision, parts),
        "step": progress.step, "position": progress.position, "tokens": progress.tokens, "skipped": progress.skipped,
        "elapsed": progress.elapsed,
        "val_history": [[s, v] for s, v in progress.val_history],
        "monitor": monitor.state_dict(),
        "log_bytes": log_bytes,
        "precision_impl": precision.impl,  # what "auto" resolved to: a resume keeps it
    }


def restore(state: dict[str, Any], model: torch.nn.Module, opt: torch.optim.Optimizer,
            precision: Precision, monitor: SpikeMonitor, parts: dict[str, Any]) -> Progress:
    """Put a checkpoint back into freshly built objects; returns where the run stood."""
    load_train_state(state, model, opt, precision, parts)
    monitor.load_state_dict(state["monitor"])
    return Progress(step=int(state["step"]), position=int(state["position"]),
                    tokens=int(state["tokens"]),
                    skipped=int(state["skipped"]), elapsed=float(state["elapsed"]),
                    val_history=[(int(s), float(v)) for s, v in state["val_history"]])


def usable(state: dict[str, Any], cfg: Config, log: Path) -> str:
    """Why a checkpoint cannot resume this run ("" if it can)."""
    if state.get("config") != config_key(cfg):
        return "written by a run with another config"
    size = log.stat().st_size if log.is_file() else 0
    if size < int(state["log_bytes"]):
        return f"the metrics log has {size} bytes, fewer than the {state['log_bytes']} it had"
    return ""


def read_log(log: Path, n_bytes: int) -> list[dict[str, Any]]:
    """The first ``n_bytes`` of a metrics log as records: the history a checkpoint saw."""
    with open(log, "rb") as f:
        text = f.read(n_bytes).decode("utf-8")
    return [parse_json(line) for line in text.splitlines() if line.strip()]
