"""The Hugging Face Trainer's ``trainer_state.json`` (one JSON document, not JSON Lines).

Its ``log_history`` holds one entry per log: ``step`` (the global step), ``loss``,
``grad_norm``, ``learning_rate``, ``epoch``; evaluations ``eval_loss`` at their step; the
last entry a run summary (``train_runtime``, ``train_loss``: the mean over the run, not
a step's loss), which is left out. An output folder holds the state in itself
(``Trainer.save_state()``) and in each ``checkpoint-<step>/``; the one with the most
steps is read (the folder's own on a tie: it is written last).

Parameters: ``model.*`` from the model's ``config.json`` beside the state (else the
output folder's), ``args.*`` from ``training_args.bin`` beside it (read as data, see
:mod:`.hf_args`) or, without it, trainer_state's own ``max_steps``, ``logging_steps``, ...;
``trial.*`` from a hyperparameter search's ``trial_params``. The seed is ``args.seed``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from spikebench.errors import UserError
from spikebench.runs import meta
from spikebench.runs.detect import hf_states
from spikebench.runs.hf_args import read_training_args
from spikebench.runs.model import RunLog
from spikebench.runs.table import build, flatten, seed_of

FORMAT = "hf-trainer-state"
SUMMARY = ("train_runtime", "train_samples_per_second", "train_steps_per_second",
           "train_loss", "total_flos")
STATE_ARGS = ("max_steps", "num_train_epochs", "logging_steps", "eval_steps", "save_steps",
              "train_batch_size")


def _state(path: Path) -> dict[str, Any]:
    state = meta.read_json(path)
    if not isinstance(state, dict) or not isinstance(state.get("log_history"), list):
        raise UserError(f"{path}: not an HF trainer_state.json (expected a JSON object with "
                        "a 'log_history' list)")
    for i, row in enumerate(state["log_history"]):
        if not isinstance(row, dict):
            raise UserError(f"{path}: log_history[{i}]: expected an object, got "
                            f"{type(row).__name__}")
    return state


def latest(folder: Path) -> tuple[Path, dict[str, Any]]:
    """The state with the most steps among the folder's own and its checkpoints'."""
    best: tuple[Path, dict[str, Any]] | None = None
    for path in hf_states(folder):
        state = _state(path)
        steps = state.get("global_step")
        steps = steps if isinstance(steps, int | float) else -1
        if best is None or steps > (best[1].get("global_step") or -1):
            best = (path, state)
    if best is None:
        raise UserError(f"{folder}: no trainer_state.json in it or in a checkpoint-* folder")
    return best


def _params(state_path: Path, state: dict[str, Any], output: Path) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for folder in (state_path.parent, output):
        if (folder / "config.json").is_file():  # the model's: another tool's file
            model = meta.read_json(folder / "config.json")  # another tool's file
            params.update(flatten(model if isinstance(model, dict) else {}, "model"))
            break
    args = read_training_args(state_path.parent / "training_args.bin")
    if args is None:
        args = {k: state[k] for k in STATE_ARGS if k in state}
    params.update(flatten({k: v for k, v in args.items() if not k.startswith("_")}, "args"))
    if isinstance(state.get("trial_params"), dict):
        params.update(flatten(state["trial_params"], "trial"))
    return params


def read(path: Path, *, name: str, step: str | None = None, metric: str | None = None,
         grad_metric: str | None = None,
         extra: dict[str, str] | None = None) -> RunLog:
    """A trainer_state.json file, or an output (or checkpoint) folder holding one."""
    if path.is_dir():
        state_path, state = latest(path)
        output = path
    else:
        state_path, state = path, _state(path)
        output = path.parent
    rows = [{k: v for k, v in r.items() if k not in SUMMARY} if "train_runtime" in r else r
            for r in state["log_history"]]
    if not rows:
        raise UserError(f"{state_path}: log_history is empty (no step was logged)")
    cols = list(dict.fromkeys(k for r in rows for k in r))
    cells = {c: [r.get(c) for r in rows] for c in cols}
    params = _params(state_path, state, output)
    return build(state_path, cols, cells, name=name, fmt=FORMAT, step=step, metric=metric,
                 grad_metric=grad_metric, extra=extra, params=params,
                 seed=seed_of(params, ("args.seed", "trial.seed")))
