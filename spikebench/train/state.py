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
# bit-identity then holds only on the same CPU and thread count; so does torch.compile,
# whose fused kernels round otherwise, and a checkpoint holds the uncompiled module's
# weights, so a compiled run resumes uncompiled and back).
_LOCAL_KEYS = {"train": ("device", "threads", "progress", "dist_timeout_s", "compile"),
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


# What a checkpoint holds, by type (a file of another shape is skipped, never restored).
_INT, _NUM = (int,), (int, float)
_SHAPE: dict[str, tuple[type, ...]] = {
    "config": (str,), "model": (dict,), "optim": (dict,), "rng": (dict,), "parts": (dict,),
    "step": _INT, "position": _INT, "tokens": _INT, "skipped": _INT, "elapsed": _NUM,
    "val_history": (list,), "monitor": (dict,), "log_bytes": _INT}


def _kind(x: Any) -> str:
    return type(x).__name__


def shape_problem(state: Any, model: torch.nn.Module | None = None,
                  opt: torch.optim.Optimizer | None = None) -> str:
    """Why ``state`` is not a checkpoint this code could restore ("" if it is): its keys and
    their types, and with ``model``/``opt`` the tensors' names and shapes and the
    optimizer's parameter groups."""
    if not isinstance(state, dict):
        return f"holds a {_kind(state)}, not a checkpoint"
    for key, types in _SHAPE.items():
        if key not in state:
            return f"has no {key!r}"
        v = state[key]
        if not isinstance(v, types) or isinstance(v, bool):
            return f"has {key} of type {_kind(v)}"
    for key in ("step", "position", "tokens", "skipped", "log_bytes"):
        if state[key] < 0:
            return f"has {key} = {state[key]}"
    if not all(isinstance(p, list | tuple) and len(p) == 2 and all(
            isinstance(x, int | float) and not isinstance(x, bool) for x in p)
               for p in state["val_history"]):
        return "has a val_history that is not a list of [step, loss] pairs"
    rng = state["rng"]
    if not isinstance(rng.get("cpu"), torch.Tensor) or rng["cpu"].dtype != torch.uint8 \
            or not isinstance(rng.get("cuda", []), list):
        return "has no CPU random generator state"
    if model is not None:
        own = model.state_dict()
        theirs = state["model"]
        if set(theirs) != set(own):
            extra = sorted(set(theirs) ^ set(own), key=str)[0]
            return f"holds other model weights (differs at {str(extra)[:60]!r})"
        for k, v in own.items():
            if not isinstance(theirs[k], torch.Tensor) or theirs[k].shape != v.shape:
                return f"holds model weight {k!r} of another shape or type"
    if opt is not None:
        groups = state["optim"].get("param_groups")
        if not isinstance(state["optim"].get("state"), dict) or not isinstance(groups, list) \
                or len(groups) != len(opt.param_groups) or any(
                    not isinstance(g, dict) or not isinstance(g.get("params"), list)
                    or len(g["params"]) != len(o["params"])
                    for g, o in zip(groups, opt.param_groups, strict=False)):
            return "holds another optimizer's state"
    return ""


def usable(state: dict[str, Any], cfg: Config, log: Path, model: torch.nn.Module | None = None,
           opt: torch.optim.Optimizer | None = None) -> str:
    """Why a checkpoint cannot resume this run ("" if it can): another config, another
    shape (:func:`shape_problem`), or a metrics log shorter than it had or damaged within
    what it had logged."""
    why = shape_problem(state, model, opt)
    if why:
        return why
    if state.get("config") != config_key(cfg):
        return "written by a run with another config"
    size = log.stat().st_size if log.is_file() else 0
    if size < state["log_bytes"]:
        return f"the metrics log has {size} bytes, fewer than the {state['log_bytes']} it had"
    try:
        rows = read_log(log, state["log_bytes"], keep=True)
        if not all(isinstance(r, dict) for r in rows):
            raise ValueError("a line that is not a JSON object")
    except (UnicodeDecodeError, ValueError) as e:
        _READ.clear()
        return (f"the first {state['log_bytes']} bytes of {log.name} it had logged are "
                f"damaged ({str(e).splitlines()[0][:80] if str(e) else type(e).__name__})")
    return ""


_READ: dict[tuple[str, int], list[dict[str, Any]]] = {}  # the last log usable() read


def read_log(log: Path, n_bytes: int, *, keep: bool = False) -> list[dict[str, Any]]:
    """The first ``n_bytes`` of a metrics log as records: the history a checkpoint saw.
    Raises UnicodeDecodeError or ValueError for a damaged one. ``keep``: remember the
    records, so the next call for the same prefix (the resume itself, after
    :func:`usable` checked it) takes them instead of parsing a long log twice."""
    key = (str(log), n_bytes)
    if key in _READ:
        return _READ[key] if keep else _READ.pop(key)
    with open(log, "rb") as f:
        text = f.read(n_bytes).decode("utf-8")
    rows = [parse_json(line) for line in text.splitlines() if line.strip()]
    if keep:
        _READ.clear()
        _READ[key] = rows
    return rows
