"""A study's learning-rate grid: its completed trials by setting (every other value) and LR.

A study sweeps ``optim.lr`` together with other dimensions through comparison arms (a
``[comparison] grid``, or hand-written arms that differ in the LR) or through search trials
whose LR is a choice. Both become the same grid here: a trial's setting is its value of
every other key that varies among the grid's trials, and settings are named by what they
change against the baseline's, so the LR sections read the same whichever way it was run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from spikebench import config as cfgmod
from spikebench.errors import UserError
from spikebench.report.arms import known_strategies, schedule_kind, strategy_of, trial_values
from spikebench.report.data import Study, TrialRecord
from spikebench.values import finite

LR_KEY = "optim.lr"


@dataclass(frozen=True)
class Setting:
    """One curve: the values it holds fixed, its name, and its trial at each LR."""

    values: tuple[tuple[str, Any], ...]
    label: str
    baseline: bool
    trials: dict[float, TrialRecord]  # by LR: the latest completed trial there


@dataclass(frozen=True)
class LrGrid:
    lrs: list[float]  # ascending
    settings: list[Setting]  # the baseline's first

    @property
    def baseline(self) -> Setting | None:
        return next((s for s in self.settings if s.baseline), None)


def lr_text(lr: float) -> str:
    """An LR as written in a sweep file (0.003, not 3.00e-03): grid values are exact."""
    return f"{lr:g}"


def trial_config(study: Study, t: TrialRecord) -> dict[str, Any]:
    """The values a trial ran with: its arm's overrides, then its space values."""
    return {**study.arms.get(t.arm, {}), **trial_values(t, study)}


def grid_values(study: Study) -> list[float]:
    """The LRs that form a grid: a categorical LR dimension's choices, else the LRs the
    comparison arms ran at. A continuous LR dimension's search trials are not a grid."""
    param = next((p for p in study.space if p.key == LR_KEY), None)
    if param is not None and param.choices is not None:
        found = param.choices
    else:
        found = [v.get(LR_KEY) for v in study.arms.values()]
    return sorted({float(v) for v in found if finite(v) and v > 0})


def _base_value(study: Study):
    """A resolver of the base config's value of a key (None where it has no such key)."""
    try:
        cfg = cfgmod.resolve_flat(study.base)
    except UserError:
        cfg = None

    def value(key: str) -> Any:
        try:
            return cfgmod.value_at(cfg, key)
        except AttributeError:
            return None
    return value


def _label(values: dict[str, Any], base: dict[str, Any] | None, kind: str) -> str:
    if base is None:
        return ", ".join(f"{k} = {_show(v)}" for k, v in values.items()) or "all trials"
    parts = []
    for k, v in values.items():
        if v == base.get(k):
            continue
        found = strategy_of(k, v, schedule_kind=kind)
        parts.append(found[1] if found and found[0] != "unknown" else f"{k} = {_show(v)}")
    return " + ".join(parts) or "baseline"


def _show(v: Any) -> str:
    return "off" if v is None else f"{v:g}" if isinstance(v, float) else str(v)


def lr_grid(study: Study) -> LrGrid | None:
    """The grid, or None when fewer than two of its LRs have a completed trial."""
    lrs = grid_values(study)
    base_value = _base_value(study)
    members: list[tuple[TrialRecord, dict[str, Any]]] = []
    for t in study.trials:
        if not t.complete:
            continue
        values = trial_config(study, t)
        lr = values.get(LR_KEY, base_value(LR_KEY))
        if finite(lr) and float(lr) in lrs:
            members.append((t, values))
    keys = list(dict.fromkeys(k for _, v in members for k in v if k != LR_KEY))

    def full(values):
        return {k: values[k] if k in values else base_value(k) for k in keys}

    fulls = [full(v) for _, v in members]
    varying = [k for k in keys if len({json.dumps(f[k], default=str) for f in fulls}) > 1]
    groups: dict[str, dict[float, TrialRecord]] = {}  # by the setting's values as JSON
    held: dict[str, tuple[tuple[str, Any], ...]] = {}
    for (t, values), f in zip(members, fulls, strict=True):
        key = tuple((k, f[k]) for k in varying)
        text = json.dumps(key, default=str)
        held[text] = key
        groups.setdefault(text, {})[float(values.get(LR_KEY, base_value(LR_KEY)))] = t
    used = sorted({lr for cells in groups.values() for lr in cells})
    if len(used) < 2:
        return None
    baseline = _baseline(study, held, varying, full)
    settings = []
    for text, cells in groups.items():
        values = dict(held[text])
        kind = schedule_kind(study, values)
        settings.append(Setting(held[text], _label(
            values, dict(held[baseline]) if baseline is not None else None, kind),
            text == baseline, dict(sorted(cells.items()))))
    settings.sort(key=lambda s: not s.baseline)
    return LrGrid(used, settings)


def _baseline(study: Study, held: dict[str, tuple], varying: list[str], full) -> str | None:
    """The baseline arm's setting; without one, the only setting that switches no known
    strategy on; else none."""
    if study.baseline_arm in study.arms:
        text = json.dumps(tuple((k, full(study.arms[study.baseline_arm])[k]) for k in varying),
                          default=str)
        if text in held:
            return text
    plain = [text for text, key in held.items() if not known_strategies(study, dict(key))]
    return plain[0] if len(plain) == 1 else None
