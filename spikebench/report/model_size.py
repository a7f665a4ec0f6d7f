"""A study's model-size dimension: the comparison grid's keys that change the model's size,
and each size's parameter count.

A sweep states sizes as a ``[comparison] grid`` over ``model.preset`` (or the shape's own
keys); every arm then runs at every size, on the same seeds. A size's parameter count is
what its runs recorded (``n_params`` in a seed's ``meta.json``), else the count of the
built-in GPT's shape, so sizes sort by it and the largest is known without any run's logs.
"""

from __future__ import annotations

from typing import Any

from spikebench import config as cfgmod
from spikebench.errors import UserError
from spikebench.report.data import Study, TrialRecord

# Grid keys that change the number of parameters (a preset names a shape).
SIZE_KEYS = ("model.preset", "model.n_layer", "model.n_embd")
BUILT_IN = "spikebench.model:GPT"


def size_keys(study: Study) -> list[str]:
    """The comparison grid's size keys with at least two values, in the grid's order."""
    grid = study.spec.grid if study.spec else {}
    return [k for k in grid if k in SIZE_KEYS and len(grid[k]) >= 2]


def gpt_params(model: Any) -> int | None:
    """Parameters of the built-in GPT of this shape (tied embeddings, pre-LayerNorm blocks,
    optional biases and qk-layernorm); None for another model class."""
    if model.cls != BUILT_IN:
        return None
    d, layers, head = model.n_embd, model.n_layer, model.n_embd // model.n_head
    per_layer = 12 * d * d + 2 * d  # qkv, proj, MLP (4x), two LayerNorm weights
    if model.bias:
        per_layer += 11 * d  # the biases of those linears (3d + d + 4d + d) and LayerNorms
    if model.qk_norm:
        per_layer += 2 * head * (2 if model.bias else 1)
    final = d * (2 if model.bias else 1)
    return (model.vocab_size + model.block_size) * d + layers * per_layer + final


def recorded_params(study: Study, trial: TrialRecord | None) -> int | None:
    """``n_params`` as a run of the trial recorded it, if it did."""
    if trial is None:
        return None
    n = study.metas.get(trial.number, {}).get("n_params")
    return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else None


def params_of(study: Study, values: dict[str, Any], trial: TrialRecord | None
              ) -> tuple[int | None, str]:
    """(parameters, where the figure comes from) of the model an arm's values build."""
    n = recorded_params(study, trial)
    if n is not None:
        return n, "recorded"
    try:
        cfg = cfgmod.resolve_flat({**study.base, **values})
    except UserError:
        return None, "unknown (the config does not resolve here)"
    n = gpt_params(cfg.model)
    return (n, "counted from the shape") if n is not None else (
        None, f"unknown (model.cls = {cfg.model.cls}, not the built-in GPT)")


def millions(n: int | None) -> str:
    """A parameter count as the presets' comments write it: 0.12M, 4.1M, 124M."""
    if n is None:
        return "? params"
    m = n / 1e6
    return f"{m:.2g}M" if m < 10 else f"{m:.0f}M"
