"""Exact paired tests for the few seeds a sweep has, and the intervals that invert them.

A sweep compares two arms on matched seeds, so each claim becomes a paired test: the
sign-flip permutation test on per-seed differences (McNemar's exact test when the outcomes
are 0/1). Its 95% interval is the set of effects the test does not reject, so interval and
verdict can never disagree, and with fewer than 6 non-zero pairs no effect can be rejected:
there is then no interval, rather than a thin one that covers less than it says.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

ALPHA = 0.05
EXACT_UP_TO = 16  # pairs for which every sign pattern is enumerated; beyond, a seeded sample
N_SAMPLED = 20_000


@dataclass(frozen=True)
class Interval:
    """An estimate and its 95% interval; ``lo``/``hi`` None where none exists (``why``)."""

    value: float | None
    lo: float | None
    hi: float | None
    n: int
    method: str
    why: str = ""


def _signs(n: int) -> np.ndarray:
    if n <= EXACT_UP_TO:
        return np.array(list(itertools.product((1.0, -1.0), repeat=n)))
    rng = np.random.default_rng(0)
    sample = rng.choice((1.0, -1.0), size=(N_SAMPLED, n))
    sample[0] = 1.0  # the observed pattern is always one of the permutations
    return sample


def sign_flip_p(z: Sequence[float], side: int = 0) -> float:
    """p-value of the paired sign-flip test of "the z are symmetric about 0".

    ``side`` 0: two-sided; +1: one-sided against "the z lean positive" (the share of sign
    patterns whose sum is at least the observed one); -1: against "they lean negative".
    By the null's symmetry a one-sided p is half the two-sided one in its own direction, so
    a one-sided test at ``ALPHA / 2`` rejects exactly where the two-sided 95% interval
    excludes the value. Exact (every sign pattern) up to :data:`EXACT_UP_TO` values. On 0/1
    outcomes, ``z = recipe - baseline`` makes it McNemar's exact test. An infinite z leaves
    nothing to reject: p = 1.
    """
    x = np.asarray(z, dtype=float)
    if x.size == 0 or not np.isfinite(x).all():
        return 1.0
    x = x[x != 0]
    if x.size == 0:
        return 1.0
    sums = _signs(x.size) @ x
    observed = float(x.sum())
    tol = 1e-12 * max(abs(observed), float(np.abs(x).max()))
    if side > 0:
        return float(np.mean(sums >= observed - tol))
    if side < 0:
        return float(np.mean(sums <= observed + tol))
    return float(np.mean(np.abs(sums) >= abs(observed) - tol))


def min_pairs(alpha: float = ALPHA) -> int:
    """The fewest non-zero pairs with which the test can reach p < alpha: its smallest
    p-value is 2 / 2^n (all pairs in one direction), so 6 at 5%."""
    n = 1
    while 2 * 0.5**n >= alpha:
        n += 1
    return n


MIN_PAIRS = min_pairs()


def _boundary(p_of, inside: float, outside: float, breaks: Sequence[float]) -> float:
    """The edge of the accepted set between an accepted and a rejected point (bisection),
    snapped to a data point it lands on (where the test's p-value jumps), so an interval
    ends at 0, not at 2e-10."""
    for _ in range(80):
        mid = (inside + outside) / 2
        if p_of(mid) >= ALPHA:
            inside = mid
        else:
            outside = mid
    tol = 1e-7 * max(1.0, abs(inside), abs(outside))
    near = [b for b in breaks if abs(b - inside) <= tol]
    return min(near, key=lambda b: abs(b - inside)) if near else inside


def shift_interval(diffs: Sequence[float]) -> Interval:
    """Mean paired difference and the exact interval of shifts d the sign-flip test on
    ``diffs - d`` does not reject at 5%."""
    d = np.asarray([float(x) for x in diffs], dtype=float)
    method = "exact sign-flip interval"
    if d.size == 0:
        return Interval(None, None, None, 0, method, "no matched seeds")
    mean = float(d.mean())
    if d.size < MIN_PAIRS:
        return Interval(mean, None, None, int(d.size), method,
                        f"{d.size} pair(s): an exact test needs {MIN_PAIRS}")
    if float(d.max()) == float(d.min()):
        return Interval(mean, None, None, int(d.size), method, "every pair differs equally")
    span = float(d.max() - d.min()) + abs(mean) + 1.0

    def p_of(shift):
        return sign_flip_p(d - shift)

    breaks = [float(x) for x in d]
    lo = _boundary(p_of, mean, float(d.min()) - span, breaks)
    hi = _boundary(p_of, mean, float(d.max()) + span, breaks)
    return Interval(mean, lo, hi, int(d.size), method)


def ratio_p(a: Sequence[float], b: Sequence[float], ratio: float, side: int = 0) -> float:
    """p-value of "mean(a) = ratio x mean(b)": the sign-flip test on a - ratio x b
    (``side`` as in :func:`sign_flip_p`: +1 against "a is more than ratio x b")."""
    return sign_flip_p([x - ratio * y for x, y in zip(a, b, strict=True)], side)


def relative_interval(a: Sequence[float], b: Sequence[float]) -> Interval:
    """mean(a) / mean(b) - 1 over matched pairs, and the exact interval of relative changes
    c that :func:`ratio_p` does not reject at ratio 1 + c (a ratio of means, so one seed
    with a tiny baseline cannot dominate)."""
    a_, b_ = [float(x) for x in a], [float(x) for x in b]
    method = "exact sign-flip interval (ratio of means)"
    n = len(a_)
    if n == 0:
        return Interval(None, None, None, 0, method, "no matched seeds")
    if not all(math.isfinite(x) for x in a_ + b_):
        return Interval(None, None, None, n, method, "a censored value is unbounded")
    ma, mb = statistics.fmean(a_), statistics.fmean(b_)
    if mb == 0:
        return Interval(math.inf if ma > 0 else None, None, None, n, method,
                        "the baseline's mean is 0")
    value = ma / mb - 1
    if n < MIN_PAIRS:
        return Interval(value, None, None, n, method,
                        f"{n} pair(s): an exact test needs {MIN_PAIRS}")

    def p_of(c):
        return ratio_p(a_, b_, 1 + c)

    breaks = [x / y - 1 for x, y in zip(a_, b_, strict=True) if y != 0]
    lo = _boundary(p_of, value, -1.0, breaks) if p_of(-1.0) < ALPHA else -1.0
    far = max(1.0, 2 * abs(value))
    while p_of(far) >= ALPHA and far < 1e9:
        far *= 4
    hi = _boundary(p_of, value, far, breaks) if p_of(far) < ALPHA else math.inf
    return Interval(value, lo, hi, n, method)


def t_interval(values: Sequence[float], lo: float | None = None,
               hi: float | None = None) -> Interval:
    """Mean and Student-t 95% interval of one arm's values over its seeds, truncated to
    the values possible (``lo``, ``hi``: e.g. 0 and the step budget): the mean cannot lie
    outside them, so a t-interval's end beyond one only claims the impossible."""
    x = [float(v) for v in values]
    method = "t-interval" if lo is None and hi is None else "t-interval, truncated"
    if not x:
        return Interval(None, None, None, 0, method, "no values")
    mean = statistics.fmean(x)
    if len(x) < 2:
        return Interval(mean, None, None, 1, method, "one seed")
    sd = statistics.stdev(x)
    if sd == 0:
        return Interval(mean, None, None, len(x), method, "every seed equal")
    half = t_quantile(1 - ALPHA / 2, len(x) - 1) * sd / math.sqrt(len(x))
    low, high = mean - half, mean + half
    return Interval(mean, low if lo is None else max(lo, low),
                    high if hi is None else min(hi, high), len(x), method)


def t_quantile(p: float, df: int) -> float:
    """Quantile of Student's t with ``df`` degrees of freedom (bisection on its CDF)."""
    lo, hi = 0.0, 1e6
    for _ in range(200):
        mid = (lo + hi) / 2
        if _t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def _t_cdf(t: float, df: int) -> float:
    x = df / (df + t * t)
    tail = 0.5 * _betainc(df / 2, 0.5, x)
    return 1 - tail if t >= 0 else tail


def _betainc(a: float, b: float, x: float) -> float:
    """Regularised incomplete beta I_x(a, b), by its continued fraction (Lentz)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                     + a * math.log(x) + b * math.log1p(-x))
    if x > (a + 1) / (a + b + 2):
        return 1.0 - _betainc(b, a, 1 - x)
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    f = d
    for m in range(1, 300):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            f *= c * d
        if abs(c * d - 1) < 1e-15:
            break
    return front * f / a
