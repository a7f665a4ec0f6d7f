"""The published spike rules (a strategy table's z-score, OLMo 2, OLMo-core, Li et al. 2022,
LLM Foundry), each one class with its online ``update`` and its array form ``flags``.

Each states its threshold once (``_spike``, which takes a float or an array); the array
form computes the same statistic by the same IEEE operations in the same order, so its
verdicts are bit for bit the online ones (:mod:`.robust` says how).
"""

from __future__ import annotations

import math
from abc import abstractmethod

import numpy as np

from spikebench.spikes.robust import pymax
from spikebench.spikes.rolling import RollingMoments
from spikebench.spikes.rule_base import LOSS, Rule


def zscore(x: float, mean: float, sd: float) -> float:
    """(x - mean) / sd; a constant window has sd 0: any different value is infinitely far,
    an equal one is 0 (:func:`zscores` is the array form)."""
    floor = 1e-12 * max(1.0, abs(mean))
    if sd <= floor:
        return 0.0 if abs(x - mean) <= floor else math.copysign(math.inf, x - mean)
    return (x - mean) / sd


def zscores(x: np.ndarray, mean: np.ndarray, sd: np.ndarray) -> np.ndarray:
    """:func:`zscore` elementwise."""
    with np.errstate(all="ignore"):
        floor = 1e-12 * pymax(1.0, np.abs(mean))
        diff = x - mean
        flat = np.where(np.abs(diff) <= floor, 0.0, np.copysign(np.inf, diff))
        return np.where(sd <= floor, flat, diff / sd)


def run_lengths(a: np.ndarray) -> np.ndarray:
    """Consecutive True values ending at each position (0 where False)."""
    idx = np.arange(len(a))
    last_false = np.maximum.accumulate(np.where(a, -1, idx))
    return idx - last_false


class MovingZRule(Rule):
    """A value's z-score against the mean and sd of the previous ``window`` values, once
    ``min_periods`` exist; subclasses say which z-scores are spikes (``_spike``)."""

    _state = ("mom",)

    def __init__(self, kind: str, window: int, k: float, min_periods: int):
        super().__init__(kind)
        self.window, self.k, self.min_periods = window, k, min_periods
        self.mom = RollingMoments(window)
        self.first_step = min_periods

    @abstractmethod
    def _spike(self, z): ...

    def update(self, value: float) -> tuple[bool, float]:
        spike, z = False, 0.0
        if self.mom.count >= self.min_periods:
            z = zscore(value, self.mom.mean(), self.mom.std())
            spike = self._spike(z)
        self.mom.push(value)
        return spike, z

    def flags(self, x: np.ndarray) -> np.ndarray:
        n, start = len(x), self.min_periods
        out = np.zeros(n, dtype=bool)
        if n > start:
            mean, sd = RollingMoments.series(x, self.window)  # after each push
            out[start:] = self._spike(zscores(x[start:], mean[start - 1:n - 1],
                                              sd[start - 1:n - 1]))
        return out


class ZScoreRule(MovingZRule):
    """value > mean + k*sd of the previous ``window`` values (default k=3, window=100).

    The "strategy table" rule. Can fire from index ``window`` (a full window). On plain
    Gaussian training noise it fires on ~0.13% of steps by construction, more with heavy
    tails or a trending mean, which is why it is reported but not the default.
    """

    name = "zscore"

    def __init__(self, kind: str = LOSS, window: int = 100, k: float = 3.0):
        super().__init__(kind, window, k, window)

    def _spike(self, z):
        return z > self.k


class OlmoRule(MovingZRule):
    """OLMo 2's spike score rule: |value - mean| >= k*sd of the previous ``window`` values.

    Two-sided, k=7, window=1000; the spike *score* is the share of values it flags (see
    :func:`spikebench.scores.spike_score`). By default it fires only with a full window
    (index 1000 on); ``min_periods`` lowers that. Downward jumps count too, as in OLMo 2.
    """

    name = "olmo"

    def __init__(
        self,
        kind: str = LOSS,
        window: int = 1000,
        k: float = 7.0,
        min_periods: int | None = None,
        two_sided: bool = True,
    ):
        mp = window if min_periods is None else max(2, min(min_periods, window))
        super().__init__(kind, window, k, mp)
        self.two_sided = two_sided

    def _spike(self, z):
        return (abs(z) if self.two_sided else z) >= self.k


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

    def flags(self, x: np.ndarray) -> np.ndarray:
        out = np.zeros(len(x), dtype=bool)
        if len(x):
            runmin = np.minimum.accumulate(x)[:-1]  # before each value
            ok = np.isfinite(runmin) & (runmin > 0)
            with np.errstate(all="ignore"):
                out[1:] = ok & (x[1:] / runmin > self.threshold)
        return out


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

    def _above(self, x, mean):
        return x > self.multiplier * mean

    def update(self, value: float) -> tuple[bool, float]:
        ratio = 0.0
        if self.mom.count >= self.window:
            mean = self.mom.mean()
            ratio = value / mean if mean > 0 else 0.0
            self.consecutive = self.consecutive + 1 if self._above(value, mean) else 0
        self.mom.push(value)
        return self.consecutive > self.patience, ratio

    def flags(self, x: np.ndarray) -> np.ndarray:
        n, start = len(x), self.window
        out = np.zeros(n, dtype=bool)
        if n > start:
            mean, _ = RollingMoments.series(x, self.window)
            with np.errstate(all="ignore"):
                above = self._above(x[start:], mean[start - 1:n - 1])
            out[start:] = run_lengths(above) > self.patience
        return out
