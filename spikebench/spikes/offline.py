"""``spikebench spikes``: a whole log's spike events at once, the same as the online monitor's.

:class:`~.monitor.SpikeMonitor` is the reference: the trainer runs it step by step, and
:func:`spikebench.scoring.run.score_log` feeds it a log row by row (tens of microseconds a
row). Here each series is scored whole: the same rule's array form gives its verdicts per
row (:meth:`.rule_base.Rule.verdicts`), then the events (:mod:`.offline_events`), both
bit for bit what the monitor computes, which the tests check on synthetic, damaged and
random logs. A series the array form cannot reproduce exactly (differences past the float
range) is fed to the online rule instead, so the result is the monitor's in every case.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from spikebench import metrics as M
from spikebench.spikes.events import Event
from spikebench.spikes.monitor import SpikeMonitor
from spikebench.spikes.offline_events import series_events
from spikebench.spikes.published_rules import OlmoRule
from spikebench.spikes.rule_base import Unsupported
from spikebench.spikes.rules import make_rule, metric_kind
from spikebench.values import json_safe

# The OLMo 2 spike score's rule, as spikebench.scoring.run.spike_score applies it.
OLMO_WINDOW, OLMO_K = 1000, 7.0


@dataclass
class Series:
    """One metric's rows as the monitor sees them (rows where it has a value)."""

    key: str
    steps: np.ndarray  # int64, strictly increasing
    values: np.ndarray  # float64, NaN/inf kept: they are spikes
    injected: np.ndarray  # bool


def log_series(log) -> list[Series]:
    """The loss and (where logged) grad-norm series of a log read by
    :func:`.logs.read_log`, as :func:`spikebench.scoring.run.score_log` feeds them to the
    monitor: an empty grad-norm cell is no value, a logged NaN is one."""
    f = log.frame
    steps = f["step"].to_numpy(dtype=np.int64)
    inj = f["injected"].to_numpy(dtype=bool) if "injected" in f else np.zeros(len(f), bool)
    out = [Series("loss", steps, f["loss"].to_numpy(dtype=float), inj)]
    if log.has_grad_norm:
        has = ~f["grad_norm_missing"].to_numpy(dtype=bool)
        out.append(Series("grad_norm", steps[has], f["grad_norm"].to_numpy(dtype=float)[has],
                          inj[has]))
    return out


def rule_flags(rule_name: str, s: Series) -> np.ndarray:
    """The rule's final verdict on every row of ``s`` (non-finite rows are spikes)."""
    rule = make_rule(rule_name, metric_kind(s.key))
    # Overflow to inf and NaN is what the online rules compute too: no warnings.
    with np.errstate(all="ignore"):
        return rule.verdicts(s.values)


def online_events(rule_name: str, s: Series, gap: int) -> list[Event]:
    """The reference: the monitor fed ``s`` row by row."""
    mon = SpikeMonitor(rule_name, (s.key,), gap=gap)
    for step, v, inj in zip(s.steps.tolist(), s.values.tolist(), s.injected.tolist(),
                            strict=True):
        mon.update(step, {s.key: v, M.INJECTED: inj})
    mon.finish()
    return mon.events


def detect(series: list[Series], rule: str = "default", gap: int = 5) -> list[Event]:
    """Every series' events, ordered as :attr:`SpikeMonitor.events` orders them."""
    events: list[Event] = []
    for s in series:
        if len(s.steps) > 1 and not (np.diff(s.steps) > 0).all():
            evs = online_events(rule, s, gap)  # the monitor drops replayed steps itself
        else:
            try:
                flags = rule_flags(rule, s)
                with np.errstate(all="ignore"):  # an area past the float range is inf
                    evs = series_events(s.key, s.steps, s.values, s.injected, flags, gap)
            except Unsupported:
                evs = online_events(rule, s, gap)
        events += evs
    order = {s.key: i for i, s in enumerate(series)}
    return sorted(events, key=lambda e: (e.onset, order[e.metric]))


def spike_share(values: np.ndarray) -> float | None:
    """:func:`spikebench.scoring.run.spike_score` (the OLMo 2 spike score) of a series."""
    n = int(np.isfinite(values).sum())
    if n <= OLMO_WINDOW:
        return None
    with np.errstate(all="ignore"):
        return int(OlmoRule(window=OLMO_WINDOW, k=OLMO_K).flags(values[np.isfinite(values)])
                   .sum()) / n


def score_log(log, *, rule: str = "default", gap: int = 5) -> dict[str, Any]:
    """What ``spikebench spikes`` prints of :func:`spikebench.scoring.run.score_log`:
    ``rule``, ``steps``, ``events`` (as dicts) and ``spike_score``, JSON-safe."""
    series = log_series(log)
    grads = series[1].values if len(series) > 1 else np.empty(0)
    return json_safe({
        "rule": rule,
        "steps": len(log.frame),
        # Event.to_dict's deep copy costs more than the scoring with many events; the
        # fields are plain scalars, so a shallow copy is the same dict.
        "events": [dict(vars(e)) for e in detect(series, rule, gap)],
        "spike_score": {"loss": spike_share(series[0].values),
                        "grad_norm": spike_share(grads) if len(grads) else None},
    })
