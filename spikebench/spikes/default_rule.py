"""The default spike rule: a robust residual, a jump rule for the first rows, and
multi-step evidence on the loss; its online form (:class:`DefaultRule`) and its array form
(:class:`DefaultStats`, then :func:`.evidence.evidence_flags`) share its thresholds and its
sigma schedule, and give the same verdicts bit for bit.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from spikebench.spikes.evidence import Evidence, EvidenceParams, evidence_flags
from spikebench.spikes.robust import mad_sigma, mad_sigmas, median, medians, pymax
from spikebench.spikes.rolling import Ring
from spikebench.spikes.rule_base import GRAD_NORM, LOSS, Rule, Unsupported

# Rows over which the default rule recomputes its sigma on every row (it moves fast early).
EXACT_UNTIL = 64
LOG_PIECE = 1 << 15  # values whose logarithms are taken at a time over a whole series


class DefaultRule(Rule):
    """Robust default: residual against a local median level, in MAD-of-differences sigmas,
    a jump rule that works from the second value on, and multi-step evidence.

    For every value y (the loss itself; log(grad norm), since grad norms vary
    multiplicatively):

    1. *Robust rule* (from index ``min_periods`` = 16): level = median of the previous
       ``level_window`` (8) values; sigma = 1.4826 * MAD of the first differences of the
       previous ``window`` (256) values / sqrt(2), refreshed every ``sigma_every`` (16)
       values once ``EXACT_UNTIL`` (64) exist (it drifts slowly; this keeps the update at
       a few microseconds).
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

    def flags(self, x: np.ndarray) -> np.ndarray:
        if self.ev is not None:
            raise ValueError("the default rule with evidence has delayed verdicts: verdicts()")
        return DefaultStats(self, x).spike

    def verdicts(self, values: np.ndarray) -> np.ndarray:
        if self.ev is None:
            return super().verdicts(values)
        fin = np.isfinite(values)
        st = DefaultStats(self, values[fin])
        return evidence_flags(self.ev.p, st, fin, self.min_periods, self.diffs.size)

    # The rule's thresholds and schedule, one definition for both forms (floats or arrays).

    def _spike(self, score):
        # With the evidence only a huge peak is a spike at once; others must come back.
        return score > (self.ev.p.k_big if self.ev else self.k)

    def _jumped(self, score):
        return score > self.jump

    @staticmethod
    def _floored(raw, level):
        return pymax(pymax(raw, 1e-6 * abs(level)), 1e-12)

    def _refresh(self, n: int, sig: float) -> bool:
        """Whether row ``n`` recomputes sigma: every row until EXACT_UNTIL, then every
        ``sigma_every``-th, and every row while it is 0.0 (a flat stretch)."""
        return n < EXACT_UNTIL or n % self.sigma_every == 0 or sig == 0.0

    def _step(self, value: float) -> tuple[bool, float]:
        y = math.log(max(value, 1e-30)) if self.log else value
        spike, score = False, 0.0
        if self.n >= self.min_periods:
            level = median(self.vals.last(self.level_window))
            # Exact while the window fills (sigma moves fast early), then every sigma_every.
            if self._refresh(self.n, self.sig):
                self.sig = self.sigma()
            sig = self._floored(self.sig, level)
            self._level, self._sig = level, sig
            score = (y - level) / sig
            spike = self._spike(score)
        elif self.kind == LOSS and self.n >= 1:
            score = value - self.runmin
            spike = self._jumped(score)
        self.vals.push(y)
        if self.prev is not None:
            self.diffs.push(y - self.prev)
        self.prev = y
        self.runmin = min(self.runmin, value)
        self.n += 1
        return spike, score


class DefaultStats:
    """:meth:`DefaultRule._step` over all finite values ``x`` (its array form): per value
    its transformed ``y``, ``score``, ``level``, floored ``sig`` and verdict ``spike``."""

    def __init__(self, rule: DefaultRule, x: np.ndarray):
        n = len(x)
        self.rule, self.n = rule, n
        if rule.log:
            self.y = _logs(np.where(1e-30 > x, 1e-30, x))
        else:
            self.y = x.copy()
        self.dy = np.diff(self.y)
        if not np.isfinite(self.dy).all():
            # Differences past the float range: sorting NaNs is order-dependent in Python.
            raise Unsupported("differences overflow")
        self.score = np.zeros(n)
        self.level = np.zeros(n)
        self.sig = np.zeros(n)
        self.spike = np.zeros(n, dtype=bool)
        mp = rule.min_periods
        if rule.kind == LOSS and n > 1:  # the jump rule, before the robust window exists
            j = np.arange(1, min(mp, n))
            self.score[j] = x[j] - np.minimum.accumulate(x[:mp])[j - 1]
            self.spike[j] = rule._jumped(self.score[j])
        if n <= mp:
            return
        lw = rule.level_window
        full = np.arange(max(mp, lw), n)
        self.level[full] = medians(self.y, full, lw)
        for i in range(mp, min(lw, n)):  # a level window still filling (min_periods < lw)
            self.level[i] = median(self.y[:i].tolist())
        raw = self._raw_sigma()
        level = self.level[mp:]
        with np.errstate(all="ignore"):
            sig = rule._floored(raw, level)
            self.sig[mp:] = sig
            self.score[mp:] = (self.y[mp:] - level) / sig
        self.spike[mp:] = rule._spike(self.score[mp:])

    def _raw_sigma(self) -> np.ndarray:
        """``DefaultRule.sig`` at each robust row, recomputed when ``_refresh`` says."""
        rule, n, dy = self.rule, self.n, self.dy
        w, every, mp = rule.window, rule.sigma_every, rule.min_periods
        raw = np.zeros(n)
        # Before the diff window is full, and until the schedule is plain: as the rule does.
        a_end = min(n, -(-max(EXACT_UNTIL, w, mp) // every) * every)
        sig = 0.0
        for i in range(mp, a_end):
            if rule._refresh(i, sig):
                sig = mad_sigma(dy[max(0, i - w):i - 1].tolist())
            raw[i] = sig
        if a_end < n:
            # From here every sigma_every-th row recomputes over a full window of w - 1,
            # and the rows after it keep its value...
            sched = np.arange(a_end, n, every)
            vals = mad_sigmas(dy, sched - 1, w - 1)
            raw[a_end:] = np.repeat(vals, every)[:n - a_end]
            # ...unless it is 0.0: then each next row recomputes until one is not.
            zero = sched[vals == 0.0]
            if len(zero):
                block = zero[:, None] + np.arange(1, every)
                inside = block < n
                comp = np.zeros(block.shape)
                comp[inside] = mad_sigmas(dy, block[inside] - 1, w - 1)
                nz = comp != 0.0
                first = np.where(nz.any(axis=1), nz.argmax(axis=1), every - 1)
                held = np.take_along_axis(comp, np.minimum(np.arange(every - 1), first[:, None]),
                                          axis=1)
                raw[block[inside]] = held[inside]
        return raw[mp:]


def _logs(x: np.ndarray) -> np.ndarray:
    """``math.log`` of each value, as the online rule takes it (numpy's ``log`` differs in
    the last bit for some values), a piece at a time so that its Python floats reuse the
    same memory."""
    out = np.empty(len(x))
    for c in range(0, len(x), LOG_PIECE):
        piece = x[c:c + LOG_PIECE]
        out[c:c + len(piece)] = np.fromiter(map(math.log, piece.tolist()), float, len(piece))
    return out
