"""Exact tests for the few seeds a sweep has, and the intervals that invert them.

A sweep compares two arms on matched seeds, so each claim becomes a paired test: the
sign-flip permutation test on per-seed differences (McNemar's exact test when the outcomes
are 0/1). Its 95% interval is the set of effects the test does not reject, so interval and
verdict can never disagree, and with fewer than 6 non-zero pairs no effect can be rejected:
there is then no interval, rather than a thin one that covers less than it says.

Runs compared without a shared seed (``spikebench compare`` over runs whose seeds are
unknown or differ) are two independent samples: the exact two-sample permutation test of
the difference in means (every split of the pooled runs into groups of the two sizes,
enumerated up to :data:`EXACT_SPLITS`, else a seeded sample), and the intervals that invert
it, of a shift (:func:`two_sample_shift_interval`) and of a ratio of means
(:func:`two_sample_relative_interval`).
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

ALPHA = 0.05
EXACT_UP_TO = 16  # pairs for which every sign pattern is enumerated; beyond, a seeded sample
N_SAMPLED = 20_000
EXACT_SPLITS = 50_000  # two-sample splits enumerated up to this many; beyond, a seeded sample


@dataclass(frozen=True)
class Interval:
    """An estimate and its 95% interval; ``lo``/``hi`` None where none exists (``why``)."""

    value: float | None
    lo: float | None
    hi: float | None
    n: int
    method: str
    why: str = ""
    m: int | None = None  # the second sample's size, for a two-sample (unpaired) interval


@lru_cache(maxsize=32)
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


def _boundary(p_of, inside: float, outside: float, breaks: Sequence[float],
              alpha: float = ALPHA) -> float:
    """The edge of the accepted set between an accepted and a rejected point (bisection),
    snapped to a data point it lands on (where the test's p-value jumps), so an interval
    ends at 0, not at 2e-10."""
    for _ in range(64):  # 2^-64 of the bracket: far below any printed digit
        mid = (inside + outside) / 2
        if p_of(mid) >= alpha:
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


def relative_interval(a: Sequence[float], b: Sequence[float],
                      alpha: float = ALPHA) -> Interval:
    """mean(a) / mean(b) - 1 over matched pairs, and the exact interval of relative changes
    c that :func:`ratio_p` does not reject at ratio 1 + c at two-sided level ``alpha`` (a
    ratio of means, so one seed with a tiny baseline cannot dominate). With positive
    baselines each one-sided p is monotone in c (every a - c b falls as c grows), so the
    values not rejected form one interval and bisection finds its ends."""
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
    need = min_pairs(alpha)
    if n < need:
        return Interval(value, None, None, n, method,
                        f"{n} pair(s): an exact test at {100 * (1 - alpha):.4g}% needs {need}")

    def p_of(c):
        return ratio_p(a_, b_, 1 + c)

    breaks = [x / y - 1 for x, y in zip(a_, b_, strict=True) if y != 0]
    return _ratio_ends(p_of, value, breaks, alpha, n, method)


def _ratio_ends(p_of, value: float, breaks: list[float], alpha: float, n: int, method: str,
                m: int | None = None) -> Interval:
    """The interval of relative changes c (at least -1) whose p_of(c) is at least alpha."""
    lo = _boundary(p_of, value, -1.0, breaks, alpha) if p_of(-1.0) < alpha else -1.0
    far = max(1.0, 2 * abs(value))
    while p_of(far) >= alpha and far < 1e9:
        far *= 4
    hi = _boundary(p_of, value, far, breaks, alpha) if p_of(far) < alpha else math.inf
    return Interval(value, lo, hi, n, method, "", m)


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
    tail = 0.5 * betainc(df / 2, 0.5, x)
    return 1 - tail if t >= 0 else tail


def betainc(a: float, b: float, x: float) -> float:
    """Regularised incomplete beta I_x(a, b), by its continued fraction (Lentz)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                     + a * math.log(x) + b * math.log1p(-x))
    if x > (a + 1) / (a + b + 2):
        return 1.0 - betainc(b, a, 1 - x)
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


# --- two independent samples ------------------------------------------------------------------


@lru_cache(maxsize=64)
def _splits(n: int, m: int) -> np.ndarray:
    """Rows of 0/1 over the n + m pooled values, 1 for the first group: every split into
    groups of n and m when there are at most :data:`EXACT_SPLITS`, else a seeded sample.
    Row 0 is always the observed split (the first n values first)."""
    total = n + m
    if math.comb(total, n) <= EXACT_SPLITS:
        idx = np.fromiter(itertools.chain.from_iterable(itertools.combinations(range(total), n)),
                          dtype=np.int64).reshape(-1, n)
        rows = np.zeros((idx.shape[0], total), dtype=bool)
        np.put_along_axis(rows, idx, True, axis=1)
        return rows  # combinations start with (0, ..., n - 1): the observed split
    rng = np.random.default_rng(0)
    order = np.argsort(rng.random((N_SAMPLED, total)), axis=1)[:, :n]
    rows = np.zeros((N_SAMPLED, total), dtype=bool)
    np.put_along_axis(rows, order, True, axis=1)
    rows[0] = False
    rows[0, :n] = True
    return rows


class _TwoSample:
    """The permutation distribution of mean(first group) - mean(second) over the splits of
    :func:`_splits`, for the samples ``a`` and ``b`` under a change of ``a`` by a shift or
    of ``b`` by a factor, computed from sums precomputed once per pair of samples."""

    def __init__(self, a: Sequence[float], b: Sequence[float]):
        self.a = np.asarray([float(x) for x in a], dtype=float)
        self.b = np.asarray([float(x) for x in b], dtype=float)
        self.n, self.m = self.a.size, self.b.size
        rows = _splits(self.n, self.m)
        self.sum_a = rows[:, :self.n] @ self.a  # the a-values that fall in the first group
        self.sum_b = rows[:, self.n:] @ self.b
        self.k = rows[:, :self.n].sum(axis=1).astype(float)  # how many a-values fell there

    def p(self, side: int = 0, shift: float = 0.0, ratio: float = 1.0) -> float:
        """p of "a - shift and ratio x b come from one distribution": the share of splits
        whose difference in means is at least (side +1), at most (-1) the observed one;
        two-sided (0): twice the smaller one-sided p, at most 1, so the two-sided test at
        ALPHA rejects exactly where a one-sided one at ALPHA / 2 does."""
        first = self.sum_a - shift * self.k + ratio * self.sum_b
        total = float(self.a.sum() - shift * self.n + ratio * self.b.sum())
        diff = first / self.n - (total - first) / self.m
        observed = float(diff[0])
        scale = max(float(np.abs(self.a).max()) + abs(shift),
                    abs(ratio) * float(np.abs(self.b).max()), 1e-300)
        tol = 1e-12 * scale
        above = float(np.mean(diff >= observed - tol))
        below = float(np.mean(diff <= observed + tol))
        if side > 0:
            return above
        if side < 0:
            return below
        return min(1.0, 2 * min(above, below))


def smallest_two_sample_p(n: int, m: int) -> float:
    """The smallest one-sided p the exact two-sample test can give with samples of n and m
    (the observed split the most extreme of all, no ties): 1 / C(n + m, n)."""
    return 1.0 / math.comb(n + m, n) if n and m else 1.0


def two_sample_can_reject(n: int, m: int, alpha: float = ALPHA) -> bool:
    """Whether samples of n and m can reach two-sided p < alpha (a one-sided p below
    alpha / 2): 4 and 4 can (1/70), 3 and 4 cannot (1/35)."""
    return smallest_two_sample_p(n, m) < alpha / 2


def min_runs(alpha: float = ALPHA) -> int:
    """The fewest runs per group, equal sizes, with which the two-sample test can reject."""
    k = 1
    while not two_sample_can_reject(k, k, alpha):
        k += 1
    return k


MIN_RUNS = min_runs()
TWO_SAMPLE = "exact two-sample permutation test"


def _too_few(n: int, m: int, alpha: float = ALPHA) -> str:
    k = min_runs(alpha)
    return (f"{n} and {m} run(s): the {TWO_SAMPLE} cannot reject anything at "
            f"{100 * (1 - alpha):.4g}% with fewer than {math.ceil(2 / alpha)} splits (e.g. {k} and "
            f"{k} runs)")


def two_sample_p(a: Sequence[float], b: Sequence[float], side: int = 0,
                 shift: float = 0.0) -> float:
    """p-value of the exact two-sample permutation test of "a - shift and b come from one
    distribution" by the difference in means (``side`` as in :func:`sign_flip_p`, the
    two-sided p twice the smaller one-sided one). An empty sample or an infinite value
    leaves nothing to reject: p = 1."""
    if not len(a) or not len(b) or not all(math.isfinite(float(x)) for x in [*a, *b]):
        return 1.0
    return _TwoSample(a, b).p(side, shift=shift)


def two_sample_shift_interval(a: Sequence[float], b: Sequence[float]) -> Interval:
    """mean(a) - mean(b) and the exact interval of shifts d that the two-sample test of
    ``a - d`` against ``b`` does not reject at 5% (two-sided)."""
    method = "exact two-sample permutation interval (difference in means)"
    n, m = len(a), len(b)
    if not n or not m:
        return Interval(None, None, None, n, method, "a group has no values", m)
    x, y = [float(v) for v in a], [float(v) for v in b]
    value = statistics.fmean(x) - statistics.fmean(y)
    if not two_sample_can_reject(n, m):
        return Interval(value, None, None, n, method, _too_few(n, m), m)
    if max(x + y) == min(x + y) or (max(x) == min(x) and max(y) == min(y)):
        return Interval(value, None, None, n, method, "every run of each group equal", m)
    test = _TwoSample(x, y)

    def p_of(shift):
        return test.p(0, shift=shift)

    span = (max(x) - min(x)) + (max(y) - min(y)) + abs(value) + 1.0
    # The p-value jumps where a shifted a-value crosses a b-value.
    breaks = [u - v for u in x for v in y]
    lo = _boundary(p_of, value, min(breaks) - span, breaks)
    hi = _boundary(p_of, value, max(breaks) + span, breaks)
    return Interval(value, lo, hi, n, method, "", m)


def two_sample_ratio_p(a: Sequence[float], b: Sequence[float], ratio: float,
                       side: int = 0) -> float:
    """p-value of "a and ratio x b come from one distribution" (so mean(a) = ratio x
    mean(b)): the exact two-sample test on a against ratio x b (``side`` +1: against "a is
    more than ratio x b")."""
    if not len(a) or not len(b) or not all(math.isfinite(float(x)) for x in [*a, *b]):
        return 1.0
    return _TwoSample(a, b).p(side, ratio=ratio)


def two_sample_relative_interval(a: Sequence[float], b: Sequence[float],
                                 alpha: float = ALPHA) -> Interval:
    """mean(a) / mean(b) - 1 over two independent samples, and the exact interval of
    relative changes c that :func:`two_sample_ratio_p` does not reject at 1 + c at two-sided
    level ``alpha``. With positive b each split's difference from the observed one grows
    with c, so each one-sided p is monotone in c and the values not rejected are one
    interval."""
    a_, b_ = [float(x) for x in a], [float(x) for x in b]
    method = "exact two-sample permutation interval (ratio of means)"
    n, m = len(a_), len(b_)
    if not n or not m:
        return Interval(None, None, None, n, method, "a group has no values", m)
    if not all(math.isfinite(x) for x in a_ + b_):
        return Interval(None, None, None, n, method, "a censored value is unbounded", m)
    ma, mb = statistics.fmean(a_), statistics.fmean(b_)
    if mb == 0:
        return Interval(math.inf if ma > 0 else None, None, None, n, method,
                        "the baseline's mean is 0", m)
    value = ma / mb - 1
    if not two_sample_can_reject(n, m, alpha):
        return Interval(value, None, None, n, method, _too_few(n, m, alpha), m)
    test = _TwoSample(a_, b_)

    def p_of(c):
        return test.p(0, ratio=1 + c)

    breaks = [x / y - 1 for x in a_ for y in b_ if y != 0]
    return _ratio_ends(p_of, value, breaks, alpha, n, method, m)
