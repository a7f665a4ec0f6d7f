"""The spike rules' per-row verdicts over a whole series at once, bit for bit those of the
online rules (:mod:`.rules`), for ``spikebench spikes`` on logs of millions of rows.

Why identical and not merely close: a verdict is a comparison with a threshold, so a value
one ulp off can add or drop an event. Every number here is computed by the same IEEE
operations in the same order as the online rule:

- elementwise arithmetic is the same in numpy as in Python floats (one rounding per
  operation, no fused multiply-add); Python's ``max``/``min`` are mimicked where NaN or
  signed zeros could tell them apart from numpy's;
- running sums are sequential: ``np.cumsum`` (an accumulate, never pairwise) over the
  additions and subtractions :class:`~.rolling.RollingMoments` makes, interleaved in its
  order; its exact recomputations use Python's own ``sum``;
- medians are order statistics (``np.partition`` picks the same element ``sorted`` does);
- logarithms come from ``math.log`` (numpy's own may differ in the last bit).

The default rule's multi-step evidence is a state machine; it runs the real
:class:`~.evidence.Evidence` code, but only over the rows where a run can open (a residual
above its ``open`` threshold) and the few rows that follow, which are rare in real logs.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from spikebench.spikes.evidence import Evidence
from spikebench.spikes.robust import MAD_TO_SIGMA, mad_sigma, median
from spikebench.spikes.rules import (
    LOSS,
    DefaultRule,
    LossRatioRule,
    NeverRule,
    OlmoRule,
    PersistentRule,
    Rule,
    ZScoreRule,
)

SQRT2 = math.sqrt(2.0)
# Python's sum() is a plain left-to-right sum before 3.12 and compensated since: numpy's
# cumsum may stand in for it only in the first case.
PLAIN_SUM = sum([1e16, 1.0, -1e16]) == 0.0
# Elements per chunk where windows are copied out: small enough to stay in cache.
CHUNK_ELEMS = 1 << 16


class Unsupported(Exception):
    """A series this module cannot score bit for bit (the caller uses the online rule)."""


def pymax(a, b):
    """Python's ``max(a, b)`` elementwise: ``a`` unless ``b > a`` (so NaN and -0.0 behave
    as in the online rules, unlike ``np.maximum``)."""
    return np.where(b > a, b, a)


# --------------------------------------------------------------------------- statistics


def moments(x: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """``mean()`` and ``std()`` of a :class:`~.rolling.RollingMoments` ``(size)`` after each
    push of ``x``, exactly as it computes them.

    Within a block of ``size`` pushes the sums change by ``+d`` then ``-old`` per push,
    starting from the exact sums recomputed at the end of the previous block: one
    sequential cumsum per block over those terms interleaved reproduces every rounding.
    """
    n = len(x)
    if n == 0:
        return np.empty(0), np.empty(0)
    ref = float(x[0])
    d = x - ref
    nb = -(-n // size)
    dp = np.zeros(nb * size)
    dp[:n] = d
    dp = dp.reshape(nb, size)
    d2 = dp * dp
    s1 = _block_sums(dp, _exact_sums(dp[:n // size]))[:n]
    s2 = _block_sums(d2, _exact_sums(d2[:n // size]))[:n]
    count = np.minimum(np.arange(1, n + 1), size).astype(float)
    with np.errstate(all="ignore"):
        mean = ref + s1 / count
        var = (s2 - s1 * s1 / count) / (count - 1)
        std = np.where(count < 2, 0.0, np.sqrt(pymax(var, 0.0)))
    return mean, std


def _exact_sums(rows: np.ndarray) -> np.ndarray:
    """``sum(row)`` for each row, as Python computes it (from an integer 0)."""
    if not PLAIN_SUM:
        return np.array([sum(r) for r in rows.tolist()])
    t = np.zeros((rows.shape[0], rows.shape[1] + 1))
    t[:, 1:] = rows
    return np.cumsum(t, axis=1)[:, -1]


def _block_sums(terms: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """A running sum after each push; ``terms`` is (blocks, size), ``exact`` the
    recomputed sum at the end of each complete block."""
    nb, size = terms.shape
    t = np.empty((nb, 1 + 2 * size))
    t[0, 0] = 0.0
    t[1:, 0] = exact[: nb - 1] if nb > 1 else []
    t[:, 1::2] = terms
    # The value pushed out `size` pushes earlier; the first block evicts nothing, and
    # adding -0.0 changes no sum.
    t[0, 2::2] = -0.0
    t[1:, 2::2] = -terms[:-1]
    run = np.cumsum(t, axis=1)[:, 2::2]
    run[: len(exact), -1] = exact  # the push that fills a block recomputes the sums
    return run.reshape(-1)


def zscores(x: np.ndarray, mean: np.ndarray, sd: np.ndarray) -> np.ndarray:
    """:func:`.rules._zscore` elementwise."""
    with np.errstate(all="ignore"):
        floor = 1e-12 * pymax(1.0, np.abs(mean))
        diff = x - mean
        flat = np.where(np.abs(diff) <= floor, 0.0, np.copysign(np.inf, diff))
        return np.where(sd <= floor, flat, diff / sd)


def medians(a: np.ndarray, ends: np.ndarray, length: int) -> np.ndarray:
    """:func:`.robust.median` of ``a[e - length:e]`` for each ``e`` in ``ends``."""
    out = np.empty(len(ends))
    h = length // 2
    view = sliding_window_view(a, length)
    step = max(1, 8 * CHUNK_ELEMS // length)
    for c in range(0, len(ends), step):
        # A full sort of a short window beats a partition at picking two elements.
        w = np.sort(view[ends[c:c + step] - length], axis=1)
        out[c:c + step] = w[:, h] if length % 2 else 0.5 * (w[:, h - 1] + w[:, h])
    return out


def mad_sigmas(dy: np.ndarray, ends: np.ndarray, length: int) -> np.ndarray:
    """:func:`.robust.mad_sigma` of ``dy[e - length:e]`` for each ``e`` in ``ends``."""
    out = np.empty(len(ends))
    h = length // 2
    kth = [h] if length % 2 else [h - 1, h]
    view = sliding_window_view(dy, length)
    step = max(1, CHUNK_ELEMS // length)
    for c in range(0, len(ends), step):
        w = view[ends[c:c + step] - length]
        p = np.partition(w, kth, axis=1)
        m = p[:, h] if length % 2 else 0.5 * (p[:, h - 1] + p[:, h])
        dev = np.abs(w - m[:, None])
        p = np.partition(dev, kth, axis=1)
        mad = p[:, h] if length % 2 else 0.5 * (p[:, h - 1] + p[:, h])
        zero = np.flatnonzero(mad == 0.0)
        if len(zero):  # a flat window: the mean absolute deviation, summed as sum() does
            z = dev[zero]
            if PLAIN_SUM:
                mad[zero] = np.cumsum(z, axis=1)[:, -1] / length
            else:
                mad[zero] = [sum(r) / length for r in z.tolist()]
        out[c:c + step] = MAD_TO_SIGMA * mad / SQRT2
    return out


def run_lengths(a: np.ndarray) -> np.ndarray:
    """Consecutive True values ending at each position (0 where False)."""
    idx = np.arange(len(a))
    last_false = np.maximum.accumulate(np.where(a, -1, idx))
    return idx - last_false


# ------------------------------------------------------------------------------- rules


def finite_flags(rule: Rule, x: np.ndarray) -> np.ndarray:
    """The verdicts of a rule without delay on its finite values ``x``, in order."""
    n = len(x)
    flags = np.zeros(n, dtype=bool)
    if isinstance(rule, NeverRule) or n == 0:
        return flags
    if isinstance(rule, ZScoreRule | OlmoRule | PersistentRule):
        mean, sd = moments(x, rule.window)
        start = rule.min_periods if isinstance(rule, OlmoRule) else rule.window
        if n <= start:
            return flags
        xs = x[start:]
        m, s = mean[start - 1:n - 1], sd[start - 1:n - 1]
        if isinstance(rule, PersistentRule):
            with np.errstate(all="ignore"):
                above = xs > rule.multiplier * m
            flags[start:] = run_lengths(above) > rule.patience
            return flags
        z = zscores(xs, m, s)
        if isinstance(rule, OlmoRule):
            flags[start:] = (np.abs(z) if rule.two_sided else z) >= rule.k
        else:
            flags[start:] = z > rule.k
        return flags
    if isinstance(rule, LossRatioRule):
        runmin = np.minimum.accumulate(x)[:-1]
        ok = np.isfinite(runmin) & (runmin > 0)
        with np.errstate(all="ignore"):
            ratio = x[1:] / runmin
        flags[1:] = ok & (ratio > rule.threshold)
        return flags
    if isinstance(rule, DefaultRule) and not rule.multi:
        return DefaultStats(rule, x).spike
    raise Unsupported(type(rule).__name__)


def olmo_hits(x: np.ndarray, window: int = 1000, k: float = 7.0) -> int:
    """How many finite values :class:`.rules.OlmoRule` ``(window, k)`` flags: the OLMo 2
    spike score's numerator (:func:`spikebench.scoring.run.spike_score`)."""
    return int(finite_flags(OlmoRule(window=window, k=k), x[np.isfinite(x)]).sum())


class DefaultStats:
    """:meth:`.rules.DefaultRule._step` over all finite values ``x``: per value its
    transformed ``y``, ``score``, ``level``, floored ``sig`` and verdict ``spike``."""

    def __init__(self, rule: DefaultRule, x: np.ndarray):
        n = len(x)
        self.rule, self.n = rule, n
        if rule.log:
            clamped = np.where(1e-30 > x, 1e-30, x)
            self.y = np.fromiter(map(math.log, clamped.tolist()), float, n)
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
            self.score[j] = x[j] - np.minimum.accumulate(x)[j - 1]
            self.spike[j] = self.score[j] > rule.jump
        if n <= mp:
            return
        rows = np.arange(mp, n)
        lw = rule.level_window
        full = rows[rows >= lw]
        self.level[full] = medians(self.y, full, lw)
        for i in rows[rows < lw]:  # a level window still filling (min_periods < level_window)
            self.level[i] = median(self.y[:i].tolist())
        raw = self._raw_sigma(rows)
        level = self.level[mp:]
        with np.errstate(all="ignore"):
            sig = pymax(pymax(raw, 1e-6 * np.abs(level)), 1e-12)
            self.sig[mp:] = sig
            self.score[mp:] = (self.y[mp:] - level) / sig
        self.spike[mp:] = self.score[mp:] > (rule.ev.p.k_big if rule.ev else rule.k)

    def _raw_sigma(self, rows: np.ndarray) -> np.ndarray:
        """``DefaultRule.sig`` at each robust row: recomputed while ``n < 64``, every
        ``sigma_every`` rows, and on every row while it is 0.0 (a flat stretch)."""
        rule, n, dy = self.rule, self.n, self.dy
        w, every, mp = rule.window, rule.sigma_every, rule.min_periods
        raw = np.zeros(n)
        # Before the diff window is full, and until the schedule is plain: as the rule does.
        a_end = min(n, -(-max(64, w, mp) // every) * every)
        sig = 0.0
        for i in range(mp, a_end):
            if i < 64 or i % every == 0 or sig == 0.0:
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
        return raw[rows]


# ------------------------------------------------------------- the multi-step evidence


class _DiffsAt:
    """The rule's ring of first differences as :class:`.evidence.Evidence` reads it, at
    the row being observed (``k`` differences pushed so far)."""

    def __init__(self, dy: np.ndarray, size: int):
        self.dy, self.size, self.k = dy, size, 0

    def last(self, m: int) -> list[float]:
        m = min(m, self.k, self.size)
        return self.dy[self.k - m:self.k].tolist()


class _BaseAt:
    """The evidence's ring of recent values (``base``), positioned at the observed row."""

    def __init__(self, y: np.ndarray, size: int):
        self.y, self.size, self.i = y, size, 0

    @property
    def count(self) -> int:
        return min(self.i, self.size)

    def last(self, m: int) -> list[float]:
        m = min(m, self.count)
        return self.y[self.i - m:self.i].tolist()

    def push(self, _value: float) -> None:
        self.i += 1


def evidence_flags(rule: DefaultRule, values: np.ndarray) -> np.ndarray:
    """The default rule's final verdicts with multi-step evidence on every row of a series
    (non-finite ones included: they are spikes and end a run), as the monitor pairs them.

    A row's verdict only changes from False to True when a run it belongs to is judged,
    and a run opens only on a row whose residual exceeds ``open``: the real evidence code
    is fed those rows and the run that follows each, nothing else.
    """
    fin = np.isfinite(values)
    x = values[fin]
    st = DefaultStats(rule, x)
    flags = np.ones(len(values), dtype=bool)
    flags[fin] = st.spike
    fidx = np.cumsum(fin) - 1  # finite index of each finite row
    p = rule.ev.p
    robust = np.zeros(len(values), dtype=bool)
    robust[fin] = np.arange(len(x)) >= rule.min_periods
    cands = np.flatnonzero(robust)
    cands = cands[st.score[fidx[cands]] > p.open]
    if not len(cands):
        return flags
    diffs = _DiffsAt(st.dy, rule.diffs.size)
    base = _BaseAt(st.y, p.base_window)
    ev = Evidence(p, diffs)
    ev.base = base  # type: ignore[assignment]  # the positioned view stands in for the ring
    n, c, rows = len(values), 0, ev.delay  # no run lasts `delay` rows (its verdicts' delay)
    while c < len(cands):
        start = int(cands[c])
        f0 = int(fidx[start])
        # Rows of a run are finite but for a last non-finite one (which ends it), so the
        # finite index of its k-th row is f0 + k.
        sl, fl = slice(start, start + rows), slice(f0, f0 + rows)
        fin_r, flag_r = fin[sl].tolist(), flags[sl].tolist()
        y, sc, lv, sg = st.y[fl].tolist(), st.score[fl].tolist(), st.level[fl].tolist(), \
            st.sig[fl].tolist()
        ev.held = []
        held = None
        for k, finite in enumerate(fin_r):
            if finite:
                diffs.k = base.i = f0 + k
                ev.hold(flag_r[k], sc[k])
                ev.observe(y[k], sc[k], lv[k], sg[k])
            else:
                ev.reset()
                ev.hold(True, math.inf)
            if not ev.run:
                held = ev.held
                break
        if held is None:
            if start + len(fin_r) < n:
                raise Unsupported("an evidence run longer than its delay")
            held = ev.flush()  # end of data: what the rule's flush() judges
        for k, h in enumerate(held):
            if h[0]:
                flags[start + k] = True
        c = int(np.searchsorted(cands, start + len(held)))
    return flags
