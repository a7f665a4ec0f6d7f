"""The shapes the report's sections read, and fitting a stored value to one.

A shape is a Kind (a test and what it allows), a dict (a table whose named keys have those
shapes; other keys pass as they are) or a one-item list (a list of items of that shape).
Fitting drops each part that does not fit and notes it, so a damaged trial file or
attribute becomes a note in the report, never an exception in a section.
"""

from __future__ import annotations

import json
import math
from typing import Any

from spikebench.spikes.logs import MAX_STEP
from spikebench.sweep.spec import OBJECTIVES, SPIKE_METRICS

Kind = tuple[Any, str]


def _number(x: Any) -> bool:
    if isinstance(x, bool) or not isinstance(x, int | float):
        return False
    try:
        return math.isfinite(x)
    except OverflowError:  # an int past a float's range, where finite() and float() raise
        return False


def _integer(x: Any, low: int = -(2**63)) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and low <= x < 2**63


def _one_of(values: tuple[str, ...]) -> Kind:
    return (lambda x: x in values, "one of " + ", ".join(values))


def step(x: Any) -> bool:
    return _number(x) and x == int(x) and 0 <= x <= MAX_STEP


NUMBER: Kind = (_number, "a finite number")
STEP_AT: Kind = (step, "a step (an integer from 0 to 2**53 - 1)")
INTEGER: Kind = (_integer, "an integer")
COUNT: Kind = (lambda x: _integer(x, 0), "an integer >= 0")
TEXT: Kind = (lambda x: isinstance(x, str), "a string")
FLAG: Kind = (lambda x: isinstance(x, bool), "true or false")
TABLE: Kind = (lambda x: isinstance(x, dict), "a table")
LIST: Kind = (lambda x: isinstance(x, list), "a list")
ARMS: Kind = (lambda x: isinstance(x, dict) and all(isinstance(v, dict) for v in x.values()),
              "a table of arm tables")

# What the sections read from a trial's user attributes, a seed's files and the stored spec.
PER_SEED = {"seed": INTEGER, "status": TEXT, "diverged_step": STEP_AT, **dict.fromkeys((
    "n_events", "n_injected_events", "severity", "events_per_1k",
    "steps_to_target", "seconds_to_target", "final_val_loss", "initial_val_loss", "seconds", "max_attn_logit",
    "convergence"), NUMBER), **dict.fromkeys((
    "rollbacks", "redone_steps", "skipped_batches", "skipped_updates"), COUNT)}
ATTRS = {"arm": TEXT, "dir": TEXT, "overrides": TABLE, "per_seed": [PER_SEED],
         "pruned_at_step": STEP_AT,
         **dict.fromkeys(("spikes", "convergence", "n_events_median", "diverged_seeds",
                          "reached_seeds", "seeds"), NUMBER)}
SUMMARY = {"status": TEXT, "diverged_step": STEP_AT,
           "spikes": {"events": [dict.fromkeys(("onset", "peak", "recovery_steps"), STEP_AT)]}}
META = {"environment": TABLE, "corpus": TABLE,
        "injections": [dict.fromkeys(("first_step", "last_step"), STEP_AT)]}
JOB = {"config": {"spikes": {"detector": TEXT, "gap": COUNT}}}
PARAM = {"key": TEXT, "low": NUMBER, "high": NUMBER, "log": FLAG, "integer": FLAG, "off": FLAG,
         "choices": LIST}
SPEC = {**dict.fromkeys(("path", "name", "sampler", "pruner", "storage", "notes"), TEXT),
        **dict.fromkeys(("trials", "steps", "eval_every"), COUNT),
        "seeds": [INTEGER], "objective": _one_of(OBJECTIVES),
        "spike_metric": _one_of(SPIKE_METRICS), "target_loss": NUMBER, "spike_limit": NUMBER,
        "base": TABLE, "space": [PARAM], "arms": ARMS, "grid": TABLE, "default_recipe": FLAG}
BAD = object()  # what a value that does not fit its shape becomes


def short(value: Any) -> str:
    text = repr(value) if isinstance(value, float) else json.dumps(value, default=str)
    return text if len(text) <= 40 else text[:37] + "..."


def fit(value: Any, shape: Any, name: str, notes: list[str]) -> Any:
    """``value`` with each part that does not fit ``shape`` dropped and noted (a key whose
    value is None is missing: dropped silently); ``BAD`` if ``value`` itself does not fit."""
    if isinstance(shape, dict):
        if not isinstance(value, dict):
            notes.append(f"{name} = {short(value)} is not a table")
            return BAD
        out = dict(value)
        for key, sub in shape.items():
            if key in out:
                v = BAD if out[key] is None else fit(
                    out[key], sub, f"{name}.{key}" if name else key, notes)
                if v is BAD:
                    del out[key]
                else:
                    out[key] = v
        return out
    if isinstance(shape, list):
        if not isinstance(value, list):
            notes.append(f"{name} = {short(value)} is not a list")
            return BAD
        inner: list[str] = []
        kept = [v for i, item in enumerate(value)
                if (v := fit(item, shape[0], f"{name}[{i}]", inner)) is not BAD]
        more = len(inner) - 3
        notes += inner[:3] + ([f"{name}: {more} more problem{'s' * (more > 1)}"] if more > 0
                              else [])
        return kept
    ok, allowed = shape
    if ok(value):
        return value
    notes.append(f"{name} = {short(value)} is not {allowed}")
    return BAD
