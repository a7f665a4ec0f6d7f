"""The spike monitor: one rule per metric and the events it flags, online and offline.

The trainer feeds it each step's record at a read-back; ``spikebench spikes`` feeds it the
rows of any log. Both get identical events, because both run this object.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from spikebench import metrics as M
from spikebench.spikes.events import Event, EventTracker, local_baseline
from spikebench.spikes.reports import Report, Reporter
from spikebench.spikes.rolling import Ring
from spikebench.spikes.rules import RULES, make_rule, metric_kind
from spikebench.values import dec_float, enc_float


class _Series:
    """Per-metric state: the rule, recent raw values for event baselines, the event tracker."""

    def __init__(self, key: str, rule: str, gap: int, rule_kwargs: Mapping[str, Any]):
        self.key = key
        self.rule = make_rule(rule, metric_kind(key), **rule_kwargs)
        self.recent = Ring(SpikeMonitor.BASELINE_WINDOW)
        self.tracker = EventTracker(key, gap)
        self.last_step: int | None = None
        self.n = 0
        # Rows whose verdict a delayed rule has not given yet: [step, value, injected].
        self.held: list[list] = []
        self.reporter = Reporter(key, gap)  # what an online user heard, and when

    def baseline(self, fallback: float) -> tuple[float, float | None, float, float]:
        return local_baseline(
            self.recent.last(self.recent.count), SpikeMonitor.LEVEL_WINDOW, fallback
        )


class SpikeMonitor:
    """Streams a run's flat metric dicts through one spike rule and builds events.

    ``SpikeMonitor(rule="default", metrics=("train/loss", "optim/grad_norm"))``; call
    :meth:`update` once per logged step in step order with host floats, then :meth:`finish`.
    The same object is used inside training and by ``spikebench spikes`` over a log.

    - Missing keys (and None values) are ignored; a step not greater than the last one seen
      for that metric is ignored too (a resumed run replaying logged steps).
    - Non-finite values are spikes (under every rule) and are kept out of the statistics.
    - Metric keys containing ``grad_norm`` are grad norms (rules restricted to losses do not
      apply to them); everything else is treated as a loss-like series.
    - Events: see :mod:`spikebench.events`; the pre-onset level is the median of the last
      16 finite values, sigma the MAD-of-differences scale of the last 64, and the area is
      measured from the pre-spike trend fitted on those 64.
    """

    BASELINE_WINDOW = 64
    LEVEL_WINDOW = 16

    def __init__(
        self,
        rule: str = "default",
        metrics: tuple[str, ...] | list[str] = (M.TRAIN_LOSS, M.GRAD_NORM),
        *,
        gap: int = 5,
        rule_kwargs: Mapping[str, Any] | None = None,
    ):
        if rule not in RULES:
            raise ValueError(f"unknown spike rule {rule!r}; choose from: {', '.join(RULES)}")
        self.rule = rule
        self.metrics = tuple(metrics)
        self.gap = gap
        self._rule_kwargs = dict(rule_kwargs or {})
        self._series = {m: _Series(m, rule, gap, self._rule_kwargs) for m in self.metrics}

    def first_step(self, metric: str) -> int:
        """0-based index of the first finite value of ``metric`` the rule can flag."""
        return self._series[metric].rule.first_step

    def update(self, step: int, metrics: Mapping[str, Any]) -> list[str]:
        """Feed one step; returns the metric keys flagged at this step (usually empty)."""
        flagged = []
        injected = bool(metrics.get(M.INJECTED))
        for key, s in self._series.items():
            raw = metrics.get(key)
            if raw is None:
                continue
            if s.last_step is not None and step <= s.last_step:
                continue
            v = float(raw)
            s.last_step = step
            s.n += 1
            if s.rule.delay:  # the verdict is for a row held `delay` rows back
                s.held.append([step, v, injected])
                verdict = s.rule.update(v)
                if s.rule.now:
                    s.reporter.flag(s.n, step)
                if verdict is not None and self._decide(s, *s.held.pop(0), verdict[0],
                                                        s.n - len(s.held), step):
                    flagged.append(key)
                continue
            spike = s.rule.update(v)[0] if math.isfinite(v) else True
            if self._observe(s, step, v, injected, spike):
                flagged.append(key)
        return flagged

    def _decide(self, s: _Series, step: int, v: float, injected: bool, spike: bool,
                index: int, now: int) -> bool:
        """A delayed verdict: the event it builds, then the reports it confirms or
        withdraws (row ``index``, given while step ``now`` is fed)."""
        before = len(s.tracker.events)
        self._observe(s, step, v, injected, spike)
        s.reporter.verdict(index, step, spike, len(s.tracker.events) > before, now)
        return spike

    @staticmethod
    def _observe(s: _Series, step: int, v: float, injected: bool, spike: bool) -> bool:
        s.tracker.observe(step, v, spike, lambda s=s, v=v: s.baseline(v), injected)
        if math.isfinite(v):
            s.recent.push(v)
        return spike

    @property
    def events(self) -> list[Event]:
        """All events so far (closed and open), ordered by onset, then metric order."""
        evs = [e for m in self.metrics for e in self._series[m].tracker.events]
        order = {m: i for i, m in enumerate(self.metrics)}
        return sorted(evs, key=lambda e: (e.onset, order[e.metric]))

    def loss_events(self) -> list[Event]:
        """The training loss's events so far (open ones included), by onset."""
        return list(self._series[M.TRAIN_LOSS].tracker.events) if M.TRAIN_LOSS in \
            self._series else []

    def n_events(self, metric: str) -> int:
        """Events of ``metric`` so far, open ones included (O(1))."""
        return len(self._series[metric].tracker.events)

    def reports(self, metric: str) -> list[Report]:
        """The spikes of ``metric`` as an online user heard of them (:mod:`.reports`):
        with a delayed rule, provisional at their first sure row, then confirmed or
        withdrawn; with any other rule, each event as it opens."""
        s = self._series[metric]
        if s.rule.delay:
            return list(s.reporter.reports)
        return [Report(metric, e.onset, e.onset, 0, 0, "confirmed", e.onset)
                for e in s.tracker.events]

    def n_reported(self, metric: str) -> int:
        """Spikes of ``metric`` reported so far, withdrawn ones included (O(1))."""
        s = self._series[metric]
        return len(s.reporter.reports) if s.rule.delay else len(s.tracker.events)

    def n_withdrawn(self, metric: str) -> int:
        """Provisional reports of ``metric`` withdrawn so far (O(1))."""
        return self._series[metric].reporter.withdrawn

    def n_updates(self, metric: str) -> int:
        """Number of values of ``metric`` consumed so far."""
        return self._series[metric].n

    def finish(self) -> None:
        """End of data: the verdicts a delayed rule still holds, then every event is final."""
        for s in self._series.values():
            if s.rule.delay:
                now = s.last_step if s.last_step is not None else 0
                first = s.n - len(s.held) + 1
                for i, ((step, v, injected), (spike, _)) in enumerate(
                        zip(s.held, s.rule.flush(), strict=True)):
                    self._decide(s, step, v, injected, spike, first + i, now)
                s.held = []
                s.reporter.finish(now)
            s.tracker.finish()

    def state_dict(self) -> dict[str, Any]:
        """Plain JSON-able state (no NaN/inf literals), for checkpoints."""
        return {
            "rule": self.rule,
            "metrics": list(self.metrics),
            "gap": self.gap,
            "rule_kwargs": self._rule_kwargs,
            "series": {
                k: {
                    "rule": s.rule.state_dict(),
                    "recent": s.recent.state_dict(),
                    "tracker": s.tracker.state_dict(),
                    "last_step": s.last_step,
                    "n": s.n,
                    "held": [[st, enc_float(v), inj] for st, v, inj in s.held],
                    "reporter": s.reporter.state_dict(),
                }
                for k, s in self._series.items()
            },
        }

    def load_state_dict(self, d: Mapping[str, Any]) -> None:
        self.__init__(d["rule"], tuple(d["metrics"]), gap=d["gap"], rule_kwargs=d["rule_kwargs"])
        for k, sd in d["series"].items():
            s = self._series[k]
            s.rule.load_state_dict(sd["rule"])
            s.recent.load_state_dict(sd["recent"])
            s.tracker.load_state_dict(sd["tracker"])
            s.last_step = sd["last_step"]
            s.n = sd["n"]
            s.held = [[st, dec_float(v), inj] for st, v, inj in sd.get("held", [])]
            if "reporter" in sd:  # states from before reports had none
                s.reporter.load_state_dict(sd["reporter"])
