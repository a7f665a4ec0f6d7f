"""Spike detection rules: small stateful objects fed one finite value at a time.

``update(value) -> (is_spike, score)``, in step order. State lives in fixed-size ring
buffers and running sums (:mod:`.rolling`), so an update costs the same at step 10 and at
step 10 million. Non-finite values never reach a rule: the monitor flags them itself.

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
``default``               robust residual, multi-step evidence on the loss; jump rule  1 / 16
========================  ===========================================================  =====
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar

from spikebench.spikes.evidence import Evidence, EvidenceParams
from spikebench.spikes.robust import mad_sigma, median
from spikebench.spikes.rolling import Ring, RollingMoments
from spikebench.values import dec_float, enc_float

LOSS, GRAD_NORM = "loss", "grad_norm"


def metric_kind(key: str) -> str:
    """'grad_norm' for grad-norm-like keys (``optim/grad_norm``, ``gradnorm``), else 'loss'."""
    k = key.lower().replace("-", "_")
    return GRAD_NORM if ("grad_norm" in k or "gradnorm" in k) else LOSS


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
    # Rows a verdict comes late. A rule with delay > 0 is fed every value, non-finite ones
    # too, and its update returns the verdict for the value `delay` rows back (None before
    # there is one); flush() returns the verdicts still held, at the end of the data.
    delay: int = 0
    # With delay > 0: the one-scale flag of the value just fed (the row is sure enough to
    # tell an online user at once; the delayed verdict confirms or withdraws it).
    now: bool = False

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
    a jump rule that works from the second value on, and multi-step evidence.

    For every value y (the loss itself; log(grad norm), since grad norms vary
    multiplicatively):

    1. *Robust rule* (from index ``min_periods`` = 16): level = median of the previous
       ``level_window`` (8) values; sigma = 1.4826 * MAD of the first differences of the
       previous ``window`` (256) values / sqrt(2), refreshed every ``sigma_every`` (16)
       values once 64 exist (it drifts slowly; this keeps the update at a few microseconds).
       The score is (y - level) / sigma. At one scale (``multi=False``: grad norms, and the
       rollback trigger, which must act at once) a score over ``k`` (5.5) is a spike.
    2. *Jump rule* (loss only, indices 1 .. ``min_periods`` - 1, i.e. before the robust
       window exists): flag if loss - min(previous losses) > ``jump`` (1.0 nat).
    3. *Multi-step evidence* (``multi``, on by default for the loss;
       :mod:`spikebench.spikes.evidence`): a score over ``k_big`` (8.48) is a spike at once;
       a smaller rise is a spike if it comes back and its peak or its summed residuals
       stand out of the local noise. Its parameters are keyword arguments here too
       (:class:`~spikebench.spikes.evidence.EvidenceParams`). Verdicts then come
       ``delay`` (73) rows late; the rule holds those rows, so events keep their true
       onset, online and offline alike.

    Why this shape:

    - Differences remove the local trend, so a fast early drop or a warmup phase does not
      read as noise, and the MAD ignores the spikes and heavy-tailed steps it is meant to
      find (50% breakdown point). The sigma window is long because the MAD's own sampling
      error over a short one lets heavy-tailed steps through.
    - The median of only 8 values lags a falling curve by ~4 steps, which biases the
      residual *down* (conservative) during the early drop; an upward level shift of a few
      sigma is absorbed within ~4 steps, so LR-schedule and curriculum steps do not fire.
    - One-sided: drops (LR decay, curriculum) are never spikes.
    - ``k`` trades false alarms against recall on the synthetic logs
      (``benchmarks/detectors.py``); the evidence's parameters were chosen on the
      development split of the labelled real traces (``benchmarks/detector_tune.py``),
      keeping the synthetic acceptance test. The README has the tables.
    - Windowed rules are blind for their first W steps, yet at high LR the real
      instabilities of a small GPT are multi-nat loss jumps in its first steps. A 1-nat
      jump above the best loss so far is a spike at any loss scale of an LM, and the early
      loss only falls, so the jump rule covers that gap. Grad norms get no jump rule: early
      grad norms swing by large factors normally.

    Edge cases: grad norms <= 0 are clamped to a tiny positive value before the log; the
    sigma is floored at 1e-6 x |level| so a perfectly smooth curve does not fire on round-off;
    with ``multi`` a non-finite value is flagged in turn and kept out of every statistic.
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
        multi: bool | None = None,
        **evidence: Any,
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
        self._level = self._sig = 0.0  # the last robust row's level and sigma
        # Multi-step evidence on the loss (grad norms swing over several steps normally).
        multi = (kind == LOSS) if multi is None else multi
        params = EvidenceParams(**evidence)  # checked even where unused: a typo raises
        self.ev = Evidence(params, self.diffs) if multi else None
        self.delay = self.ev.delay if self.ev else 0
        self.first_step = 1 if kind == LOSS else min_periods

    @property
    def multi(self) -> bool:
        return self.ev is not None

    def sigma(self) -> float:
        return mad_sigma(self.diffs.last(self.diffs.count))

    def state_dict(self) -> dict[str, Any]:
        out = super().state_dict()
        return {**out, "evidence": self.ev.state_dict()} if self.ev else out

    def load_state_dict(self, d: Mapping[str, Any]) -> None:
        super().load_state_dict(d)
        if self.ev:
            # States from before spikebench.spikes.evidence kept its parts at the top level.
            self.ev.load_state_dict(d.get("evidence") or d)

    def update(self, value: float) -> tuple[bool, float] | None:
        if self.ev is None:
            return self._step(value)
        if not math.isfinite(value):
            self.now = True
            self.ev.reset()
            self.ev.hold(True, math.inf)
        else:
            robust = self.n >= self.min_periods  # else the jump rule's verdict (in nats)
            spike, score = self._step(value)
            self.now = score > self.k if robust else spike
            self.ev.hold(spike, score if robust else math.inf)
            self.ev.observe(self.prev, score if robust else None, self._level, self._sig)
        return self.ev.release()

    def flush(self) -> list[tuple[bool, float]]:
        """The verdicts still held (see :meth:`Evidence.flush`)."""
        return self.ev.flush() if self.ev else []

    def _step(self, value: float) -> tuple[bool, float]:
        y = math.log(max(value, 1e-30)) if self.log else value
        spike, score = False, 0.0
        if self.n >= self.min_periods:
            level = median(self.vals.last(self.level_window))
            # Exact while the window fills (sigma moves fast early), then every sigma_every.
            if self.n < 64 or self.n % self.sigma_every == 0 or self.sig == 0.0:
                self.sig = self.sigma()
            sig = max(self.sig, 1e-6 * abs(level), 1e-12)
            self._level, self._sig = level, sig
            score = (y - level) / sig
            # With the evidence only a huge peak is a spike at once; others must come back.
            spike = score > (self.ev.p.k_big if self.ev else self.k)
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
