"""Spike detection rules and :class:`SpikeMonitor`, the one monitor used online and offline.

Every rule is a small stateful object fed one finite value at a time, in step order, with
``update(value) -> (is_spike, score)``. State lives in fixed-size ring buffers and running
sums, so each update costs O(window) with a constant window, independent of run length, and
nothing in a rule grows per step. Non-finite values never reach a rule: the monitor flags
them itself (every rule counts NaN/inf as a spike) and keeps them out of the statistics.

Rules (``RULES``), with the 0-based index of the first value each can flag (``first_step``,
counting finite values the rule has seen):

========================  ===========================================================  =====
name                      rule                                                         first
========================  ===========================================================  =====
``zscore``                value > mean + 3 sd of the previous 100 values               100
``olmo``                  |value - mean| >= 7 sd of the previous 1000 (OLMo 2 score)   1000
``olmo_online``           value > mean + 6 sd of the previous 128 (OLMo-core)          128
``loss_ratio``            value / min(previous) > 1.1 (Li et al. 2022), loss only      1
``persistent``            > 2x mean of previous 100 for more than 4 steps (LLM Foundry) 104
``default``               robust residual > 5.5 sigma; jump rule on the loss from 1    1 / 16
========================  ===========================================================  =====

See :class:`DefaultRule` for the design of the default and why.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar

from spikebench.events import (
    Event,
    EventTracker,
    dec_float,
    enc_float,
    local_baseline,
    median,
)

LOSS, GRAD_NORM = "loss", "grad_norm"
# Set (truthy) by the trainer on steps whose batch carried an injected fault.
INJECTED_KEY = "data/injected"


def metric_kind(key: str) -> str:
    """'grad_norm' for grad-norm-like keys (``optim/grad_norm``, ``gradnorm``), else 'loss'."""
    k = key.lower().replace("-", "_")
    return GRAD_NORM if ("grad_norm" in k or "gradnorm" in k) else LOSS


# --------------------------------------------------------------------------- state helpers


class Ring:
    """Fixed-capacity ring buffer over a preallocated list; ``push`` returns the evicted value."""

    def __init__(self, size: int):
        if size < 1:
            raise ValueError(f"ring size must be >= 1, got {size}")
        self.size = size
        self.buf = [0.0] * size
        self.pos = 0  # next write index
        self.count = 0

    def push(self, x: float) -> float | None:
        old = self.buf[self.pos] if self.count == self.size else None
        self.buf[self.pos] = x
        self.pos = (self.pos + 1) % self.size
        self.count = min(self.count + 1, self.size)
        return old

    def last(self, m: int) -> list[float]:
        """The most recent ``min(m, count)`` values, oldest first."""
        m = min(m, self.count)
        start = self.pos - m
        if start >= 0:
            return self.buf[start : self.pos]
        return self.buf[start:] + self.buf[: self.pos]

    def state_dict(self) -> dict:
        return {"size": self.size, "values": self.last(self.count)}

    def load_state_dict(self, d: dict) -> None:
        self.__init__(d["size"])
        for v in d["values"]:
            self.push(float(v))


class RollingMoments:
    """Mean and sample sd of the last ``size`` values via running sums, O(1) per push.

    Sums are taken around a reference value (the first one seen) so squares stay small, and
    are recomputed exactly every ``size`` pushes so round-off cannot drift over long runs.
    """

    def __init__(self, size: int):
        self.ring = Ring(size)
        self.ref: float | None = None
        self.s1 = 0.0
        self.s2 = 0.0
        self._since_exact = 0

    @property
    def count(self) -> int:
        return self.ring.count

    def push(self, x: float) -> None:
        if self.ref is None:
            self.ref = x
        old = self.ring.push(x)
        d = x - self.ref
        self.s1 += d
        self.s2 += d * d
        if old is not None:
            od = old - self.ref
            self.s1 -= od
            self.s2 -= od * od
        self._since_exact += 1
        if self._since_exact >= self.ring.size:
            self._since_exact = 0
            ds = [v - self.ref for v in self.ring.last(self.ring.count)]
            self.s1 = sum(ds)
            self.s2 = sum(v * v for v in ds)

    def mean(self) -> float:
        return self.ref + self.s1 / self.count

    def std(self) -> float:
        n = self.count
        if n < 2:
            return 0.0
        var = (self.s2 - self.s1 * self.s1 / n) / (n - 1)
        return math.sqrt(max(var, 0.0))

    def state_dict(self) -> dict:
        return {"ring": self.ring.state_dict(), "ref": self.ref, "since": self._since_exact}

    def load_state_dict(self, d: dict) -> None:
        self.ring = Ring(1)
        self.ring.load_state_dict(d["ring"])
        self.ref = d["ref"]
        ds = [v - self.ref for v in self.ring.last(self.ring.count)] if self.ref is not None else []
        self.s1 = sum(ds)
        self.s2 = sum(v * v for v in ds)
        self._since_exact = d["since"]


def _zscore(x: float, mean: float, sd: float) -> float:
    # A constant window has sd 0: any different value is infinitely far, an equal one is 0.
    floor = 1e-12 * max(1.0, abs(mean))
    if sd <= floor:
        return 0.0 if abs(x - mean) <= floor else math.copysign(math.inf, x - mean)
    return (x - mean) / sd


# --------------------------------------------------------------------------------- rules


class Rule(ABC):
    """A spike rule for one metric series.

    ``update(value)`` takes the next *finite* value and returns ``(is_spike, score)``; the
    score is the rule's own statistic (a z-score, a ratio), 0.0 before the rule can fire.
    ``first_step`` is the 0-based index (among finite values fed) of the first value the
    rule can flag. ``kinds`` lists the metric kinds the rule applies to; on other kinds the
    monitor uses :class:`NeverRule` (only non-finite values count there).
    """

    name: ClassVar[str] = "rule"
    kinds: ClassVar[frozenset[str]] = frozenset({LOSS, GRAD_NORM})
    _state: ClassVar[tuple[str, ...]] = ()  # attributes saved by state_dict

    def __init__(self, kind: str = LOSS):
        self.kind = kind

    first_step: int = 0

    @abstractmethod
    def update(self, value: float) -> tuple[bool, float]: ...

    def state_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k in self._state:
            v = getattr(self, k)
            out[k] = v.state_dict() if hasattr(v, "state_dict") else enc_float(v)
        return out

    def load_state_dict(self, d: Mapping[str, Any]) -> None:
        for k in self._state:
            cur = getattr(self, k)
            if hasattr(cur, "load_state_dict"):
                cur.load_state_dict(d[k])
            else:
                setattr(self, k, dec_float(d[k]))


class NeverRule(Rule):
    """Flags nothing; used where a rule does not apply (e.g. ``loss_ratio`` on grad norms)."""

    name = "never"
    first_step = 2**62

    def update(self, value: float) -> tuple[bool, float]:
        return False, 0.0


class ZScoreRule(Rule):
    """value > mean + k*sd of the previous ``window`` values (default k=3, window=100).

    The "strategy table" rule. Can fire from index ``window`` (a full window). On plain
    Gaussian training noise it fires on ~0.13% of steps by construction, more with heavy
    tails or a trending mean, which is why it is reported but not the default.
    """

    name = "zscore"
    _state = ("mom",)

    def __init__(self, kind: str = LOSS, window: int = 100, k: float = 3.0):
        super().__init__(kind)
        self.window, self.k = window, k
        self.mom = RollingMoments(window)
        self.first_step = window

    def update(self, value: float) -> tuple[bool, float]:
        spike, z = False, 0.0
        if self.mom.count >= self.window:
            z = _zscore(value, self.mom.mean(), self.mom.std())
            spike = z > self.k
        self.mom.push(value)
        return spike, z


class OlmoRule(Rule):
    """OLMo 2's spike score rule: |value - mean| >= k*sd of the previous ``window`` values.

    Two-sided, k=7, window=1000; the spike *score* is the share of values it flags (see
    :func:`spikebench.scores.spike_score`). By default it fires only with a full window
    (index 1000 on); ``min_periods`` lowers that. Downward jumps count too, as in OLMo 2.
    """

    name = "olmo"
    _state = ("mom",)

    def __init__(
        self,
        kind: str = LOSS,
        window: int = 1000,
        k: float = 7.0,
        min_periods: int | None = None,
        two_sided: bool = True,
    ):
        super().__init__(kind)
        self.window, self.k, self.two_sided = window, k, two_sided
        self.min_periods = window if min_periods is None else max(2, min(min_periods, window))
        self.mom = RollingMoments(window)
        self.first_step = self.min_periods

    def update(self, value: float) -> tuple[bool, float]:
        spike, z = False, 0.0
        if self.mom.count >= self.min_periods:
            z = _zscore(value, self.mom.mean(), self.mom.std())
            spike = (abs(z) if self.two_sided else z) >= self.k
        self.mom.push(value)
        return spike, z


class OlmoOnlineRule(OlmoRule):
    """OLMo-core's online variant: one-sided, value > mean + 6 sd of the previous 128 values.

    Fires from index 128.
    """

    name = "olmo_online"

    def __init__(self, kind: str = LOSS, window: int = 128, k: float = 6.0):
        super().__init__(kind, window=window, k=k, two_sided=False)


class LossRatioRule(Rule):
    """L_t / min_{s<t} L_s > threshold (Li et al. 2022; threshold 1.1). Loss only.

    Fires from index 1. Defined for positive losses: while the running minimum is <= 0 the
    ratio is meaningless and the rule does not fire. Because the minimum of a noisy curve is
    biased low, late-training noise alone pushes the ratio up over a long run.
    """

    name = "loss_ratio"
    kinds = frozenset({LOSS})
    _state = ("runmin",)
    first_step = 1

    def __init__(self, kind: str = LOSS, threshold: float = 1.1):
        super().__init__(kind)
        self.threshold = threshold
        self.runmin = math.inf

    def update(self, value: float) -> tuple[bool, float]:
        spike, ratio = False, 0.0
        if math.isfinite(self.runmin) and self.runmin > 0:
            ratio = value / self.runmin
            spike = ratio > self.threshold
        self.runmin = min(self.runmin, value)
        return spike, ratio


class PersistentRule(Rule):
    """LLM Foundry's KillLossSpike rule: > ``multiplier`` x the mean of the previous
    ``window`` values for more than ``patience`` consecutive values (2x, 100, 4). Loss only.

    Needs a full window, so it fires from index window + patience (104), and then only on the
    5th consecutive outlier: its onsets are 4 steps late by design. Every value, outlier or
    not, enters the window.
    """

    name = "persistent"
    kinds = frozenset({LOSS})
    _state = ("mom", "consecutive")

    def __init__(
        self, kind: str = LOSS, window: int = 100, multiplier: float = 2.0, patience: int = 4
    ):
        super().__init__(kind)
        self.window, self.multiplier, self.patience = window, multiplier, patience
        self.mom = RollingMoments(window)
        self.consecutive = 0
        self.first_step = window + patience

    def update(self, value: float) -> tuple[bool, float]:
        ratio = 0.0
        if self.mom.count >= self.window:
            mean = self.mom.mean()
            ratio = value / mean if mean > 0 else 0.0
            self.consecutive = self.consecutive + 1 if value > self.multiplier * mean else 0
        self.mom.push(value)
        return self.consecutive > self.patience, ratio


class DefaultRule(Rule):
    """Robust default: residual against a local median level, in MAD-of-differences sigmas,
    plus a jump rule that works from the second value on.

    For every value y (the loss itself; log(grad norm), since grad norms vary
    multiplicatively):

    1. *Robust rule* (from index ``min_periods`` = 16): level = median of the previous
       ``level_window`` (8) values; sigma = 1.4826 * MAD of the first differences of the
       previous ``window`` (256) values / sqrt(2), refreshed every ``sigma_every`` (16)
       values once 64 exist (it drifts slowly; this keeps the update at a few microseconds).
       Flag if (y - level) / sigma > ``k`` (5.5).
    2. *Jump rule* (loss only, indices 1 .. ``min_periods`` - 1, i.e. before the robust
       window exists): flag if loss - min(previous losses) > ``jump`` (1.0 nat).

    Why this shape:

    - Differences remove the local trend, so a fast early drop or a warmup phase does not
      read as noise, and the MAD ignores the spikes and heavy-tailed steps it is meant to
      find (50% breakdown point). A long sigma window matters: with 64 differences the
      MAD's own sampling error (~15%) let heavy-tailed steps through at 1 false alarm per
      10k steps; 256 brought that to ~0.1.
    - The median of only 8 values lags a falling curve by ~4 steps, which biases the
      residual *down* (conservative) during the early drop; an upward level shift of a few
      sigma is absorbed within ~4 steps, which is why small level shifts (LR schedule,
      curriculum) do not fire, while an upward ramp costs only slope*4.5 in residual.
      (A longer level window, or max of two, changed nothing measurable.)
    - One-sided: drops (LR decay, curriculum) are never spikes.
    - k = 5.5 was chosen on the synthetic benchmark (``benchmarks/detectors.py``, spike
      heights from 6 sigma, 0.5% heavy-tailed steps of +-1.5-3 sigma): k = 5 gave precision
      0.92 (0.36 false alarms / 10k), k = 6 lost recall on 6-sigma spikes (0.978); k = 3
      (the zscore rule) fires tens of times per 10k steps.
    - Windowed rules are blind for their first W steps, yet at high LR the real
      instabilities of a small GPT are loss jumps of 1.7-11 nats in steps 1-15. A 1-nat jump
      above the best loss so far is a spike at any loss scale of an LM, and the early loss
      only falls, so the jump rule covers exactly that gap without false alarms.
      Grad norms get no jump rule: early grad norms swing by large factors normally.

    Edge cases: grad norms <= 0 are clamped to a tiny positive value before the log; the
    sigma is floored at 1e-6 x |level| so a perfectly smooth curve does not fire on round-off.
    """

    name = "default"
    _state = ("vals", "diffs", "prev", "runmin", "n", "sig")

    def __init__(
        self,
        kind: str = LOSS,
        window: int = 256,
        level_window: int = 8,
        k: float = 5.5,
        jump: float = 1.0,
        min_periods: int = 16,
        sigma_every: int = 16,
        log: bool | None = None,
    ):
        super().__init__(kind)
        self.window, self.level_window, self.k = window, level_window, k
        self.jump, self.min_periods, self.sigma_every = jump, min_periods, sigma_every
        self.log = (kind == GRAD_NORM) if log is None else log
        self.vals = Ring(level_window)
        self.diffs = Ring(window - 1)
        self.prev: float | None = None
        self.runmin = math.inf
        self.n = 0
        self.sig = 0.0
        self.first_step = 1 if kind == LOSS else min_periods

    def sigma(self) -> float:
        d = self.diffs.last(self.diffs.count)
        m = median(d)
        dev = [abs(x - m) for x in d]
        mad = median(dev)
        if mad == 0.0:
            mad = sum(dev) / len(dev)
        return 1.4826 * mad / math.sqrt(2.0)

    def update(self, value: float) -> tuple[bool, float]:
        y = math.log(max(value, 1e-30)) if self.log else value
        spike, score = False, 0.0
        if self.n >= self.min_periods:
            level = median(self.vals.last(self.level_window))
            # Exact while the window fills (sigma moves fast early), then every sigma_every.
            if self.n < 64 or self.n % self.sigma_every == 0 or self.sig == 0.0:
                self.sig = self.sigma()
            sig = max(self.sig, 1e-6 * abs(level), 1e-12)
            score = (y - level) / sig
            spike = score > self.k
        elif self.kind == LOSS and self.n >= 1:
            score = value - self.runmin
            spike = score > self.jump
        self.vals.push(y)
        if self.prev is not None:
            self.diffs.push(y - self.prev)
        self.prev = y
        self.runmin = min(self.runmin, value)
        self.n += 1
        return spike, score


RULES: dict[str, type[Rule]] = {
    r.name: r
    for r in (DefaultRule, ZScoreRule, OlmoRule, OlmoOnlineRule, LossRatioRule, PersistentRule)
}


def make_rule(name: str, kind: str = LOSS, **kwargs: Any) -> Rule:
    """Build rule ``name`` for a metric of ``kind``; ValueError lists the rules if unknown."""
    if name not in RULES:
        raise ValueError(f"unknown spike rule {name!r}; choose from: {', '.join(RULES)}")
    cls = RULES[name]
    if kind not in cls.kinds:
        return NeverRule(kind)
    return cls(kind, **kwargs)


# ------------------------------------------------------------------------------- monitor


class _Series:
    """Per-metric state: the rule, recent raw values for event baselines, the event tracker."""

    def __init__(self, key: str, rule: str, gap: int, rule_kwargs: Mapping[str, Any]):
        self.key = key
        self.rule = make_rule(rule, metric_kind(key), **rule_kwargs)
        self.recent = Ring(SpikeMonitor.BASELINE_WINDOW)
        self.tracker = EventTracker(key, gap)
        self.last_step: int | None = None
        self.n = 0

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
        metrics: tuple[str, ...] | list[str] = ("train/loss", "optim/grad_norm"),
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
        injected = bool(metrics.get(INJECTED_KEY))
        for key, s in self._series.items():
            raw = metrics.get(key)
            if raw is None:
                continue
            if s.last_step is not None and step <= s.last_step:
                continue
            v = float(raw)
            s.last_step = step
            s.n += 1
            if math.isfinite(v):
                spike, _ = s.rule.update(v)
            else:
                spike = True
            s.tracker.observe(step, v, spike, lambda s=s, v=v: s.baseline(v), injected)
            if math.isfinite(v):
                s.recent.push(v)
            if spike:
                flagged.append(key)
        return flagged

    @property
    def events(self) -> list[Event]:
        """All events so far (closed and open), ordered by onset, then metric order."""
        evs = [e for m in self.metrics for e in self._series[m].tracker.events]
        order = {m: i for i, m in enumerate(self.metrics)}
        return sorted(evs, key=lambda e: (e.onset, order[e.metric]))

    def n_updates(self, metric: str) -> int:
        """Number of values of ``metric`` consumed so far."""
        return self._series[metric].n

    def finish(self) -> None:
        for s in self._series.values():
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
