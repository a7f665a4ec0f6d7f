"""What a sweep hands a trainer it starts: the environment variables, named once.

A command trial (and the built-in runner) sets these for the trainer's process; outside a
sweep none is set and :func:`spikebench.init` falls back to its arguments.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spikebench.errors import UserError

RUN_DIR = "SPIKEBENCH_RUN_DIR"  # the seed's run folder
SEED = "SPIKEBENCH_SEED"
PARAMS_FILE = "SPIKEBENCH_PARAMS_FILE"  # JSON object: the trial's parameters
PRUNE_FILE = "SPIKEBENCH_PRUNE_FILE"  # appears when the sweep prunes the trial
DETECTOR = "SPIKEBENCH_DETECTOR"  # the sweep's spike rule and event gap
GAP = "SPIKEBENCH_GAP"
TARGET_LOSS = "SPIKEBENCH_TARGET_LOSS"
METRICS_PORT = "SPIKEBENCH_METRICS_PORT"


@dataclass(frozen=True)
class TrialContext:
    """The sweep's side of a run; every field None (params empty) outside a sweep."""

    run_dir: Path | None = None
    seed: int | None = None
    params: dict[str, Any] = field(default_factory=dict)
    prune_file: Path | None = None
    detector: str | None = None
    gap: int | None = None
    target_loss: float | None = None
    metrics_port: int | None = None


def _number(name: str, kind: type) -> Any:
    text = os.environ.get(name)
    if text is None or text == "":
        return None
    try:
        return kind(text)
    except ValueError:
        raise UserError(f"{name}={text!r}: must be {'an integer' if kind is int else 'a number'}"
                        ) from None


def from_env() -> TrialContext:
    """The trial context of this process, checked: one line naming the variable if bad."""
    params: dict[str, Any] = {}
    path = os.environ.get(PARAMS_FILE)
    if path:
        try:
            params = json.loads(Path(path).read_text())
        except (OSError, ValueError, RecursionError) as e:
            raise UserError(f"{PARAMS_FILE}={path!r}: not a readable JSON file "
                            f"({type(e).__name__})") from None
        if not isinstance(params, dict):
            raise UserError(f"{PARAMS_FILE}={path!r}: holds a JSON {type(params).__name__}, "
                            "not an object of parameters")
    run_dir, prune = os.environ.get(RUN_DIR), os.environ.get(PRUNE_FILE)
    return TrialContext(
        run_dir=Path(run_dir) if run_dir else None, seed=_number(SEED, int), params=params,
        prune_file=Path(prune) if prune else None, detector=os.environ.get(DETECTOR) or None,
        gap=_number(GAP, int), target_loss=_number(TARGET_LOSS, float),
        metrics_port=_number(METRICS_PORT, int))
